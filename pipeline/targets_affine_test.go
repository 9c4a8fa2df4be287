package pipeline

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestRotateExpandDecode: a RandomRotation with expand=True after a
// Resize((h, w)) makes each sample its own size (the trailer's), the
// rotation of the resized image by the drawn angle (its steps applied to
// the Resize's decode), padded with zeros to the bound; with a
// CenterCrop after it, one size, the rotated image's centre crop.
func TestRotateExpandDecode(t *testing.T) {
	data := encodePNG(testPicture(53, 41))
	rs := ops.Op{Kind: transform.OpResize, Size: [2]int{30, 37}, Args: &transform.ResizeArgs{Resampling: ops.Resampling{Interp: transform.InterpBilinear}}}
	rot := ops.Op{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-180, 180}, Expand: true, Filling: ops.Filling{Fill: [3]float64{7, 8, 9}}, Resampling: ops.Resampling{Interp: transform.InterpBilinear}}}
	base := mustTransform(t, transform.CHW, rs)
	vary := mustTransform(t, transform.CHW, rs, rot)
	fixed := mustTransform(t, transform.CHW, rs, rot, ops.Op{Kind: transform.OpCenterCrop, Size: [2]int{33, 31}})
	if !vary.Varies() || fixed.Varies() {
		t.Fatalf("varies: %v %v", vary.Varies(), fixed.Varies())
	}
	if h, w := fixed.Size(); h != 33 || w != 31 {
		t.Fatalf("fixed size %dx%d", h, w)
	}
	bh, bw := vary.Size()
	d := NewDecoder()
	src := make([]byte, base.SampleBytes())
	if err := d.Decode(data, base, det.Key{}, src); err != nil {
		t.Fatal(err)
	}
	grown := 0
	for i := range uint64(12) {
		k := det.Key{Seed: 3, Index: i}
		out := make([]byte, vary.SampleBytes())
		if err := d.Decode(data, vary, k, out); err != nil {
			t.Fatal(err)
		}
		steps := slices.Clone(d.plan.Views[0].Steps) // what the decode of the 37x30 image drew
		want, w, h, err := ops.ApplyTraceSized(append([]byte(nil), src...), 37, 30, steps)
		if err != nil {
			t.Fatal(err)
		}
		tr := out[len(out)-transform.SizeTrailer:]
		if gh, gw := int(tr[0])|int(tr[1])<<8, int(tr[4])|int(tr[5])<<8; gh != h || gw != w {
			t.Fatalf("sample %d: trailer %dx%d, want %dx%d", i, gw, gh, w, h)
		}
		grown += bool2int(w != 37 || h != 30)
		for c := range 3 {
			for y := range bh {
				for x := range bw {
					got, exp := out[(c*bh+y)*bw+x], byte(0)
					if y < h && x < w {
						exp = want[(c*h+y)*w+x]
					}
					if got != exp {
						t.Fatalf("sample %d: channel %d (%d, %d): %d, want %d", i, c, x, y, got, exp)
					}
				}
			}
		}
		fout := make([]byte, fixed.SampleBytes())
		if err := d.Decode(data, fixed, k, fout); err != nil {
			t.Fatal(err)
		}
		cc := fn.Step{Fn: fn.CenterCrop, I: [6]int{4: 33, 5: 31}}
		p := fn.Apply(kernels.Planes{Pix: append(make([]byte, 0, 3*max(w*h, 33*31)), want...), W: w, H: h}, &cc, nil)
		if string(p.Pix) != string(fout) {
			t.Fatalf("sample %d: the CenterCrop after the rotation differs from center_crop of its image", i)
		}
	}
	if grown < 8 {
		t.Fatalf("%d of 12 samples grown", grown)
	}
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRotateExpandFirstDecode: a RandomRotation with expand=True first,
// before any geometry, rotates the image whole at its own size, then a
// CenterCrop or Resize((h, w)) after it fixes the size: each sample is its
// steps (rotate, then the crop or resize) applied to the image decoded
// whole, byte for byte. Its room is the sample's own: an image whose
// rotation's bound is over the Decoder's pixel budget fails, naming it
// (the image itself within it). Without a Resize or CenterCrop after the
// last rotation it is refused: nothing bounds the size.
func TestRotateExpandFirstDecode(t *testing.T) {
	const w, h = 53, 41
	data := encodePNG(testPicture(w, h))
	rot := ops.Op{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-180, 180}, Expand: true, Filling: ops.Filling{Fill: [3]float64{7, 8, 9}}, Resampling: ops.Resampling{Interp: transform.InterpBilinear}}}
	whole := mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpCenterCrop, Size: [2]int{h, w}})
	d := NewDecoder()
	defer d.Close()
	src := make([]byte, whole.SampleBytes())
	if err := d.Decode(data, whole, det.Key{}, src); err != nil {
		t.Fatal(err)
	}
	for _, fix := range []ops.Op{{Kind: transform.OpCenterCrop, Size: [2]int{33, 31}}, {Kind: transform.OpResize, Size: [2]int{30, 37}, Args: &transform.ResizeArgs{Resampling: ops.Resampling{Interp: transform.InterpBilinear}}}} {
		tr := mustTransform(t, transform.CHW, rot, fix)
		if th, tw := tr.Size(); tr.Varies() || th != fix.Size[0] || tw != fix.Size[1] {
			t.Fatalf("%s: size %dx%d (varies %v), want %v", fix.Kind, tw, th, tr.Varies(), fix.Size)
		}
		grown := 0
		for i := range uint64(12) {
			k := det.Key{Seed: 5, Index: i}
			out := make([]byte, tr.SampleBytes())
			if err := d.Decode(data, tr, k, out); err != nil {
				t.Fatal(err)
			}
			steps := slices.Clone(d.plan.Views[0].Steps) // what the decode of the w x h image drew
			if len(steps) != 2 || steps[0].Fn != fn.Rotate {
				t.Fatalf("%s sample %d: steps %v, want the rotation and the %s", fix.Kind, i, steps, fix.Kind)
			}
			turned, rw, rh, err := ops.ApplyTraceSized(append(make([]byte, 0, tr.RoomFor(w, h)), src...), w, h, steps[:1])
			if err != nil {
				t.Fatal(err)
			}
			p := fn.Apply(kernels.Planes{Pix: append(make([]byte, 0, 3*max(rw*rh, 33*37)), turned...), W: rw, H: rh}, &steps[1], nil)
			if ww, wh := p.W, p.H; ww != fix.Size[1] || wh != fix.Size[0] || string(p.Pix) != string(out) {
				t.Fatalf("%s sample %d: differs from the steps on the image decoded whole (%dx%d)", fix.Kind, i, p.W, p.H)
			}
			grown += bool2int(rw != w || rh != h)
			if 3*rw*rh > tr.RoomFor(w, h) {
				t.Fatalf("sample %d: rotated to %dx%d, over the room %d", i, rw, rh, tr.RoomFor(w, h))
			}
		}
		if grown < 8 {
			t.Fatalf("%s: %d of 12 samples grown", fix.Kind, grown)
		}
		small := NewDecoder(WithPixelBudget(w * h))
		err := small.Decode(data, tr, det.Key{Seed: 5}, make([]byte, tr.SampleBytes()))
		small.Close()
		if !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), "largest image of the 53x41 image") {
			t.Fatalf("%s: a rotation's room over the pixel budget: %v, want ErrTooLarge naming it", fix.Kind, err)
		}
	}
	for _, ops := range [][]ops.Op{{rot}, {rot, {Kind: transform.OpResize, Size: [2]int{30, 37}}, rot}, {rot, {Kind: ops.OpRandomHorizontalFlip, P: 0.5}}} {
		if _, err := transform.NewTransform(transform.CHW, ops...); !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "nothing bounds") {
			t.Errorf("%d ops, the rotation first, nothing fixing the size after the last: %v, want refused", len(ops), err)
		}
	}
}
