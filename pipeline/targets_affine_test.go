package pipeline

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TestAffineBoxesGolden holds rotate's and affine's box maths to the float32
// bits torchvision computes (torchvision.transforms.v2.functional's rotate
// and affine on XYXY float32 BoundingBoxes, clamping_mode "soft"), over
// python/tests/test_targets_affine.py's grid: every angle, translation,
// scale, shear and center given to the Step as the ops draw them, 1 to 9
// boxes (torch.matmul's two summation orders), boxes past the canvas and
// degenerate ones. The Python test checks that the file is what
// torchvision computes.
func TestAffineBoxesGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/targets_affine.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Torchvision string
		Cases       []struct {
			Fn   string
			W, H int
			Args struct {
				Angle     float64
				Translate [2]float64
				Scale     float64
				Shear     [2]float64
				Center    *[2]float64
			}
			Boxes, Want [][4]float32
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) < 50 {
		t.Fatalf("%d cases", len(doc.Cases))
	}
	bad := 0
	for i, c := range doc.Cases {
		a := c.Args
		st := Step{Fn: FnRotate, F: [6]float64{a.Angle}}
		if c.Fn == "affine" {
			st = Step{Fn: FnAffine, F: [6]float64{a.Angle, a.Translate[0], a.Translate[1], a.Scale, a.Shear[0], a.Shear[1]}}
		}
		if a.Center != nil {
			st.Center, st.HasCenter = *a.Center, true
		}
		boxes := append([][4]float32(nil), c.Boxes...)
		w, h, err := MoveBoxes(boxes, c.W, c.H, []Step{st})
		if err != nil || w != c.W || h != c.H {
			t.Fatalf("case %d: %dx%d %v", i, w, h, err)
		}
		for k := range boxes {
			if boxes[k] != c.Want[k] {
				bad++
				t.Errorf("case %d (%s %+v on %dx%d, %d boxes): box %v became %v, torchvision %s's %v", i, c.Fn, a, c.W, c.H,
					len(boxes), c.Boxes[k], boxes[k], doc.Torchvision, c.Want[k])
			}
		}
	}
	if bad > 0 {
		t.Logf("%d boxes differ", bad)
	}
}

// TestExpandBound: every drawn rotation's size (kernels.RotatedSize, with
// and without a center) is within the bound a transform's slots are
// counted at, over random sizes and ranges.
func TestExpandBound(t *testing.T) {
	r := Key{Seed: 7}.Stream(1)
	for i := range 3000 {
		w, h := 1+r.Intn(700), 1+r.Intn(700)
		lo := r.Uniform(-400, 400)
		op := &Op{Kind: OpRandomRotation, Expand: true, Degrees: [2]float64{lo, lo + r.Uniform(0, 200)}}
		bw, bh := expandBound(op, w, h)
		if d := math.Hypot(float64(w), float64(h)); float64(bw) > d+3 || float64(bh) > d+3 {
			t.Fatalf("%dx%d %v: bound %dx%d past the diagonal %.1f + 3", w, h, op.Degrees, bw, bh, d)
		}
		for k := range 20 {
			a := r.Uniform(op.Degrees[0], op.Degrees[1])
			if k == 0 {
				a = op.Degrees[0]
			}
			center, has := [2]float64{r.Uniform(-50, 800), r.Uniform(-50, 800)}, i%2 == 0
			ow, oh := kernels.RotatedSize(w, h, a, center, has)
			if ow > bw || oh > bh {
				t.Fatalf("%dx%d rotated by %v (center %v %v): %dx%d, past the bound %dx%d", w, h, a, center, has, ow, oh, bw, bh)
			}
		}
	}
}

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
		steps := vary.DrawStepsAt(k, 37, 30, nil)
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
