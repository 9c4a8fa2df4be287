package main

import (
	"bytes"
	"errors"
	"flag"
	"os/exec"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/server"
)

// TestServeFlagErrors: a bad `stoker serve` flag is its error and one line
// pointing at --help, never followed by the whole usage; a repeated
// dataset NAME says "duplicate".
func TestServeFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dataset", "/data/train"}, `invalid value "/data/train" for flag -dataset: want NAME=PATH`},
		{[]string{"--dataset", "=/data/train"}, "want NAME=PATH"},
		{[]string{"--dataset", "a=/x", "--dataset", "a=/y"}, `duplicate dataset name "a" (already /x): give each dataset its own NAME`},
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"--workers", "many"}, `invalid value "many" for flag -workers`},
	} {
		fs, _ := serveFlags(&server.Config{Datasets: map[string]string{}})
		var out bytes.Buffer
		fs.SetOutput(&out)
		err := parseFlags(fs, c.args)
		lines := strings.Split(err.Error(), "\n")
		if !errors.As(err, new(usageError)) || len(lines) != 2 || !strings.Contains(lines[0], c.want) ||
			lines[1] != "see 'stoker serve --help' for the flags" {
			t.Errorf("%q: %v; want %q, then the --help line", c.args, err, c.want)
		}
		if out.Len() > 0 {
			t.Errorf("%q printed the usage:\n%s", c.args, out.String())
		}
	}
	fs, _ := serveFlags(&server.Config{Datasets: map[string]string{}})
	var out bytes.Buffer
	fs.SetOutput(&out)
	if err := parseFlags(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "-dataset") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
}

// TestServeFlagErrorProcess: the real binary prints a bad flag's two lines
// and nothing else, and exits 2; --help prints the usage and exits 0.
func TestServeFlagErrorProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := stokerBinary(t)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "serve", "--dataset", "a=/x", "--dataset", "a=/y")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	want := "stoker: serve: invalid value \"a=/y\" for flag -dataset: duplicate dataset name \"a\" (already /x): give each dataset its own NAME\n" +
		"see 'stoker serve --help' for the flags\n"
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || stderr.String() != want {
		t.Errorf("a duplicate dataset: %v, stderr:\n%s\nwant:\n%s", err, stderr.String(), want)
	}
	stderr.Reset()
	cmd = exec.Command(bin, "serve", "--help")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stderr.String(), "-dataset") || !strings.Contains(stderr.String(), "-listen") {
		t.Errorf("serve --help: %v\n%s", err, stderr.String())
	}
}
