//go:build cgo

package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// goldenPresets pins, per preset and for two seeds (a pair, so that a
// change that happens to leave one seed's bytes alone is still seen), the
// SHA-256 of the fast path's batch of goldenIndices, epoch 3, CHW: a
// refactor of an op, a kernel's SIMD dispatch, or a change of a draw
// cannot drift silently. Like golden_cgo_test.go's, these are the same on
// every architecture (integer kernels, and float ones without fused
// multiply-adds); a change means the bytes trainers get changed, which
// needs raising OutputVersion (identity.go) and pasting the new values
// here (the failure prints them).
var goldenPresets = map[string][2]string{}

// TestGoldenPresets checks every preset's batches against goldenPresets,
// with the kernels' and the resampler's SIMD on and off.
func TestGoldenPresets(t *testing.T) {
	files := memDataset{goldenJPEGs()}
	for _, name := range PresetNames() {
		tr, err := ParseTransform(name, CHW)
		if err != nil {
			t.Fatal(err)
		}
		var got [2]string
		for i, seed := range []uint64{7, 8} {
			e := NewExecutor(2)
			var b Batch
			if err := e.Fill(context.Background(), files, tr, seed, 3, goldenIndices, PadFromBatch, &b); err != nil {
				t.Fatal(err)
			}
			e.Close()
			if len(b.Errors) > 0 || b.N != len(goldenIndices) {
				t.Fatalf("%s: batch of %d samples, errors %v", name, b.N, b.Errors)
			}
			sum := sha256.Sum256(b.Data)
			got[i] = hex.EncodeToString(sum[:])
			// Sample by sample, every SIMD off: the same bytes.
			d := NewDecoder()
			knobsOf(d).simdMax = -1
			h := sha256.New()
			out := make([]byte, tr.SampleBytes())
			for _, idx := range goldenIndices {
				if err := d.Decode(files.files[idx], tr, Key{seed, 3, uint64(idx)}, out); err != nil {
					t.Fatal(err)
				}
				h.Write(out)
			}
			d.Close()
			if scalar := hex.EncodeToString(h.Sum(nil)); scalar != got[i] {
				t.Errorf("%s seed %d: without SIMD the batch is %s, with it %s", name, seed, scalar, got[i])
			}
		}
		if want, ok := goldenPresets[name]; !ok || got != want {
			t.Errorf("%s: SHA-256s %q, want %q (paste them into goldenPresets if the change is meant, and raise OutputVersion)", name, got, want)
		}
	}
}
