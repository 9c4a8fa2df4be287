package pipeline

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TestRotateExpandDecode: a RandomRotation with expand=True after a
// Resize((h, w)) makes each sample its own size (the trailer's), the
// rotation of the resized image by the drawn angle (its steps applied to
// the Resize's decode), padded with zeros to the bound; with a
// CenterCrop after it, one size, the rotated image's centre crop.
func TestRotateExpandDecode(t *testing.T) {
	data := encodePNG(testPicture(53, 41))
	rs := Op{Kind: OpResize, Size: [2]int{30, 37}, Interp: InterpBilinear}
	rot := Op{Kind: OpRandomRotation, Degrees: [2]float64{-180, 180}, Expand: true, Interp: InterpBilinear, Fill: [3]float64{7, 8, 9}}
	base := mustTransform(t, CHW, rs)
	vary := mustTransform(t, CHW, rs, rot)
	fixed := mustTransform(t, CHW, rs, rot, Op{Kind: OpCenterCrop, Size: [2]int{33, 31}})
	if !vary.Varies() || fixed.Varies() {
		t.Fatalf("varies: %v %v", vary.Varies(), fixed.Varies())
	}
	if h, w := fixed.Size(); h != 33 || w != 31 {
		t.Fatalf("fixed size %dx%d", h, w)
	}
	bh, bw := vary.Size()
	d := NewDecoder()
	src := make([]byte, base.SampleBytes())
	if err := d.Decode(data, base, Key{}, src); err != nil {
		t.Fatal(err)
	}
	grown := 0
	for i := range uint64(12) {
		k := Key{Seed: 3, Index: i}
		out := make([]byte, vary.SampleBytes())
		if err := d.Decode(data, vary, k, out); err != nil {
			t.Fatal(err)
		}
		steps := vary.Sampler(sk).DrawStepsAt(k, 37, 30, nil)
		want, w, h, err := ApplyTraceSized(append([]byte(nil), src...), 37, 30, steps)
		if err != nil {
			t.Fatal(err)
		}
		tr := out[len(out)-sizeTrailer:]
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
		cc := Step{Fn: FnCenterCrop, I: [6]int{4: 33, 5: 31}}
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
