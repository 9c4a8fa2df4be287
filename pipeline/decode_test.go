package pipeline

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/disintegration/imaging"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// photoGlob is the repository's set of real photos, relative to this
// package (see fastPhotoDir): 4:2:0 baseline files only, the plain ones.
const photoGlob = "../testdata/photos/*/[0-9][0-9][0-9][0-9][0-9][0-9].jpg"

// photos returns up to n real photos from the repository's test set (sorted
// by path). The set is committed: its absence fails the test.
func photos(t *testing.T, n int) [][]byte {
	t.Helper()
	paths, _ := filepath.Glob(photoGlob)
	slices.Sort(paths)
	if len(paths) == 0 {
		t.Fatal("no photos at " + photoGlob)
	}
	var out [][]byte
	for _, p := range paths[:min(n, len(paths))] {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// pyRoundHalf is Python's round(x / 2) for an integer x: half to even.
func pyRoundHalf(x int) int {
	q := x / 2
	if x%2 == 1 && q%2 == 1 {
		q++
	}
	return q
}

// torchResizeNRGBA is torchvision's resize of a whole image to w x h,
// bilinear with antialias, by torch's uint8 kernels (resampleTorch: their
// bytes are pinned to torchvision's by TestGoldenInterpTorch), as an image:
// the reference tests' first step, done without the plan's fused geometry.
func torchResizeNRGBA(src *image.NRGBA, w, h int) *image.NRGBA {
	b := src.Bounds()
	p := transform.SamplePlan{Geom: transform.CropResize, SrcW: b.Dx(), SrcH: b.Dy(), CW: b.Dx(), CH: b.Dy(), OutW: w, OutH: h, Antialias: true}
	rgb := make([]byte, 3*w*h)
	resampleTorch(src, &p, transform.HWC, rgb)
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		copy(img.Pix[4*i:], rgb[3*i:3*i+3])
		img.Pix[4*i+3] = 255
	}
	return img
}

// TestReferenceEval checks the reference path's imagenet-eval output on real
// photos against torchvision's steps done one at a time: Resize(256) of the
// whole image, the shorter side to 256, the longer one int(256 * long /
// short) (integer arithmetic here), bilinear with antialias; then
// CenterCrop(224) at round((size - 224) / 2), cut from the resized image.
// The reference path resizes only the kept outputs, from the crop's span.
func TestReferenceEval(t *testing.T) {
	eval, _ := transform.ParseTransform("imagenet-eval", transform.CHW)
	d := NewDecoder(WithReference(true))
	defer d.Close()
	for i, data := range photos(t, 3) {
		src, err := imaging.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		W, H := src.Bounds().Dx(), src.Bounds().Dy()
		rw, rh := 256, 256
		if W <= H {
			rh = 256 * H / W
		} else {
			rw = 256 * W / H
		}
		x0, y0 := pyRoundHalf(rw-224), pyRoundHalf(rh-224)
		img := imaging.Crop(torchResizeNRGBA(imaging.Clone(src), rw, rh), image.Rect(x0, y0, x0+224, y0+224))
		want := make([]byte, eval.SampleBytes())
		packNRGBA(img, transform.CHW, want)
		got := make([]byte, eval.SampleBytes())
		if err := d.Decode(data, eval, det.Key{Index: uint64(i)}, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			maxd, mean := diffStats(got, want)
			t.Errorf("photo %d (%dx%d -> %dx%d, crop at %d,%d): differs from Resize+CenterCrop: max %v mean %.2f", i, W, H, rw, rh, x0, y0, maxd, mean)
		}
	}
}

// TestReferenceTrain checks the training transform: crop the plan's box of
// the source, resize it to 224x224 and flip when the plan says so.
func TestReferenceTrain(t *testing.T) {
	train, _ := transform.ParseTransform("imagenet-train", transform.HWC)
	d := NewDecoder(WithReference(true))
	defer d.Close()
	data := photos(t, 1)[0]
	src, err := imaging.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	flips := 0
	for i := range uint64(4) {
		k := det.Key{Seed: 3, Index: i}
		p, err := geomPlan(train, src.Bounds().Dx(), src.Bounds().Dy(), k)
		if err != nil {
			t.Fatal(err)
		}
		img := torchResizeNRGBA(imaging.Crop(src, image.Rect(p.CX, p.CY, p.CX+p.CW, p.CY+p.CH)), 224, 224)
		if p.Flip {
			img = imaging.FlipH(img)
			flips++
		}
		want := make([]byte, train.SampleBytes())
		packNRGBA(img, transform.HWC, want)
		got := make([]byte, train.SampleBytes())
		if err := d.Decode(data, train, k, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("key %+v: differs from crop (%d,%d %dx%d) + resize + flip %v", k, p.CX, p.CY, p.CW, p.CH, p.Flip)
		}
	}
	if flips == 0 || flips == 4 {
		t.Logf("flips in 4 keys: %d (the test covers one case of flip only)", flips)
	}
}

// TestLayouts: HWC is CHW transposed, for uint8 and float samples and both
// decoders.
func TestLayouts(t *testing.T) {
	data := encodeJPEG(testPicture(80, 60), 90)
	norm := opspkg.Op{Kind: opspkg.OpNormalize, Args: &opspkg.NormalizeArgs{Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}}}
	for _, dk := range decoderKinds {
		for _, float := range []bool{false, true} {
			ops := []opspkg.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{12, 20}}, {Kind: opspkg.OpRandomHorizontalFlip, P: 0.5}, {Kind: opspkg.OpColorJitter, Args: &opspkg.ColorJitterArgs{Saturation: 0.5}}}
			elem := 1
			if float {
				ops, elem = append(ops, norm), 4
			}
			chw, hwcT := mustTransform(t, transform.CHW, ops...), mustTransform(t, transform.HWC, ops...)
			d := NewDecoder(dk.opts...)
			a, b := make([]byte, chw.SampleBytes()), make([]byte, hwcT.SampleBytes())
			for i := range uint64(3) {
				k := det.Key{Seed: 8, Index: i}
				if err := d.Decode(data, chw, k, a); err != nil {
					t.Fatal(err)
				}
				if err := d.Decode(data, hwcT, k, b); err != nil {
					t.Fatal(err)
				}
				const h, w = 12, 20
				for c := range 3 {
					for y := range h {
						for x := range w {
							ca := a[elem*((c*h+y)*w+x):][:elem]
							hb := b[elem*((y*w+x)*3+c):][:elem]
							if !bytes.Equal(ca, hb) {
								t.Fatalf("%s float=%v key %d: CHW[%d,%d,%d] != HWC[%d,%d,%d]", dk.name, float, i, c, y, x, y, x, c)
							}
						}
					}
				}
			}
			d.Close()
		}
	}
}

// TestStepsWiring: Decode with ops after the geometry is the sample
// without them, then the steps the ops drew, run by the kernels; with
// Normalize after, that again normalized; in HWC, the same transposed. The
// geometry's streams do not depend on the ops after it.
func TestStepsWiring(t *testing.T) {
	data := encodePNG(testPicture(64, 48))
	geo := []opspkg.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{16, 16}}, {Kind: opspkg.OpRandomHorizontalFlip, P: 0.5}}
	ops := []opspkg.Op{opspkg.ColorJitterOp(0.8, 0.8, 0.8, 0.2), {Kind: opspkg.OpRandomVerticalFlip, P: 0.5},
		{Kind: opspkg.OpRandomApply, P: 0.5, Ops: []opspkg.Op{{Kind: opspkg.OpRandomInvert, P: 1}, {Kind: opspkg.OpRandomSolarize, P: 0.5, Args: &opspkg.SolarizeArgs{Threshold: 100}}}}}
	norm := opspkg.Op{Kind: opspkg.OpNormalize, Args: &opspkg.NormalizeArgs{Mean: [3]float64{0.5, 0.4, 0.3}, Std: [3]float64{0.2, 0.25, 0.3}}}
	plain := mustTransform(t, transform.CHW, geo...)
	withOps := mustTransform(t, transform.CHW, append(slices.Clone(geo), ops...)...)
	full := mustTransform(t, transform.CHW, append(append(slices.Clone(geo), ops...), norm)...)
	hwcT := mustTransform(t, transform.HWC, append(slices.Clone(geo), ops...)...)
	d := NewDecoder()
	defer d.Close()
	drew := 0
	for i := range uint64(20) {
		k := det.Key{Seed: 4, Index: i}
		want := make([]byte, plain.SampleBytes())
		if err := d.Decode(data, plain, k, want); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, withOps.SampleBytes())
		if err := d.Decode(data, withOps, k, got); err != nil {
			t.Fatal(err)
		}
		steps := d.plan.Views[0].Steps // what the decode drew (its trace: TestTraceIsTheDecodersPlan)
		drew += len(steps)
		var s kernels.Scratch
		for j := range steps {
			fn.Apply(kernels.Planes{Pix: want, W: 16, H: 16}, &steps[j], &s)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("key %d: the sample differs from its steps run on the plain sample", i)
		}
		wantF := make([]byte, full.SampleBytes())
		normalize(want, wantF, transform.CHW, full.Needs().Norm)
		gotF := make([]byte, full.SampleBytes())
		if err := d.Decode(data, full, k, gotF); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotF, wantF) {
			t.Errorf("key %d: normalized sample differs from normalize(the sample)", i)
		}
		gotH := make([]byte, hwcT.SampleBytes())
		if err := d.Decode(data, hwcT, k, gotH); err != nil {
			t.Fatal(err)
		}
		wantH := make([]byte, len(want))
		kernels.CHWToHWC(want, wantH)
		if !bytes.Equal(gotH, wantH) {
			t.Errorf("key %d: the HWC sample is not the CHW one transposed", i)
		}
	}
	if drew == 0 {
		t.Fatalf("20 keys drew no steps")
	}
}

// TestNormalizeKnownPixel decodes a flat image through Normalize and checks
// every float32 (little-endian) against (v/255 - mean) / std.
func TestNormalizeKnownPixel(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 20, 10))
	for i := 0; i < len(img.Pix); i += 4 {
		copy(img.Pix[i:], []byte{200, 100, 50, 255})
	}
	data := encodePNG(img)
	mean, std := [3]float64{0.485, 0.456, 0.406}, [3]float64{0.229, 0.224, 0.225}
	want := [3]float32{}
	for c, v := range []float64{200, 100, 50} {
		want[c] = float32((v/255 - mean[c]) / std[c]) // 1.4612, -0.2570, -0.9255
	}
	for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
		tr := mustTransform(t, layout,
			opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{6, 8}},
			opspkg.Op{Kind: opspkg.OpRandomHorizontalFlip, P: 0.5},
			opspkg.Op{Kind: opspkg.OpNormalize, Args: &opspkg.NormalizeArgs{Mean: mean, Std: std}})
		for _, dk := range decoderKinds {
			d := NewDecoder(dk.opts...)
			out := make([]byte, tr.SampleBytes())
			if err := d.Decode(data, tr, det.Key{Index: 1}, out); err != nil {
				t.Fatal(err)
			}
			d.Close()
			for i := range 3 * 6 * 8 {
				c := i / 48
				if layout == transform.HWC {
					c = i % 3
				}
				got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
				if math.Abs(float64(got-want[c])) > 1e-5 {
					t.Fatalf("%v %s: value %d (channel %d) = %v, want %v", layout, dk.name, i, c, got, want[c])
				}
			}
		}
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	data := encodePNG(testPicture(64, 48))
	tr := smallTrain(t)
	d := NewDecoder()
	defer d.Close()
	if err := d.Decode(data, tr, det.Key{}, make([]byte, tr.SampleBytes()-1)); !errors.Is(err, errs.Unsupported) {
		t.Errorf("short output buffer: %v, want ErrUnsupported", err)
	}
	for _, budget := range []int64{64*48 - 1, 0} {
		small := NewDecoder(WithPixelBudget(budget))
		err := small.Decode(data, tr, det.Key{}, make([]byte, tr.SampleBytes()))
		small.Close()
		if !errors.Is(err, errs.TooLarge) {
			t.Errorf("budget %d: %v, want ErrTooLarge", budget, err)
		}
	}
	exact := NewDecoder(WithPixelBudget(64 * 48))
	defer exact.Close()
	if err := exact.Decode(data, tr, det.Key{}, make([]byte, tr.SampleBytes())); err != nil {
		t.Errorf("image exactly at the budget: %v", err)
	}
}

// TestEmptyCrop: RandomResizedCrop's fallback rounds a side to zero on an
// image much thinner than its ratio range (torchvision's formula does the
// same). That is a per-sample ErrUnsupported on both paths: the reference
// path used to return a sample of stale bytes without an error, the fast
// path a bare "bad geometry". Found by FuzzTransform.
func TestEmptyCrop(t *testing.T) {
	tr := mustTransform(t, transform.CHW, opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &transform.RRCArgs{Ratio: [2]float64{3, 4}}})
	for _, img := range [][]byte{encodePNG(testGray(1, 10)), encodeJPEG(testGray(1, 10), 90)} {
		for _, dk := range decoderKinds {
			d := NewDecoder(dk.opts...)
			err := d.Decode(img, tr, det.Key{Seed: 1}, make([]byte, tr.SampleBytes()))
			d.Close()
			if !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "is empty") {
				t.Errorf("%s decoder, 1x10 image: %v, want ErrUnsupported: empty crop", dk.name, err)
			}
		}
	}
}

// TestDecoderReuse runs one Decoder over images and transforms of changing
// sizes, uint8 and float, and checks each against a fresh Decoder: scratch
// reused across calls must not leak between them.
func TestDecoderReuse(t *testing.T) {
	norm := opspkg.Op{Kind: opspkg.OpNormalize, Args: &opspkg.NormalizeArgs{Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5}}}
	inputs := [][]byte{
		encodeJPEG(testPicture(90, 70), 90),
		encodePNG(testPicture(30, 50)),
		encodeJPEG(testGray(64, 64), 90),
	}
	trs := []*transform.Transform{
		mustTransform(t, transform.CHW, opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{28, 28}}, norm),
		mustTransform(t, transform.HWC, opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{8, 12}}),
		mustTransform(t, transform.CHW, opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{40, 40}}, opspkg.Op{Kind: opspkg.OpRandomHorizontalFlip, P: 1}, norm),
		mustTransform(t, transform.CHW, opspkg.Op{Kind: transform.OpResize, Size: [2]int{24, 24}}),
	}
	for _, dk := range decoderKinds {
		reused := NewDecoder(dk.opts...)
		for round := range 2 {
			for i, data := range inputs {
				for j, tr := range trs {
					k := det.Key{Seed: uint64(round), Index: uint64(i)}
					got := make([]byte, tr.SampleBytes())
					if err := reused.Decode(data, tr, k, got); err != nil {
						t.Fatal(err)
					}
					fresh := NewDecoder(dk.opts...)
					want := make([]byte, tr.SampleBytes())
					if err := fresh.Decode(data, tr, k, want); err != nil {
						t.Fatal(err)
					}
					fresh.Close()
					if !bytes.Equal(got, want) {
						t.Errorf("%s: input %d transform %d: reused decoder differs from a fresh one", dk.name, i, j)
					}
				}
			}
		}
		reused.Close()
	}
}

// TestGrayFlat: a flat gray source stays that gray through resize, crop
// and flip, on both paths (no color cast from gray handling).
func TestGrayFlat(t *testing.T) {
	img := image.NewGray(image.Rect(0, 0, 70, 50))
	for i := range img.Pix {
		img.Pix[i] = 99
	}
	for name, data := range map[string][]byte{"jpeg": encodeJPEG(img, 95), "png": encodePNG(img)} {
		for _, dk := range decoderKinds {
			d := NewDecoder(dk.opts...)
			tr := smallTrain(t)
			out := make([]byte, tr.SampleBytes())
			if err := d.Decode(data, tr, det.Key{Index: 2}, out); err != nil {
				t.Fatal(err)
			}
			d.Close()
			for i, v := range out {
				if v < 98 || v > 100 {
					t.Fatalf("%s %s: byte %d = %d, want 99", name, dk.name, i, v)
				}
			}
		}
	}
}

// TestCenterCropPads: a CenterCrop larger than the image, alone or after
// Resize, on one side or both, is torchvision's F.center_crop of it: the
// image padded with zeros, (crop - size) // 2 before and the rest after,
// then cropped; flipped after, as horizontal_flip of that. Checked against
// a padding done here of the same decode at full size, on both paths and
// layouts, several views included.
func TestCenterCropPads(t *testing.T) {
	src := testPicture(61, 40) // odd width: the paddings differ by one
	padTestDecodes(t, src, func(enc string, data []byte, ref bool, d *Decoder, layout transform.Layout, full []byte) {
		for _, c := range []struct {
			ops    []opspkg.Op
			h, w   int // the crop
			vh, vw int // the visible part: the image, or its middle
		}{
			{[]opspkg.Op{{Kind: transform.OpCenterCrop, Size: [2]int{100, 90}}}, 100, 90, 40, 61},
			{[]opspkg.Op{{Kind: transform.OpCenterCrop, Size: [2]int{44, 30}}}, 44, 30, 40, 30},
			{[]opspkg.Op{{Kind: transform.OpCenterCrop, Size: [2]int{20, 64}}}, 20, 64, 20, 61},
			{[]opspkg.Op{{Kind: transform.OpResize, Size: [2]int{40, 61}}, {Kind: transform.OpCenterCrop, Size: [2]int{45, 66}}}, 45, 66, 40, 61},
			{[]opspkg.Op{{Kind: transform.OpCenterCrop, Size: [2]int{43, 64}}, {Kind: opspkg.OpRandomHorizontalFlip, P: 1}}, 43, 64, 40, 61},
		} {
			tr := mustTransform(t, layout, c.ops...)
			got := make([]byte, tr.SampleBytes())
			if err := d.Decode(data, tr, det.Key{}, got); err != nil {
				t.Fatalf("%v: %v", c.ops, err)
			}
			flip := len(c.ops) > 1 && c.ops[1].Kind == opspkg.OpRandomHorizontalFlip
			want := padReference(full, 61, 40, c.w, c.h, c.vw, c.vh, flip, layout)
			if !bytes.Equal(got, want) {
				t.Errorf("%s ref=%v %s %v: not the zero-padded crop", enc, ref, layout, c.ops)
			}
			tr2, err := transform.NewViews(layout, transform.ViewGroup{Count: 2, Ops: c.ops}, transform.ViewGroup{Count: 1, Ops: []opspkg.Op{{Kind: transform.OpCenterCrop, Size: [2]int{40, 61}}}})
			if err != nil {
				t.Fatal(err)
			}
			got2 := make([]byte, tr2.SampleBytes())
			if err := d.Decode(data, tr2, det.Key{}, got2); err != nil {
				t.Fatal(err)
			}
			n := len(want)
			if !bytes.Equal(got2[:n], want) || !bytes.Equal(got2[n:2*n], want) || !bytes.Equal(got2[2*n:], full) {
				t.Errorf("%s ref=%v %s %v: several views: not each view's padded crop", enc, ref, layout, c.ops)
			}
		}
	})
}

// padReference is torchvision's center_crop of a w x h image (full, in
// layout) to cw x ch where it pads: the image's centre vw x vh pixels at
// ((cw - w) // 2, (ch - h) // 2) where the crop is wider (taller), zeros
// around; flipped horizontally if asked.
func padReference(full []byte, w, h, cw, ch, vw, vh int, flip bool, layout transform.Layout) []byte {
	out := make([]byte, 3*cw*ch)
	ox, oy := max(cw-w, 0)/2, max(ch-h, 0)/2
	sx, sy := transform.CenterOffset(w, vw), transform.CenterOffset(h, vh)
	if vw == w {
		sx = 0
	}
	if vh == h {
		sy = 0
	}
	at := func(l transform.Layout, c, x, y, w, h int) int {
		if l == transform.HWC {
			return 3*(y*w+x) + c
		}
		return c*w*h + y*w + x
	}
	for c := range 3 {
		for y := range vh {
			for x := range vw {
				dx := ox + x
				if flip {
					dx = cw - 1 - dx
				}
				out[at(layout, c, dx, oy+y, cw, ch)] = full[at(layout, c, sx+x, sy+y, w, h)]
			}
		}
	}
	return out
}

// TestExactRandomCrop: RandomCrop's samples are torchvision's pad (constant
// fill) then crop at the traced top and left, of the whole decode, for
// crops inside the image, padded, pad_if_needed on one side or both, all
// padding, flipped after; on both paths and layouts. The positions cover
// every possible top and left. Bytes against a reference on one goroutine
// (24,000 decodes): an exactness test.
func TestExactRandomCrop(t *testing.T) {
	exactTest(t)
	src := testPicture(61, 40)
	fill := [3]float64{10, 20, 30}
	padTestDecodes(t, src, func(enc string, data []byte, ref bool, d *Decoder, layout transform.Layout, full []byte) {
		for _, op := range []opspkg.Op{
			{Kind: transform.OpRandomCrop, Size: [2]int{32, 32}},
			{Kind: transform.OpRandomCrop, Size: [2]int{40, 40}, Args: &transform.RandomCropArgs{Padding: [4]int{4, 4, 4, 4}, Filling: opspkg.Filling{Fill: fill}}},
			{Kind: transform.OpRandomCrop, Size: [2]int{50, 70}, Args: &transform.RandomCropArgs{PadIfNeeded: true, Filling: opspkg.Filling{Fill: fill}}},
			{Kind: transform.OpRandomCrop, Size: [2]int{44, 30}, Args: &transform.RandomCropArgs{Padding: [4]int{1, 0, 2, 0}, PadIfNeeded: true}},
			{Kind: transform.OpRandomCrop, Size: [2]int{20, 20}, Args: &transform.RandomCropArgs{Padding: [4]int{90, 3, 0, 5}, Filling: opspkg.Filling{Fill: fill}}},
		} {
			for _, flip := range []bool{false, true} {
				ops := []opspkg.Op{op}
				if flip {
					ops = append(ops, opspkg.Op{Kind: opspkg.OpRandomHorizontalFlip, P: 0.5})
				}
				tr := mustTransform(t, layout, ops...)
				tops, lefts := map[int]bool{}, map[int]bool{}
				for i := range 600 {
					k := det.Key{Seed: 9, Index: uint64(i)}
					got := make([]byte, tr.SampleBytes())
					if err := d.Decode(data, tr, k, got); err != nil {
						t.Fatalf("%v %v: %v", op.Size, opspkg.ArgsOf[transform.RandomCropArgs](&op), err)
					}
					steps, err := transform.ParseTrace(d.AppendTrace(nil))
					if err != nil {
						t.Fatal(err)
					}
					want, top, left := padCropReference(full, 61, 40, steps, layout)
					tops[top], lefts[left] = true, true
					if !bytes.Equal(got, want) {
						t.Fatalf("%s ref=%v %s %v %v flip=%v sample %d: not the padded crop of the trace %s", enc, ref, layout, op.Size, opspkg.ArgsOf[transform.RandomCropArgs](&op), flip, i, d.AppendTrace(nil))
					}
				}
				ca := opspkg.ArgsOf[transform.RandomCropArgs](&op)
				pw := 61 + ca.Padding[0] + ca.Padding[2]
				ph := 40 + ca.Padding[1] + ca.Padding[3]
				if ca.PadIfNeeded {
					pw, ph = max(pw, 2*op.Size[1]-pw), max(ph, 2*op.Size[0]-ph)
				}
				// every position where there are few (132 lefts in
				// 600 draws: most)
				covered := func(n, want int) bool { return n == want || want > 60 && n*10 >= want*9 }
				if !covered(len(tops), ph-op.Size[0]+1) || !covered(len(lefts), pw-op.Size[1]+1) {
					t.Errorf("%s: %d tops and %d lefts drawn in 600 samples, of %d and %d", op.Kind, len(tops), len(lefts), ph-op.Size[0]+1, pw-op.Size[1]+1)
				}
			}
		}
	})
	if _, err := transform.NewTransform(transform.CHW, opspkg.Op{Kind: transform.OpRandomCrop, Size: [2]int{8, 8}, Args: &transform.RandomCropArgs{Filling: opspkg.Filling{Fill: [3]float64{1.5}}}}); !errors.Is(err, errs.Unsupported) {
		t.Errorf("fill 1.5: %v, want refused", err)
	}
	tr := mustTransform(t, transform.CHW, opspkg.Op{Kind: transform.OpRandomCrop, Size: [2]int{100, 100}})
	if err := NewDecoder().Decode(encodePNG(src), tr, det.Key{}, make([]byte, tr.SampleBytes())); err == nil || !strings.Contains(err.Error(), "pad_if_needed=True") {
		t.Errorf("a crop larger than the image without pad_if_needed: %v, want torchvision's refusal", err)
	}
}

// TestExactPad: a Pad (constant fill) before a RandomCrop or a CenterCrop, or
// after one: every sample is torchvision's pad, then pad and crop or
// center_crop (then pad), of the whole decode at the traced arguments
// (padCropReference), flipped after where traced, on both paths and
// layouts; Pad elsewhere is refused with what is supported. An exactness
// test, as TestExactRandomCrop.
func TestExactPad(t *testing.T) {
	exactTest(t)
	src := testPicture(61, 40)
	fill := [3]float64{10, 20, 30}
	pad := func(l, t, r, b int, f [3]float64) opspkg.Op {
		return opspkg.Op{Kind: transform.OpPad, Args: &transform.PadArgs{Padding: [4]int{l, t, r, b}, Filling: opspkg.Filling{Fill: f}}}
	}
	cases := [][]opspkg.Op{
		// CIFAR's recipe: Pad(4), RandomCrop(32)
		{pad(4, 4, 4, 4, [3]float64{}), {Kind: transform.OpRandomCrop, Size: [2]int{40, 40}}},
		{pad(3, 0, 9, 2, fill), {Kind: transform.OpRandomCrop, Size: [2]int{50, 70}, Args: &transform.RandomCropArgs{PadIfNeeded: true, Filling: opspkg.Filling{Fill: fill}}}},
		{pad(90, 3, 0, 5, fill), {Kind: transform.OpRandomCrop, Size: [2]int{20, 20}}},
		{pad(5, 6, 7, 8, fill), {Kind: transform.OpCenterCrop, Size: [2]int{30, 50}}},         // inside the image
		{pad(5, 6, 7, 8, fill), {Kind: transform.OpCenterCrop, Size: [2]int{52, 71}}},         // into the padding
		{pad(1, 0, 2, 0, [3]float64{}), {Kind: transform.OpCenterCrop, Size: [2]int{47, 70}}}, // past it: zeros
		// after the crop: a crop inside the image, one padded with the
		// same fill, a CenterCrop past the image (zeros) then Pad(0)
		{{Kind: transform.OpRandomCrop, Size: [2]int{30, 30}}, pad(2, 3, 4, 5, fill)},
		{{Kind: transform.OpRandomCrop, Size: [2]int{44, 30}, Args: &transform.RandomCropArgs{Padding: [4]int{1, 0, 2, 0}, PadIfNeeded: true, Filling: opspkg.Filling{Fill: fill}}}, pad(6, 0, 1, 7, fill)},
		{{Kind: transform.OpCenterCrop, Size: [2]int{30, 50}}, pad(3, 3, 3, 3, fill)},
		{{Kind: transform.OpCenterCrop, Size: [2]int{47, 70}}, pad(1, 2, 3, 4, [3]float64{})},
		// both sides of the crop
		{pad(5, 6, 7, 8, fill), {Kind: transform.OpCenterCrop, Size: [2]int{52, 71}}, pad(2, 2, 2, 2, fill)},
	}
	padTestDecodes(t, src, func(enc string, data []byte, ref bool, d *Decoder, layout transform.Layout, full []byte) {
		for _, ops := range cases {
			for _, flip := range []bool{false, true} {
				ops := ops
				if flip {
					ops = append(ops[:len(ops):len(ops)], opspkg.Op{Kind: opspkg.OpRandomHorizontalFlip, P: 0.5})
				}
				tr := mustTransform(t, layout, ops...)
				padded := 0
				for i := range 100 {
					k := det.Key{Seed: 3, Index: uint64(i)}
					got := make([]byte, tr.SampleBytes())
					if err := d.Decode(data, tr, k, got); err != nil {
						t.Fatalf("%s: %v", opspkg.OpsString(ops), err)
					}
					trace := d.AppendTrace(nil)
					steps, err := transform.ParseTrace(trace)
					if err != nil {
						t.Fatal(err)
					}
					if p := ops[0]; p.Kind == transform.OpPad && (steps[0].Fn != fn.Pad || [4]int(steps[0].I[:4]) != opspkg.ArgsOf[transform.PadArgs](&p).Padding || steps[0].Fill != opspkg.FillOf(&p).Fill) {
						t.Fatalf("%s: trace %s does not start with the Pad", opspkg.OpsString(ops), trace)
					}
					want, _, _ := padCropReference(full, 61, 40, steps, layout)
					if !bytes.Equal(got, want) {
						t.Fatalf("%s ref=%v %s %s sample %d: not torchvision's ops of the trace %s", enc, ref, layout, opspkg.OpsString(ops), i, trace)
					}
					if d.plans[0].Padded {
						padded++
					}
				}
				if inside := ops[0].Kind == transform.OpPad && ops[1].Size == [2]int{30, 50} && (len(ops) == 2 || ops[2].Kind != transform.OpPad); (padded == 0) == !inside {
					t.Errorf("%s: %d of 100 samples padded", opspkg.OpsString(ops), padded)
				}
			}
		}
	})
	for _, c := range []struct {
		ops  []opspkg.Op
		want string
	}{
		{[]opspkg.Op{pad(1, 1, 1, 1, fill)}, "Pad alone gives a size that varies per image"},
		{[]opspkg.Op{pad(1, 1, 1, 1, fill), {Kind: transform.OpRandomResizedCrop, Size: [2]int{8, 8}}}, "Pad before RandomResizedCrop is not supported"},
		{[]opspkg.Op{pad(1, 1, 1, 1, fill), {Kind: transform.OpResize, Size: [2]int{8, 8}}}, "Pad before Resize is not supported"},
		{[]opspkg.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{8, 8}}, pad(1, 1, 1, 1, fill)}, "Pad after a resampling geometry"},
		{[]opspkg.Op{{Kind: transform.OpResize, Size: [2]int{8, 8}}, {Kind: transform.OpCenterCrop, Size: [2]int{8, 8}}, pad(1, 1, 1, 1, fill)}, "Pad after a resampling geometry"},
		{[]opspkg.Op{{Kind: transform.OpCenterCrop, Size: [2]int{8, 8}}, pad(1, 1, 1, 1, fill), pad(1, 1, 1, 1, fill)}, "twice after the crop is not supported"},
		{[]opspkg.Op{{Kind: transform.OpCenterCrop, Size: [2]int{8, 8}}, {Kind: opspkg.OpRandomInvert, P: 0.5}, pad(1, 1, 1, 1, fill)}, "Pad after other ops is not supported"},
		{[]opspkg.Op{pad(1, 1, 1, 1, fill), {Kind: transform.OpRandomCrop, Size: [2]int{8, 8}, Args: &transform.RandomCropArgs{Padding: [4]int{2, 2, 2, 2}}}}, "padding of two fills in one crop is not supported"},
		{[]opspkg.Op{pad(1, 1, 1, 1, [3]float64{300}), {Kind: transform.OpRandomCrop, Size: [2]int{8, 8}}}, "Pad fill [300 0 0]: want integers 0..255"},
	} {
		if _, err := transform.NewTransform(transform.CHW, c.ops...); !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", opspkg.OpsString(c.ops), err, c.want)
		}
	}
	// A CenterCrop past the image (zeros) then a Pad of another fill.
	tr0 := mustTransform(t, transform.CHW, opspkg.Op{Kind: transform.OpCenterCrop, Size: [2]int{50, 50}}, pad(1, 1, 1, 1, fill))
	if err := NewDecoder().Decode(encodePNG(src), tr0, det.Key{}, make([]byte, tr0.SampleBytes())); err == nil || !strings.Contains(err.Error(), "two fills in one sample are not supported") {
		t.Errorf("a CenterCrop past the image then Pad of fill %v: %v, want refused", fill, err)
	}
	// A crop past the padded image after a Pad of a fill other than 0:
	// center_crop's zeros beside the Pad's fill, refused per sample.
	tr := mustTransform(t, transform.CHW, pad(1, 1, 1, 1, fill), opspkg.Op{Kind: transform.OpCenterCrop, Size: [2]int{50, 50}})
	if err := NewDecoder().Decode(encodePNG(src), tr, det.Key{}, make([]byte, tr.SampleBytes())); err == nil || !strings.Contains(err.Error(), "not supported (Pad with fill 0") {
		t.Errorf("Pad of fill %v then a larger CenterCrop: %v, want refused", fill, err)
	}
}

// padCropReference applies a trace's pad, crop and horizontal_flip to the
// w x h image full, as torchvision's functional ops do; it returns the
// result and the crop's top and left (0 without a crop).
func padCropReference(full []byte, w, h int, steps []fn.Step, layout transform.Layout) ([]byte, int, int) {
	at := func(c, x, y, w, h int) int {
		if layout == transform.HWC {
			return 3*(y*w+x) + c
		}
		return c*w*h + y*w + x
	}
	img, top, left := full, 0, 0
	for _, st := range steps {
		switch st.Fn {
		case fn.Pad:
			l, t, r, b := st.I[0], st.I[1], st.I[2], st.I[3]
			nw, nh := w+l+r, h+t+b
			out := make([]byte, 3*nw*nh)
			for c := range 3 {
				for y := range nh {
					for x := range nw {
						v := byte(st.Fill[c])
						if sx, sy := x-l, y-t; sx >= 0 && sx < w && sy >= 0 && sy < h {
							v = img[at(c, sx, sy, w, h)]
						}
						out[at(c, x, y, nw, nh)] = v
					}
				}
			}
			img, w, h = out, nw, nh
		case fn.CenterCrop: // torchvision's center_crop: zeros where the crop passes the image
			ch, cw := st.I[4], st.I[5]
			anchor := func(size, crop int) int {
				if crop > size {
					return -((crop - size) / 2)
				}
				return int(math.RoundToEven(float64(size-crop) / 2))
			}
			top, left = anchor(h, ch), anchor(w, cw)
			out := make([]byte, 3*cw*ch)
			for c := range 3 {
				for y := range ch {
					for x := range cw {
						if sx, sy := left+x, top+y; sx >= 0 && sx < w && sy >= 0 && sy < h {
							out[at(c, x, y, cw, ch)] = img[at(c, sx, sy, w, h)]
						}
					}
				}
			}
			img, w, h = out, cw, ch
		case fn.Crop:
			top, left = st.I[0], st.I[1]
			cw, ch := st.I[3], st.I[2]
			out := make([]byte, 3*cw*ch)
			for c := range 3 {
				for y := range ch {
					for x := range cw {
						out[at(c, x, y, cw, ch)] = img[at(c, left+x, top+y, w, h)]
					}
				}
			}
			img, w, h = out, cw, ch
		case fn.HorizontalFlip:
			out := make([]byte, len(img))
			for c := range 3 {
				for y := range h {
					for x := range w {
						out[at(c, x, y, w, h)] = img[at(c, w-1-x, y, w, h)]
					}
				}
			}
			img = out
		}
	}
	return img, top, left
}

// padTestDecodes calls f for src encoded as PNG and as JPEG (quality 95),
// on both decode paths (ref: the reference) and both layouts, with the
// decoder and the whole image decoded at full size: what the padding
// tests (CenterCrop, RandomCrop, Pad) cut their expected samples from.
func padTestDecodes(t *testing.T, src image.Image, f func(enc string, data []byte, ref bool, d *Decoder, layout transform.Layout, full []byte)) {
	t.Helper()
	b := src.Bounds()
	for _, enc := range []struct {
		name string
		data []byte
	}{{"png", encodePNG(src)}, {"jpeg", encodeJPEG(src, 95)}} {
		for _, ref := range []bool{false, true} {
			d := NewDecoder(WithReference(ref))
			for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
				whole := mustTransform(t, layout, opspkg.Op{Kind: transform.OpCenterCrop, Size: [2]int{b.Dy(), b.Dx()}})
				full := make([]byte, whole.SampleBytes())
				if err := d.Decode(enc.data, whole, det.Key{}, full); err != nil {
					t.Fatal(err)
				}
				f(enc.name, enc.data, ref, d, layout, full)
			}
			d.Close()
		}
	}
}
