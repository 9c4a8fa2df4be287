package cv

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Two streams of a key, as two ops' partners are drawn (the transform's
// multi-image family keeps its own).
const testStream, otherStream = 0x6d6f73616963, 0x6d69787570

// TestPartnersUniform: a mosaic's partners over 20,000 samples of a
// 50-image dataset are uniform (chi-square, 49 degrees of freedom, neither
// too bad nor too good a fit: 0.01 <= p <= 0.99 as STYLE.md's DALI-style
// tests ask), the same for the same key whatever else was drawn before,
// and other for another epoch and for another stream.
func TestPartnersUniform(t *testing.T) {
	const n, samples = 50, 20000
	counts := make([]float64, n)
	out := make([]int, 3)
	for i := uint64(0); i < samples; i++ {
		Partners(det.Key{Seed: 7, Epoch: 2, Index: i}, testStream, n, out)
		for _, p := range out {
			if p < 0 || p >= n {
				t.Fatalf("partner %d of a dataset of %d", p, n)
			}
			counts[p]++
		}
	}
	want := float64(3*samples) / n
	chi := 0.0
	for _, c := range counts {
		chi += (c - want) * (c - want) / want
	}
	// The 0.01 and 0.99 quantiles of chi-square with 49 degrees of freedom.
	if chi < 28.94 || chi > 74.92 {
		t.Errorf("chi-square %.1f over %d bins: outside [28.94, 74.92] (p outside [0.01, 0.99])", chi, n)
	}
	a, b, c, d := make([]int, 8), make([]int, 8), make([]int, 8), make([]int, 8)
	k := det.Key{Seed: 1, Epoch: 3, Index: 99}
	Partners(k, testStream, 1000, a)
	Partners(det.Key{Seed: 1, Epoch: 4, Index: 99}, testStream, 1000, c)
	Partners(k, otherStream, 1000, d)
	Partners(k, testStream, 1000, b)
	same := func(x, y []int) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) || same(a, c) || same(a, d) {
		t.Errorf("partners of one key %v and again %v; next epoch %v, mixup's %v", a, b, c, d)
	}
}

// TestPartnerCacheReuse: a miss's pixels come from an evicted entry that
// no decode holds (Alloc), never from one held (Get, Put) until it is
// released, and then once only; the cache keeps to its budget.
func TestPartnerCacheReuse(t *testing.T) {
	const n = 3 * 8 * 8
	c := NewPartnerCache(2 * (n + partnerOverhead))
	img := func(b []byte, v byte) kernels.Planes {
		for i := range b {
			b[i] = v
		}
		return kernels.Planes{Pix: b, W: 8, H: 8}
	}
	key := func(i byte) PartnerKey { return c.Key([]byte{i}, 640, 0) }
	r1 := c.Put(key(1), img(c.Alloc(n), 1))
	c.Release(r1)
	r2 := c.Put(key(2), img(c.Alloc(n), 2))
	held, hr, ok := c.Get(key(1)) // held from now on
	if !ok {
		t.Fatal("entry 1 missing")
	}
	c.Release(r2)
	// The cache is full: the next Alloc evicts 2 (1 was used more
	// recently) and takes its pixels.
	b := c.Alloc(n)
	if &b[0] == &held.Pix[0] {
		t.Fatal("Alloc handed out a held image's pixels")
	}
	c.Release(c.Put(key(3), img(b, 3)))
	// Now 1, held, is the oldest: evicted, not reused while held.
	b4 := c.Alloc(n)
	if &b4[0] == &held.Pix[0] || held.Pix[0] != 1 {
		t.Fatal("a held image's pixels reused")
	}
	c.Release(c.Put(key(4), img(b4, 4)))
	c.Release(hr) // 1's pixels now free: kept for Alloc
	// Full again (4, 3): the next Alloc evicts 3, unheld, and takes its.
	b5 := c.Alloc(n)
	if &b5[0] != &b[0] {
		t.Error("the evicted unheld image's pixels not reused")
	}
	_, hr4, _ := c.Get(key(4))
	c.Release(c.Put(key(5), img(b5, 5)))
	// Full (5, 4): 4 is evicted, held, so the pixels kept from 1 are taken.
	if b6 := c.Alloc(n); &b6[0] != &held.Pix[0] {
		t.Error("a released evicted image's pixels not reused")
	} else if b7 := c.Alloc(n); &b7[0] == &b6[0] {
		t.Fatal("the same pixels handed out twice")
	}
	c.Release(hr4)
	if _, _, ok := c.Get(key(1)); ok {
		t.Error("entry 1 still there")
	}
	if st := c.Stats(); st.Bytes > st.Budget || st.Evicted != 4 {
		t.Errorf("stats %+v", st)
	}
}
