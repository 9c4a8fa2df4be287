package pipeline

import (
	"fmt"
	"math"
	"strings"
)

// OpKind names an op, with torchvision's name and semantics.
type OpKind string

// The ops a Transform is built from.
const (
	OpRandomResizedCrop    OpKind = "RandomResizedCrop"
	OpResize               OpKind = "Resize"
	OpCenterCrop           OpKind = "CenterCrop"
	OpRandomHorizontalFlip OpKind = "RandomHorizontalFlip"
	OpColorJitter          OpKind = "ColorJitter"
	OpNormalize            OpKind = "Normalize"
)

// Op is one step of a transform. Zero fields take torchvision's defaults:
// RandomResizedCrop scale (0.08, 1) and ratio (3/4, 4/3), RandomHorizontalFlip
// p = 0.5. Size is (height, width); Resize with Size[1] == 0 resizes the
// shorter side to Size[0] keeping the aspect ratio, like Resize(int).
type Op struct {
	Kind  OpKind
	Size  [2]int
	Scale [2]float64
	Ratio [2]float64
	P     float64
	// ColorJitter factors: each is drawn from [max(0, 1-x), 1+x].
	Brightness, Contrast, Saturation float64
	// Normalize: output = (pixel/255 - Mean) / Std, as float32.
	Mean, Std [3]float64
	// RandomResizedCrop, Resize: the resampling filter (bilinear, the
	// zero value, is torchvision's default) and, for bilinear and bicubic,
	// NoAntialias to resample without widening the filter when
	// downscaling (torchvision's antialias=False; antialias=True is its
	// default).
	Interp      Interpolation
	NoAntialias bool
}

// Layout is the order of a sample's axes.
type Layout int

// Layouts. CHW is the default, what torch models take.
const (
	CHW Layout = iota
	HWC
)

func (l Layout) String() string {
	if l == HWC {
		return "HWC"
	}
	return "CHW"
}

// geomKind says how the geometry ops compose.
type geomKind int

const (
	// cropResize: crop a box of the source, then resize it to the output
	// (RandomResizedCrop, CenterCrop alone).
	cropResize geomKind = iota
	// resizeCrop: resize the whole source, then crop (Resize, Resize +
	// CenterCrop).
	resizeCrop
)

// Transform is a compiled, validated op list. It is immutable and safe for
// concurrent use.
type Transform struct {
	ops    []Op
	geom   geomKind
	rrc    *Op // RandomResizedCrop, if any
	resize *Op // Resize, if any
	center *Op // CenterCrop, if any
	flip   float64
	jitter *Op
	norm   *Op
	outH   int
	outW   int
	layout Layout
}

// RNG streams, one per op, so that ops never shift each other's numbers.
const (
	streamCrop   = 1
	streamFlip   = 2
	streamJitter = 3
)

// Presets by name.
var presets = map[string][]Op{
	"imagenet-train": {
		{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}},
		{Kind: OpRandomHorizontalFlip, P: 0.5},
	},
	"imagenet-eval": {
		{Kind: OpResize, Size: [2]int{256, 0}},
		{Kind: OpCenterCrop, Size: [2]int{224, 224}},
	},
}

// PresetNames lists the named presets.
func PresetNames() []string { return []string{"imagenet-eval", "imagenet-train"} }

// Preset returns the op list of a named preset.
func Preset(name string) ([]Op, error) {
	ops, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("%w: unknown transform preset %q (known: %s)", ErrUnsupported, name, strings.Join(PresetNames(), ", "))
	}
	return append([]Op(nil), ops...), nil
}

// NewTransform validates ops and compiles them. Geometry ops come first (one
// RandomResizedCrop, or Resize and/or CenterCrop, in that order), then
// RandomHorizontalFlip, ColorJitter and Normalize, each at most once and in
// that order, so that the whole chain fuses into one decode call. The output
// size must be fixed: Resize of the shorter side needs a CenterCrop after it.
func NewTransform(layout Layout, ops ...Op) (*Transform, error) {
	t := &Transform{ops: append([]Op(nil), ops...), layout: layout}
	if layout != CHW && layout != HWC {
		return nil, fmt.Errorf("%w: layout %d", ErrUnsupported, layout)
	}
	stage := 0 // 0 geometry, 1 flip, 2 jitter, 3 normalize, 4 done
	bad := func(format string, a ...any) (*Transform, error) {
		return nil, fmt.Errorf("%w: transform: %s", ErrUnsupported, fmt.Sprintf(format, a...))
	}
	for i := range t.ops {
		op := &t.ops[i]
		switch op.Kind {
		case OpRandomResizedCrop:
			if stage > 0 || t.rrc != nil || t.resize != nil || t.center != nil {
				return bad("RandomResizedCrop must be the only geometry op and come first")
			}
			if op.Scale == [2]float64{} {
				op.Scale = [2]float64{0.08, 1}
			}
			if op.Ratio == [2]float64{} {
				op.Ratio = [2]float64{3.0 / 4, 4.0 / 3}
			}
			if !(op.Scale[0] > 0 && op.Scale[0] <= op.Scale[1] && op.Scale[1] <= 1) {
				return bad("RandomResizedCrop scale %v: want 0 < lo <= hi <= 1", op.Scale)
			}
			if !(op.Ratio[0] > 0 && op.Ratio[0] <= op.Ratio[1]) || math.IsInf(op.Ratio[1], 0) {
				return bad("RandomResizedCrop ratio %v: want 0 < lo <= hi, finite", op.Ratio)
			}
			if err := checkSize(op, false); err != nil {
				return nil, err
			}
			t.rrc = op
		case OpResize:
			if stage > 0 || t.rrc != nil || t.resize != nil || t.center != nil {
				return bad("Resize must come first, before CenterCrop")
			}
			if err := checkSize(op, true); err != nil {
				return nil, err
			}
			t.resize = op
		case OpCenterCrop:
			if stage > 0 || t.rrc != nil || t.center != nil {
				return bad("CenterCrop must follow Resize (if any) and come before the other ops")
			}
			if err := checkSize(op, false); err != nil {
				return nil, err
			}
			t.center = op
		case OpRandomHorizontalFlip:
			if stage >= 1 {
				return bad("RandomHorizontalFlip must come once, after geometry and before ColorJitter and Normalize")
			}
			if !(op.P >= 0 && op.P <= 1) { // NaN too
				return bad("RandomHorizontalFlip p=%v: want 0 <= p <= 1", op.P)
			}
			stage, t.flip = 1, op.P
		case OpColorJitter:
			if stage >= 2 {
				return bad("ColorJitter must come once, after flip and before Normalize")
			}
			for _, f := range []float64{op.Brightness, op.Contrast, op.Saturation} {
				if f < 0 || math.IsNaN(f) || f > 100 {
					return bad("ColorJitter factor %v: want 0 <= x <= 100", f)
				}
			}
			stage, t.jitter = 2, op
		case OpNormalize:
			if stage >= 3 {
				return bad("Normalize must come once, last")
			}
			for c := 0; c < 3; c++ {
				if !(op.Std[c] > 0) || math.IsInf(op.Std[c], 0) || math.IsNaN(op.Mean[c]) || math.IsInf(op.Mean[c], 0) {
					return bad("Normalize mean %v std %v: want finite mean and finite std > 0", op.Mean, op.Std)
				}
			}
			stage, t.norm = 3, op
		default:
			return bad("unknown op %q", op.Kind)
		}
	}
	switch {
	case t.rrc != nil:
		t.geom, t.outH, t.outW = cropResize, t.rrc.Size[0], t.rrc.Size[1]
	case t.center != nil:
		t.geom, t.outH, t.outW = resizeCrop, t.center.Size[0], t.center.Size[1]
		if t.resize == nil {
			t.geom = cropResize
		}
	case t.resize != nil && t.resize.Size[1] > 0:
		t.geom, t.outH, t.outW = resizeCrop, t.resize.Size[0], t.resize.Size[1]
	case t.resize != nil:
		return bad("Resize(%d) of the shorter side gives a size that varies per image; add CenterCrop or give Resize both sides", t.resize.Size[0])
	default:
		return bad("no geometry op: a batch needs a fixed size (RandomResizedCrop, Resize(h, w) or CenterCrop)")
	}
	return t, nil
}

// maxSide bounds output sides so a request cannot ask for absurd buffers.
const maxSide = 4096

func checkSize(op *Op, shorterOK bool) error {
	h, w := op.Size[0], op.Size[1]
	if w == 0 && !shorterOK {
		w = h
		op.Size[1] = w
	}
	if h <= 0 || h > maxSide || w < 0 || w > maxSide {
		return fmt.Errorf("%w: transform: %s size %v: sides must be in 1..%d", ErrUnsupported, op.Kind, op.Size, maxSide)
	}
	return nil
}

// ParseTransform returns a preset's transform.
func ParseTransform(preset string, layout Layout) (*Transform, error) {
	ops, err := Preset(preset)
	if err != nil {
		return nil, err
	}
	return NewTransform(layout, ops...)
}

// Ops returns the compiled op list, defaults filled in.
func (t *Transform) Ops() []Op { return append([]Op(nil), t.ops...) }

// Layout returns the output layout.
func (t *Transform) Layout() Layout { return t.layout }

// Size returns the output height and width.
func (t *Transform) Size() (h, w int) { return t.outH, t.outW }

// Float reports whether samples are float32 (the transform ends in Normalize).
func (t *Transform) Float() bool { return t.norm != nil }

// Shape returns a sample's shape in its layout: [C, H, W] or [H, W, C].
func (t *Transform) Shape() [3]int {
	if t.layout == HWC {
		return [3]int{t.outH, t.outW, 3}
	}
	return [3]int{3, t.outH, t.outW}
}

// SampleBytes is the size of one output sample.
func (t *Transform) SampleBytes() int {
	n := 3 * t.outH * t.outW
	if t.norm != nil {
		n *= 4
	}
	return n
}

// pixelBytes is the size of a sample's uint8 pixels, before Normalize.
func (t *Transform) pixelBytes() int { return 3 * t.outH * t.outW }

// String describes the op list in torchvision terms.
func (t *Transform) String() string {
	var b strings.Builder
	for i, op := range t.ops {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(op.Kind))
		switch op.Kind {
		case OpRandomResizedCrop, OpCenterCrop:
			fmt.Fprintf(&b, "(%dx%d)", op.Size[0], op.Size[1])
		case OpResize:
			if op.Size[1] == 0 {
				fmt.Fprintf(&b, "(%d)", op.Size[0])
			} else {
				fmt.Fprintf(&b, "(%dx%d)", op.Size[0], op.Size[1])
			}
		case OpRandomHorizontalFlip:
			fmt.Fprintf(&b, "(p=%g)", op.P)
		}
	}
	return b.String()
}
