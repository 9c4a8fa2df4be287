package transform

import (
	"errors"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

func TestParseInterpolation(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want Interpolation
	}{
		{"bilinear", InterpBilinear}, {"nearest", InterpNearest}, {"bicubic", InterpBicubic},
		{"BICUBIC", InterpBicubic}, {"Nearest", InterpNearest}, // InterpolationMode's names
	} {
		got, err := ParseInterpolation(tc.s)
		if err != nil || got != tc.want {
			t.Errorf("ParseInterpolation(%q) = %v, %v; want %v", tc.s, got, err, tc.want)
		}
	}
	for _, i := range []Interpolation{InterpBilinear, InterpNearest, InterpBicubic} {
		if got, err := ParseInterpolation(i.String()); err != nil || got != i {
			t.Errorf("%v does not round-trip: %v, %v", i, got, err)
		}
	}
	for _, s := range []string{"", "lanczos", "box", "nearest-exact", "bilinear "} {
		if _, err := ParseInterpolation(s); !errors.Is(err, errs.Unsupported) {
			t.Errorf("ParseInterpolation(%q): %v, want ErrUnsupported", s, err)
		}
	}
	if got := Interpolation(9).String(); got != "Interpolation(9)" {
		t.Errorf("Interpolation(9).String() = %q", got)
	}
	var zero optab.Op
	if r := optab.ResamplingOf(&zero); r.Interp != InterpBilinear || r.NoAntialias {
		t.Error("an Op's zero value is not torchvision's default (bilinear, antialias on)")
	}
}

// TestPlanInterp: the plan takes its filter from the geometry op, nearest
// is never antialiased, and an out-of-range filter is an error per sample.
func TestPlanInterp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ops    []optab.Op
		interp Interpolation
		aa     bool
	}{
		{"rrc default", []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}}}, InterpBilinear, true},
		{"rrc bicubic", []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}, Args: &RRCArgs{Resampling: optab.Resampling{Interp: InterpBicubic}}}}, InterpBicubic, true},
		{"rrc bicubic no aa", []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}, Args: &RRCArgs{Resampling: optab.Resampling{Interp: InterpBicubic, NoAntialias: true}}}}, InterpBicubic, false},
		{"rrc nearest", []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}, Args: &RRCArgs{Resampling: optab.Resampling{Interp: InterpNearest}}}}, InterpNearest, false},
		{"resize+center", []optab.Op{{Kind: OpResize, Size: [2]int{40, 0}, Args: &ResizeArgs{Resampling: optab.Resampling{Interp: InterpNearest}}}, {Kind: OpCenterCrop, Size: [2]int{32, 32}}}, InterpNearest, false},
		{"resize no aa", []optab.Op{{Kind: OpResize, Size: [2]int{40, 50}, Args: &ResizeArgs{Resampling: optab.Resampling{NoAntialias: true}}}}, InterpBilinear, false},
		{"center alone", []optab.Op{{Kind: OpCenterCrop, Size: [2]int{32, 32}}}, InterpBilinear, true}, // no resampling of its own
	} {
		tr, err := NewTransform(CHW, tc.ops...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		p, err := tr.geomPlan(120, 90, det.Key{Index: 3})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if p.Interp != tc.interp || p.Antialias != tc.aa {
			t.Errorf("%s: plan filter %v antialias %v, want %v %v", tc.name, p.Interp, p.Antialias, tc.interp, tc.aa)
		}
	}
	if _, err := NewTransform(CHW, optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}, Args: &RRCArgs{Resampling: optab.Resampling{Interp: 7}}}); !errors.Is(err, errs.Unsupported) {
		t.Errorf("NewTransform with interpolation 7: %v, want ErrUnsupported", err)
	}
}

// TestRegionClipHoldsSupport: a resize-then-crop plan's clip rectangle
// holds every tap of every kept output of torch's filters, computed over
// the whole image as torch does, so that clipping to it changes nothing.
func TestRegionClipHoldsSupport(t *testing.T) {
	for _, sz := range [][4]int{{500, 375, 256, 224}, {97, 61, 200, 180}, {1600, 1200, 256, 224}, {333, 251, 90, 64}, {61, 97, 61, 61}} {
		for _, f := range []struct {
			interp Interpolation
			aa     bool
		}{{InterpNearest, false}, {InterpBilinear, false}, {InterpBilinear, true}, {InterpBicubic, true}, {InterpBicubic, false}} {
			p := SamplePlan{Geom: ResizeCrop, SrcW: sz[0], SrcH: sz[1], Interp: f.interp, Antialias: f.aa}
			p.RW, p.RH = ResizedSize(sz[0], sz[1], [2]int{sz[2], 0})
			p.CW, p.CH = sz[3], sz[3]
			p.CX, p.CY = CenterOffset(p.RW, p.CW), CenterOffset(p.RH, p.CH)
			p.OutW, p.OutH = p.CW, p.CH
			r := p.Region()
			sx, sy := p.Spans()
			for _, ax := range []struct {
				s      fn.Span
				c0, c1 int
			}{{sx, r.X0, r.X1}, {sy, r.Y0, r.Y1}} {
				a := fn.NewTorchAxis(ax.s, f.interp, f.aa)
				for i, st := range a.Start {
					if st < ax.c0 || st+len(a.K[i]) > ax.c1 {
						t.Errorf("%v %v aa=%v: output %d taps [%d,%d) outside the clip [%d,%d)", sz, f.interp, f.aa, i, st, st+len(a.K[i]), ax.c0, ax.c1)
					}
				}
			}
		}
	}
}
