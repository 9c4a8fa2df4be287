package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
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

// TestIndexSaysOneClass: stoker index counts in words that agree with
// the number ("1 class", not "1 classes").
func TestIndexSaysOneClass(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stoker binary")
	}
	ctx := processTest(t, time.Minute)
	out := runIndexCmd(t, ctx, nil, writeDataset(t, 1, 1, 0))
	if !strings.Contains(out, ": imagefolder, 1 sample in 1 object, 1 class, ") {
		t.Errorf("stoker index of one image of one class said %q", out)
	}
}

// TestWatchLineVerdict: status --watch's plain line (piped) shows a
// verdict once: "starting: no verdict ...", not "starting: starting: ...".
func TestWatchLineVerdict(t *testing.T) {
	st := &stokerv1.StatusResponse{Jobs: []*stokerv1.JobStatus{
		{Id: "a", Bottleneck: "starting", Verdict: "starting: no verdict until the trainer has taken batches for a few seconds"},
		{Id: "b", Bottleneck: "decode", Verdict: "decode-bound on 2 cores: add peers or cores"},
		{Id: "c", Bottleneck: "trainer", Verdict: "the trainer is the bottleneck: the GPU is busy"},
	}}
	lines := watchLines("addr", st, nil, time.Unix(0, 0))
	for i, want := range []string{" a starting: no verdict until", " b decode: decode-bound on 2 cores", " c trainer: the trainer is the bottleneck"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %q does not say %q", lines[i], want)
		}
	}
	if strings.Contains(lines[0], "starting: starting:") {
		t.Errorf("line %q says its bottleneck twice", lines[0])
	}
}
