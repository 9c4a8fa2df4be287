package makers

import (
	"log/slog"
	"math"
	"sync/atomic"
	"testing"

	"github.com/stoker-dev/stoker/server/internal/coord"
)

// TestVerifyStrictStart: a peer's first batches have every slot compared,
// and each time its Work stream comes up again; then the share decays,
// halving every strictHalfLife batches, to the configured fraction.
func TestVerifyStrictStart(t *testing.T) {
	const f = DefaultVerifyFraction
	v := NewVerifier(f, nil, slog.New(slog.DiscardHandler), func() {})
	a, b := &streamMaker{}, &streamMaker{}
	picked := func(m coord.Maker) int { return len(v.Pick(m, 64, 64)) }
	for k := range strictBatches {
		if n := picked(a); n != 64 {
			t.Fatalf("a new peer's lease %d: %d of 64 slots compared, want all", k, n)
		}
	}
	if n := picked(b); n != 64 {
		t.Errorf("another new peer's first lease: %d of 64 slots compared, want all", n)
	}
	prev := 1.0
	for k := range 100 {
		r := strictRate(k, f)
		if r > prev || r < f || k < strictBatches && r != 1 {
			t.Fatalf("strictRate(%d) = %v after %v: want 1 for the first %d, then non-increasing down to %v", k, r, prev, strictBatches, f)
		}
		prev = r
	}
	if r := strictRate(strictBatches+strictHalfLife-1, f); r != 0.5 {
		t.Errorf("strictRate one half-life after the strict start: %v, want 0.5", r)
	}
	if r := strictRate(40, f); r != f {
		t.Errorf("strictRate(40) = %v, want the configured %v", r, f)
	}
	for range 60 {
		v.Pick(a, 64, 64)
	}
	sum := 0
	for range 2000 {
		sum += picked(a)
	}
	if mean := float64(sum) / 2000; mean > 4*64*f {
		t.Errorf("after its strict start a peer has %.2f of 64 slots compared on average, want about %.2f", mean, 64*f)
	}
	a.streams.Add(1) // its Work stream came up again
	if n := picked(a); n != 64 {
		t.Errorf("a returning peer's first lease: %d of 64 slots compared, want all", n)
	}

	// Parts of batches (cache affinity) count as their share of a batch:
	// a peer's first strictBatches batches' worth of quarter-batch parts
	// are compared whole, as many samples as whole leases would be.
	c := &streamMaker{}
	for k := range 4 * strictBatches {
		if n := len(v.Pick(c, 16, 64)); n != 16 {
			t.Fatalf("a new peer's quarter-batch part %d: %d of 16 slots compared, want all", k, n)
		}
	}
	if r := v.rate(c, 0); r >= 1 {
		t.Errorf("after %d batches' worth of parts the rate is %v: want the strict start over", strictBatches, r)
	}
}

// streamMaker is a peer as the verifier sees it: a maker whose Work
// stream comes up again (Connection).
type streamMaker struct {
	coord.Maker
	streams atomic.Uint64
}

func (m *streamMaker) Connection() uint64 { return m.streams.Load() }

// TestVerifyBound: the expected corrupted samples a peer delivers before
// it is quarantined, lying in one sample per batch from its lease W on
// (the sum over batches k >= W of the chance that none of W..k was
// caught), as the README states them for the default fraction: none from
// its first lease, about 1/f - 1 once the strict start is over, never
// more.
func TestVerifyBound(t *testing.T) {
	const f = DefaultVerifyFraction
	expected := func(w int) float64 {
		sum, missed := 0.0, 1.0
		for k := w; missed > 1e-12; k++ {
			missed *= 1 - strictRate(k, f)
			sum += missed
		}
		return sum
	}
	for _, tc := range []struct {
		w    int
		want float64
	}{{0, 0}, {8, 13}, {16, 115}, {24, 183}, {40, 199}, {1000, 199}} {
		got := expected(tc.w)
		t.Logf("lying from lease %d on: %.1f corrupted samples expected before quarantine", tc.w, got)
		if math.Abs(got-tc.want) > 0.5 || got > (1-f)/f+1e-6 {
			t.Errorf("lying from lease %d on: %.2f expected, the README says %v (never more than %.1f)", tc.w, got, tc.want, (1-f)/f)
		}
	}
}
