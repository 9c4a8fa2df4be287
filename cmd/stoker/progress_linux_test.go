package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMkdataProgressTerminal: on a terminal, `stoker mkdata` rewrites one
// progress line in place (carriage return, the line cleared), without time
// stamps, shows an ETA while images are left, and ends the line with a
// newline once all N images are written. Its last image is a FIFO the test
// holds (a pipe buffer smaller than an image), so a line with images left
// is drawn before the end whatever the machine's speed.
func TestMkdataProgressTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stoker binary")
	}
	ctx := testCtx(t, hangGuard)
	bin := stokerBinary(t)
	master, slave := openPTY(t, 120, 40)
	const n = 24
	dir := filepath.Join(t.TempDir(), "data")
	held := holdFile(t, filepath.Join(dir, "class02", fmt.Sprintf("%06d.jpg", n-1)))
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
	waitFor(t, ctx, hangGuard, "a line with an ETA while the last image is held", func() bool {
		return strings.Contains(tty.String(), fmt.Sprintf(" of %d (", n)) && strings.Contains(tty.String(), "images/s), ETA ")
	})
	held()
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

// holdFile makes path a FIFO whose pipe holds one page, opened here so
// that a writer's open does not block but its write of more than a page
// does; release drains it, and stops draining once the test ends.
func holdFile(t *testing.T, path string) (release func()) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// Through SyscallConn, not Fd, which would make f blocking: Close
	// then would not end the drain's Read.
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { _, serr = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, os.Getpagesize()) }); err != nil || serr != nil {
		t.Skipf("cannot shrink a pipe: %v %v", err, serr)
	}
	return func() { go io.Copy(io.Discard, f) }
}
