//go:build cgo

package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/transform"
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
//
// Both decode modes: the default, DecodeExact (full scale: these hashes
// changed with OutputVersion 4), and DecodeFast (DCT scaling where the crop
// allows: the bytes the default made before that). Both changed with
// OutputVersion 5 (antialiased bilinear became torch's kernel).
func TestGoldenBatchFast(t *testing.T) {
	if !Fast() {
		t.Fatal("cgo build without the fast path")
	}
	files := goldenJPEGs()
	for _, tc := range []struct {
		layout transform.Layout
		mode   transform.DecodeMode
		want   string
	}{
		{transform.CHW, transform.DecodeExact, "baa70f7c79b8fdd9171f2052b5b242e410aa47a147d672463862943a48b71d55"},
		{transform.HWC, transform.DecodeExact, "43847b378a1a3a587a79380fdec7f00b7933c19f5abc4d94bde111af920367c5"},
		{transform.CHW, transform.DecodeFast, "bf1c283ea96f3b2573c547e6cfb8a55fa8a95f89053fcd8d67dbe0b463759fab"},
		{transform.HWC, transform.DecodeFast, "6851bf1e2a750d3047ff44054621df50f8d38fd3880f9f55ea69da4432b83f84"},
	} {
		if got := goldenBatchHashMode(t, tc.layout, tc.mode); got != tc.want {
			t.Errorf("fast path, %s, decode %s: batch SHA-256 %s, want %s", tc.layout, tc.mode, got, tc.want)
		}
		tr, err := transform.ParseTransform("imagenet-train", tc.layout)
		if err != nil {
			t.Fatal(err)
		}
		tr = tr.WithDecode(tc.mode)
		d := NewDecoder()
		knobsOf(d).SIMDMax = -1
		h := sha256.New()
		out := make([]byte, tr.SampleBytes())
		for _, idx := range goldenIndices {
			if err := d.Decode(files[idx], tr, det.Key{Seed: 7, Epoch: 3, Index: uint64(idx)}, out); err != nil {
				t.Fatal(err)
			}
			if d.fast.stats().simd != 0 {
				t.Fatal("SIMD used with simdMax = -1")
			}
			h.Write(out)
		}
		d.Close()
		if got := hex.EncodeToString(h.Sum(nil)); got != tc.want {
			t.Errorf("fast path without SIMD, %s, decode %s: batch SHA-256 %s, want %s", tc.layout, tc.mode, got, tc.want)
		}
	}
}
