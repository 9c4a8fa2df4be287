package transform

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
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
		st := fn.Step{Fn: fn.Rotate, F: [6]float64{a.Angle}}
		if c.Fn == "affine" {
			st = fn.Step{Fn: fn.Affine, F: [6]float64{a.Angle, a.Translate[0], a.Translate[1], a.Scale, a.Shear[0], a.Shear[1]}}
		}
		if a.Center != nil {
			st.Center, st.HasCenter = *a.Center, true
		}
		boxes := append([][4]float32(nil), c.Boxes...)
		w, h, err := MoveBoxes(boxes, c.W, c.H, []fn.Step{st})
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
	r := det.Key{Seed: 7}.Stream(1)
	for i := range 3000 {
		w, h := 1+r.Intn(700), 1+r.Intn(700)
		lo := r.Uniform(-400, 400)
		ra := &RotationArgs{Expand: true, Degrees: [2]float64{lo, lo + r.Uniform(0, 200)}}
		op := &optab.Op{Kind: OpRandomRotation, Args: ra}
		bw, bh := ExpandBound(op, w, h)
		if d := math.Hypot(float64(w), float64(h)); float64(bw) > d+3 || float64(bh) > d+3 {
			t.Fatalf("%dx%d %v: bound %dx%d past the diagonal %.1f + 3", w, h, ra.Degrees, bw, bh, d)
		}
		for k := range 20 {
			a := r.Uniform(ra.Degrees[0], ra.Degrees[1])
			if k == 0 {
				a = ra.Degrees[0]
			}
			center, has := [2]float64{r.Uniform(-50, 800), r.Uniform(-50, 800)}, i%2 == 0
			ow, oh := kernels.RotatedSize(w, h, a, center, has)
			if ow > bw || oh > bh {
				t.Fatalf("%dx%d rotated by %v (center %v %v): %dx%d, past the bound %dx%d", w, h, a, center, has, ow, oh, bw, bh)
			}
		}
	}
}
