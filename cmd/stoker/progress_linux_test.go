package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMkdataProgressTerminal: on a terminal, `stoker mkdata` rewrites one
// progress line in place (carriage return, the line cleared), without time
// stamps, and ends it with a newline once all N images are written.
func TestMkdataProgressTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stoker binary")
	}
	ctx := testCtx(t, hangGuard)
	bin := stokerBinary(t)
	master, slave := openPTY(t, 120, 40)
	const n = 24
	dir := filepath.Join(t.TempDir(), "data")
	cmd := exec.CommandContext(ctx, bin, "mkdata", "--out", dir, "--n", strconv.Itoa(n), "--classes", "3")
	var stdout syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, slave
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child holds it
	var tty syncBuffer
	copied := make(chan struct{})
	go func() { io.Copy(&tty, master); close(copied) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stoker mkdata on a terminal: %v\n%s", err, tty.String())
	}
	// The child's end of the terminal is closed: the copy ends (EIO) once
	// it has read all there was.
	select {
	case <-copied:
	case <-ctx.Done():
		t.Fatalf("reading the terminal: %v", ctx.Err())
	}
	// The terminal turns "\n" into "\r\n".
	text := strings.ReplaceAll(tty.String(), "\r\n", "\n")
	const redraw = "\r\033[K"
	if !strings.HasPrefix(text, redraw) || !strings.HasSuffix(text, "\n") || strings.Count(text, "\n") != 1 {
		t.Fatalf("want one line redrawn in place and ended once: %q", text)
	}
	draws := strings.Split(strings.TrimSuffix(strings.TrimPrefix(text, redraw), "\n"), redraw)
	if len(draws) < 2 {
		t.Fatalf("want the line drawn at the start and redrawn at the end: %q", text)
	}
	var figures []string
	for _, d := range draws {
		f, ok := strings.CutPrefix(d, "writing images: ")
		if !ok {
			t.Fatalf("drawn %q, want \"writing images: ...\" (no time stamp, no prefix)", d)
		}
		figures = append(figures, f)
	}
	checkCounted(t, figures, n, "images")
	if want := fmt.Sprintf("wrote %d images in 3 classes to %s\n", n, dir); stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}
