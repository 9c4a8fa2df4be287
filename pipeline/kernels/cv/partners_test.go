package cv

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/det"
)

// TestPartnersUniform: a mosaic's partners over 20,000 samples of a
// 50-image dataset are uniform (chi-square, 49 degrees of freedom, neither
// too bad nor too good a fit: 0.01 <= p <= 0.99 as STYLE.md's DALI-style
// tests ask), the same for the same key whatever else was drawn before,
// and other for another epoch and for the mixup stream.
func TestPartnersUniform(t *testing.T) {
	const n, samples = 50, 20000
	counts := make([]float64, n)
	out := make([]int, 3)
	for i := uint64(0); i < samples; i++ {
		Partners(det.Key{Seed: 7, Epoch: 2, Index: i}, MosaicStream, n, out)
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
	Partners(k, MosaicStream, 1000, a)
	Partners(det.Key{Seed: 1, Epoch: 4, Index: 99}, MosaicStream, 1000, c)
	Partners(k, MixUpStream, 1000, d)
	Partners(k, MosaicStream, 1000, b)
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
