package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVersion builds stoker as make build does, with the version stamped
// by the linker, and finds that version in `stoker --version`, in serve's
// first log line and in `stoker status` (the server's own).
func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stoker and runs stoker serve")
	}
	ctx := processTest(t, 5*time.Minute)
	const stamped = "v9.8.7-test"
	bin := filepath.Join(t.TempDir(), "stoker")
	build := exec.CommandContext(ctx, "go", "build", "-ldflags",
		"-X github.com/stoker-dev/stoker/internal/version.stamped="+stamped, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, arg := range []string{"--version", "-version", "version"} {
		out, err := exec.CommandContext(ctx, bin, arg).Output()
		if err != nil || string(out) != "stoker "+stamped+"\n" {
			t.Errorf("stoker %s: %q, %v; want %q", arg, out, err, "stoker "+stamped+"\n")
		}
	}
	// Unstamped (a plain go build): still a version, never empty.
	out, err := exec.CommandContext(ctx, stokerBinary(t), "--version").Output()
	if fields := strings.Fields(string(out)); err != nil || len(fields) != 2 || fields[0] != "stoker" {
		t.Errorf("unstamped stoker --version: %q, %v", out, err)
	}

	p := launchServe(t, serveConfig{name: "stamped serve", bin: bin, dataset: writeDataset(t, 8, 2, 0), workers: 1})
	p.waitReady(t, ctx)
	if logs := p.logRecords(); len(logs) == 0 || logs[0]["msg"] != "stoker serve" || logs[0]["version"] != stamped {
		t.Errorf("serve's first log line is not its version: %v", logs[:min(1, len(logs))])
	}
	var buf bytes.Buffer
	if err := statusTo(&buf, []string{p.addr}); err != nil {
		t.Fatal(err)
	}
	if want := p.addr + ": stoker " + stamped + ","; !strings.HasPrefix(buf.String(), want) {
		t.Errorf("status does not start with %q:\n%s", want, buf.String())
	}
}
