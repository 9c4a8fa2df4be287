package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"sync"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// Golden values for "the bytes of batch k do not depend on the machine that
// made it": peers of any architecture make batches of the same job, and a
// trainer must not be able to tell which machine made which.
//
// Every constant here must pass unchanged on every architecture (amd64,
// arm64, ...) and in both builds (cgo and CGO_ENABLED=0) where the test
// runs; they were checked on amd64 and on arm64 under qemu-user (the
// values of OutputVersion 5 on amd64 only, with and without fused
// multiply-adds: GOAMD64=v3). A failure
// means batches changed: on one machine only, it is a portability bug (a
// fused multiply-add, an architecture-specific math function, a different
// libjpeg-turbo); everywhere, someone changed what the seed semantics
// produce, which changes every job's augmentations.
//
// To change them deliberately: run
//
//	go test -count=1 -run Golden ./pipeline
//	CGO_ENABLED=0 go test -count=1 -run Golden ./pipeline
//
// on amd64 and, if at all possible, on arm64; the failures print the new
// values as Go literals. Paste them here, raise OutputVersion (identity.go:
// servers whose output versions differ refuse to make batches for each
// other) and say in the commit message why the bytes changed.

// TestGoldenPlans pins imagenet-train's crop box and flip for a few image
// sizes and keys (see also TestPlanGolden and TestRNGGolden).
func TestGoldenPlans(t *testing.T) {
	tr, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		w, h           int
		k              det.Key
		cx, cy, cw, ch int
		flip           bool
	}{
		{500, 375, det.Key{Seed: 7, Epoch: 3, Index: 0}, 148, 0, 324, 354, false},
		{500, 375, det.Key{Seed: 7, Epoch: 3, Index: 1}, 73, 16, 272, 334, true},
		{375, 500, det.Key{Seed: 7, Epoch: 3, Index: 2}, 22, 114, 332, 358, true},
		{1600, 1200, det.Key{Seed: 7, Epoch: 3, Index: 3}, 31, 95, 909, 695, false},
		{97, 61, det.Key{Seed: 7, Epoch: 3, Index: 4}, 31, 5, 61, 51, false},
		{4000, 3000, det.Key{Seed: 1, Epoch: 0, Index: 123456789}, 1264, 516, 2608, 2230, false},
		{2000, 100, det.Key{Seed: 7, Epoch: 3, Index: 5}, 933, 0, 133, 100, true}, // no try fits: the center fallback
		{640, 480, det.Key{Seed: 1 << 63, Epoch: 1 << 40, Index: 1<<64 - 2}, 258, 16, 331, 440, true},
	} {
		p, err := geomPlan(tr, tc.w, tc.h, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		if p.CX != tc.cx || p.CY != tc.cy || p.CW != tc.cw || p.CH != tc.ch || p.Flip != tc.flip {
			t.Errorf("%dx%d %+v: crop (%d,%d %dx%d) flip %v, want (%d,%d %dx%d) flip %v; new golden line:\n{%d, %d, Key{%d, %d, %d}, %d, %d, %d, %d, %v},",
				tc.w, tc.h, tc.k, p.CX, p.CY, p.CW, p.CH, p.Flip, tc.cx, tc.cy, tc.cw, tc.ch, tc.flip,
				tc.w, tc.h, tc.k.Seed, tc.k.Epoch, tc.k.Index, p.CX, p.CY, p.CW, p.CH, p.Flip)
		}
	}
}

// goldenPicture is a w x h picture made with integer arithmetic only (no
// math.Sin and the like, whose results may differ between machines):
// gradients, a disc and per-pixel hash noise, so that every resampling
// rounding shows in the output.
func goldenPicture(w, h int, seed uint64) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			n := det.Mix64(seed<<32 ^ uint64(y*w+x))
			dx, dy := x-w/3, y-h/2
			disc := 0
			if dx*dx+dy*dy < w*h/10 {
				disc = 70
			}
			img.SetNRGBA(x, y, color.NRGBA{
				R: byte(230*x/max(w-1, 1) + int(n&15)),
				G: byte(200*y/max(h-1, 1) + disc/2 + int(n>>8&31)),
				B: byte(255 - 180*x/max(w-1, 1) + disc - int(n>>16&7)),
				A: 255,
			})
		}
	}
	return img
}

// goldenJPEGs are the golden batches' images, encoded by image/jpeg, whose
// output is a pure function of its input (integer color conversion and
// DCT, fixed Huffman tables): 4:2:0 color, and gray; sizes that upscale,
// downscale a little, and enough for the fast path's 1/4 (1600x1200) and
// 1/2 (1000x1000) DCT scales under the golden keys. They are made once
// per test binary (17 tests take them: their 5.6 million pixels drawn and
// encoded in Go took seconds a call, tens under -race), and each caller
// gets its own copy of the bytes.
func goldenJPEGs() [][]byte {
	files := goldenJPEGsOnce()
	out := make([][]byte, len(files))
	for i, f := range files {
		out[i] = bytes.Clone(f)
	}
	return out
}

var goldenJPEGsOnce = sync.OnceValue(makeGoldenJPEGs)

// makeGoldenJPEGs draws and encodes goldenJPEGs' images.
func makeGoldenJPEGs() [][]byte {
	var files [][]byte
	for i, c := range []struct {
		w, h, q int
		gray    bool
	}{
		{500, 375, 90, false},
		{375, 500, 85, false},
		{1600, 1200, 92, false},
		{97, 61, 75, false},
		{640, 480, 90, true},
		{333, 251, 95, false},
		{256, 256, 80, true},
		{720, 405, 88, false},
		{1000, 1000, 90, false},
	} {
		var img image.Image = goldenPicture(c.w, c.h, uint64(i))
		if c.gray {
			g := image.NewGray(img.Bounds())
			for p := range c.w * c.h {
				g.Pix[p] = img.(*image.NRGBA).Pix[4*p+1]
			}
			img = g
		}
		files = append(files, encodeJPEG(img, c.q))
	}
	return files
}

// memDataset is a Dataset of encoded images held in memory.
type memDataset struct{ files [][]byte }

func (d memDataset) Len() int            { return len(d.files) }
func (d memDataset) Label(i int) int64   { return int64(i % 3) }
func (d memDataset) Classes() []string   { return []string{"a", "b", "c"} }
func (d memDataset) Name(i int) string   { return fmt.Sprintf("mem/%d.jpg", i) }
func (d memDataset) Fingerprint() string { return "" }
func (d memDataset) Close() error        { return nil }
func (d memDataset) Read(i int, buf []byte) ([]byte, error) {
	return append(buf[:0], d.files[i]...), nil
}

// goldenIndices is the golden batch: every image once, out of order.
var goldenIndices = []int64{5, 2, 7, 0, 8, 3, 6, 1, 4}

// goldenBatchHash makes imagenet-train's batch of goldenIndices for seed 7
// epoch 3 in layout with an Executor made with opts, and returns the
// SHA-256 of its bytes.
func goldenBatchHash(t *testing.T, layout transform.Layout, opts ...Option) string {
	t.Helper()
	return goldenBatchHashMode(t, layout, transform.DecodeExact, opts...)
}

// goldenBatchHashMode is goldenBatchHash with the transform decoding in
// mode.
func goldenBatchHashMode(t *testing.T, layout transform.Layout, mode transform.DecodeMode, opts ...Option) string {
	t.Helper()
	tr, err := transform.ParseTransform("imagenet-train", layout)
	if err != nil {
		t.Fatal(err)
	}
	tr = tr.WithDecode(mode)
	e := NewExecutor(2, opts...)
	defer e.Close()
	var b Batch
	if err := e.Fill(context.Background(), memDataset{goldenJPEGs()}, tr, 7, 3, goldenIndices, PadFromBatch, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Errors) > 0 || b.N != len(goldenIndices) {
		t.Fatalf("batch of %d samples, errors %v", b.N, b.Errors)
	}
	sum := sha256.Sum256(b.Data)
	return hex.EncodeToString(sum[:])
}

// TestGoldenBatchReference pins the bytes of a batch made by the pure-Go
// reference path (image/jpeg, then torch's kernels in resample.go), in both
// builds, with or without fused multiply-adds: the resampling is integer
// sums after a weight setup that rounds every product (checked with
// GOAMD64=v3, which fuses). Until OutputVersion 5 this path resampled
// bilinear with imaging's float code, which a fusing build (arm64)
// rounded differently.
func TestGoldenBatchReference(t *testing.T) {
	for _, tc := range []struct {
		layout transform.Layout
		want   string
	}{
		{transform.CHW, "ef7f8203315d90f10c40deb7bd658a951f6cc5c76332357834eb7103d8c7cc4b"},
		{transform.HWC, "ab38af4b0f708a98c3ac266e667336c05f9251a9dfc9c55d21edb30d9f89a08a"},
	} {
		if got := goldenBatchHash(t, tc.layout, WithReference(true)); got != tc.want {
			t.Errorf("reference path, %s: batch SHA-256 %s, want %s", tc.layout, got, tc.want)
		}
	}
}
