package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestTopHelp: stoker --help (and -h, help) prints every command with
// what it does, to stdout, and exits 0; no command, or an unknown one,
// prints the same to stderr and exits 2, naming the unknown command.
func TestTopHelp(t *testing.T) {
	bin := stokerBinary(t)
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), out.String(), errOut.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errOut.String()
	}
	for _, h := range []string{"--help", "-h", "help"} {
		code, out, errOut := run(h)
		if code != 0 || errOut != "" {
			t.Errorf("stoker %s: exit %d, stderr %q; want 0 and nothing", h, code, errOut)
		}
		for _, c := range summaries {
			if !strings.Contains(out, "\n  "+c.name+" ") || !strings.Contains(out, c.what) {
				t.Errorf("stoker %s does not say what %s does:\n%s", h, c.name, out)
			}
		}
	}
	if code, _, errOut := run(); code != 2 || !strings.HasPrefix(errOut, "usage: stoker serve|") {
		t.Errorf("stoker alone: exit %d, stderr %q; want 2 and the usage", code, errOut)
	}
	if code, _, errOut := run("serv"); code != 2 || !strings.HasPrefix(errOut, `stoker: unknown command "serv"`) ||
		!strings.Contains(errOut, "serve datasets to trainers") {
		t.Errorf("stoker serv: exit %d, stderr %q; want 2 naming the unknown command, then the usage", code, errOut)
	}
}
