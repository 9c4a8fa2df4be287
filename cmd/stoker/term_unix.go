//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminal is f's terminal for --watch, nil when f is not one (a pipe, a
// file): its size is asked at each frame, so a resize is followed.
func terminal(f *os.File) *watchTerm {
	if _, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err != nil {
		return nil
	}
	return &watchTerm{size: func() (int, int) {
		ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
		if err != nil || ws.Col == 0 {
			return watchWidth, 24
		}
		return int(ws.Col), int(ws.Row)
	}}
}
