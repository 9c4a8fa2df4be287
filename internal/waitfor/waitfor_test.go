package waitfor

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a TB that records the failure instead of ending the test
// (Fatalf unwinds with a panic, as testing's ends the goroutine).
type recorder struct{ msg string }

type fatal struct{}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(fatal{})
}

func run(f func(TB)) (msg string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(fatal); !ok {
				panic(p)
			}
			msg = r.msg
		}
	}()
	f(r)
	return ""
}

func TestUntilReturnsWhenTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	if msg := run(func(tb TB) { Until(tb, time.Minute, "the third poll", func() bool { return n.Add(1) == 3 }) }); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if n.Load() != 3 {
		t.Errorf("polled %d times, want 3", n.Load())
	}
}

func TestUntilFailsNamingWhatAndState(t *testing.T) {
	msg := run(func(tb TB) {
		Wait{Within: time.Millisecond, State: func() string { return "queue empty" }}.Until(tb, "a batch", func() bool { return false })
	})
	for _, want := range []string{"a batch did not happen within 1ms", "queue empty"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure %q does not say %q", msg, want)
		}
	}
}

func TestUntilEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg := run(func(tb TB) { Wait{Within: time.Hour, Ctx: ctx}.Until(tb, "a peer", func() bool { return false }) })
	if !strings.Contains(msg, "a peer did not happen: context canceled") {
		t.Errorf("failure %q: want it to name the context's end", msg)
	}
}
