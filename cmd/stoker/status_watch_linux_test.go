package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal of cols×rows: its master, read by the
// test, and its slave, the child's stdout.
func openPTY(t *testing.T, cols, rows uint16) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows}); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestStatusWatchTerminal: on a terminal, `stoker status --watch` redraws
// a frame in place (cursor home, lines cleared to their end, each at most
// 80 columns on a wider terminal), shows the job's verdict, and on SIGINT
// ends with exit 0, its cursor shown again.
func TestStatusWatchTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 2*time.Minute)
	srv := watchedServer(t, ctx)
	master, slave := openPTY(t, 120, 50)
	cmd := exec.CommandContext(ctx, stokerBinary(t), "status", "--watch", "--every", "200ms", srv.addr)
	cmd.Stdout = slave
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child holds it
	var out syncBuffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, master); close(copied) }()
	waitFor(t, ctx, time.Minute, "a frame with the job's verdict", func() bool {
		return strings.Contains(out.String(), "▶ decode-bound on 1 local core")
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("status --watch after SIGINT: %v (want exit 0); stderr: %s", err, stderr.String())
	}
	master.Close()
	<-copied
	text := out.String()
	if !strings.Contains(text, ansiHome) || !strings.Contains(text, ansiClearLine) || !strings.Contains(text, ansiShowCursor) {
		t.Errorf("want frames drawn in place and the cursor shown at the end: %q", text[max(0, len(text)-400):])
	}
	frames := strings.Split(text, ansiHome)
	for _, line := range strings.Split(frames[len(frames)-2], "\n") {
		line = strings.NewReplacer(ansiClearLine, "", ansiClearBelow, "", "\r", "").Replace(line)
		if n := utf8.RuneCountInString(line); n > watchWidth {
			t.Errorf("a line of %d columns on a 120-column terminal: %q", n, line)
		}
	}
}
