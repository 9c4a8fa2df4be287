//go:build cgo

package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestGoldenBatchFast pins the bytes of a batch made by the libjpeg-turbo
// fast path (see golden_test.go for what the constants mean and how to
// change them). They must be the same on every architecture: turbo.c's
// resampler is integer arithmetic after a float filter setup compiled
// without fused multiply-adds, and libjpeg-turbo's accurate integer IDCT,
// upsampling and color conversion give the same bytes with and without
// SIMD (SSE2, NEON). They do depend on libjpeg-turbo's version (these are
// 2.1.5's): every peer must run the same one, and this test is what tells.
//
// The batch is also made sample by sample with the resampler's SIMD off,
// to the same hash: the SSE2 and scalar passes (what other architectures
// run) must agree to the bit.
func TestGoldenBatchFast(t *testing.T) {
	if !Fast() {
		t.Fatal("cgo build without the fast path")
	}
	files := goldenJPEGs()
	for _, tc := range []struct {
		layout Layout
		want   string
	}{
		{CHW, "e2a656de964d744a921ec02a85e8bcf66f37b831d2242c45b5e33862013a620f"},
		{HWC, "830970ff81d369ea3951352b9d252601e3d5e5c16c100b2ecfb7a84e01185174"},
	} {
		if got := goldenBatchHash(t, tc.layout); got != tc.want {
			t.Errorf("fast path, %s: batch SHA-256 %s, want %s", tc.layout, got, tc.want)
		}
		tr, err := ParseTransform("imagenet-train", tc.layout)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder()
		knobsOf(d).simdMax = -1
		h := sha256.New()
		out := make([]byte, tr.SampleBytes())
		for _, idx := range goldenIndices {
			if err := d.Decode(files[idx], tr, Key{Seed: 7, Epoch: 3, Index: uint64(idx)}, out); err != nil {
				t.Fatal(err)
			}
			if d.fast.stats().simd != 0 {
				t.Fatal("SIMD used with simdMax = -1")
			}
			h.Write(out)
		}
		d.Close()
		if got := hex.EncodeToString(h.Sum(nil)); got != tc.want {
			t.Errorf("fast path without SIMD, %s: batch SHA-256 %s, want %s", tc.layout, got, tc.want)
		}
	}
}
