package storetest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fatalTB records a Fatalf and ends the goroutine, as testing's does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// pathOf runs tl.path on a fatalTB in its own goroutine and returns the
// failure, "" when there was none.
func pathOf(t *testing.T, tl tool) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tl.path(f)
	}()
	<-done
	return f.msg
}

// TestMissingStoreFails: a store that is not installed fails the test and
// says to run make setup; it never skips.
func TestMissingStoreFails(t *testing.T) {
	t.Setenv("STOKER_NO_SUCH_STORE", "")
	msg := pathOf(t, tool{name: "no-such-store", envVar: "STOKER_NO_SUCH_STORE", module: "example.com/x", version: "v1.0.0"})
	if !strings.Contains(msg, "run make setup") || !strings.Contains(msg, "no-such-store v1.0.0 is not installed") {
		t.Errorf("failure %q, want it to say the store is not installed and to run make setup", msg)
	}
	t.Setenv("STOKER_NO_SUCH_STORE", "/nonexistent/store")
	msg = pathOf(t, tool{name: "no-such-store", envVar: "STOKER_NO_SUCH_STORE", module: "example.com/x", version: "v1.0.0"})
	if !strings.Contains(msg, "STOKER_NO_SUCH_STORE=/nonexistent/store") {
		t.Errorf("failure %q, want it to name the variable", msg)
	}
}

// TestWrongVersionFails: a store of another version in .bin fails the test
// (versitygw's own build stands in, against a pin it does not meet).
func TestWrongVersionFails(t *testing.T) {
	t.Setenv(versitygw.envVar, "")
	if msg := pathOf(t, versitygw); msg != "" {
		t.Fatalf("the pinned versitygw: %s", msg)
	}
	other := versitygw
	other.version = "v0.0.1"
	msg := pathOf(t, other)
	if !strings.Contains(msg, "the tests want v0.0.1: run make setup") {
		t.Errorf("failure %q, want it to name the pinned version and make setup", msg)
	}
}
