package transform

// The warps: torchvision.transforms.v2's RandomRotation, RandomAffine and
// RandomPerspective, and rotate, affine and perspective, with how they
// move a job's boxes and keypoints (pipeline/targets) and masks.
// Floating point as in pipeline/ops' compile.go.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

const (
	OpRandomRotation optab.OpKind = "RandomRotation"
	OpRandomAffine   optab.OpKind = "RandomAffine"
	// OpRandomPerspective is torchvision's RandomPerspective: with
	// probability P, the image's corners moved each within Distortion of
	// half its side inward (drawPerspective), the image resampled so
	// (Interp, Fill); the targets move with it.
	OpRandomPerspective optab.OpKind = "RandomPerspective"
)

func init() {
	optab.Define(optab.Def{Kind: OpRandomRotation, Doc: "rotates by an angle drawn uniform in degrees (min, max), about center, filling with fill; expand grows the image to hold all of it",
		Params: []optab.Param{{Name: "degrees", Typ: optab.PRange}, {Name: "interpolation", Typ: optab.PInterp, Def: "'nearest'"},
			{Name: "expand", Typ: optab.PBool, Def: "False", At: func(o *optab.Op) any { return &o.Expand }}, {Name: "center", Typ: optab.PFloats, Def: "None"}, {Name: "fill", Typ: optab.PFillBy, Def: "0"}},
		Targets: optab.TargetsMove, Compile: compileWarp, Format: optab.FormatNone, Masks: warpMasks, Keeps: keepsWarp,
		FromArgs: func(a *optab.Args) optab.Op {
			op := optab.Op{Degrees: angleArgs(a, "degrees"), Interp: a.Interp("interpolation"), Expand: a.Bool("expand")}
			a.TypedFill("fill", &op, true)
			centerArgs(a, &op)
			return op
		},
		Grows: func(op *optab.Op) bool { return op.Expand },
		Draw: func(n *optab.Node, r *det.RNG, d *optab.Drawer) {
			op := n.Op
			st := fn.Step{Fn: fn.Rotate, F: [6]float64{r.Uniform(op.Degrees[0], op.Degrees[1])}, Interp: op.Interp,
				Fill: op.Fill, FillNone: op.FillNone, MaskFill: maskFill(op), Center: op.Center, HasCenter: op.HasCenter}
			if op.Expand { // the ops after it draw on the grown image
				st.I[0] = 1
				d.W, d.H = kernels.RotatedSize(d.W, d.H, st.F[0], op.Center, op.HasCenter)
			}
			d.Emit(st)
		},
		MaxNs: func(n *optab.Node, w, h int) float64 {
			if n.Op.Expand {
				w, h = ExpandBound(n.Op, w, h)
			}
			return optab.StepNs(fn.Step{Fn: fn.Rotate, Interp: n.Op.Interp}, w, h)
		}})
	optab.Define(optab.Def{Kind: OpRandomAffine, Doc: "an affine map of drawn angle, translation, scale and shear, about center",
		Params: []optab.Param{{Name: "degrees", Typ: optab.PRange}, {Name: "translate", Typ: optab.PFloats, Def: "None"}, {Name: "scale", Typ: optab.PFloats, Def: "None"},
			{Name: "shear", Typ: optab.PFloats, Def: "None"}, {Name: "interpolation", Typ: optab.PInterp, Def: "'nearest'"},
			{Name: "fill", Typ: optab.PFillBy, Def: "0"}, {Name: "center", Typ: optab.PFloats, Def: "None"}},
		Targets: optab.TargetsMove, Compile: compileWarp, Format: optab.FormatNone, Masks: warpMasks, Keeps: keepsWarp,
		Draw: drawAffine, FromArgs: affineArgs,
		MaxNs: func(n *optab.Node, w, h int) float64 {
			return optab.StepNs(fn.Step{Fn: fn.Affine, Interp: n.Op.Interp}, w, h)
		}})
	optab.Define(optab.Def{Kind: OpRandomPerspective, Doc: "with probability p, a perspective moving each corner up to distortion_scale of half the side inward",
		Params: []optab.Param{{Name: "distortion_scale", Typ: optab.PFloat, Def: "0.5"}, optab.PParam(0.5),
			{Name: "interpolation", Typ: optab.PInterp, Def: "'bilinear'"}, {Name: "fill", Typ: optab.PFillBy, Def: "0"}},
		Targets: optab.TargetsMove, Keeps: keepsWarp,
		FromArgs: func(a *optab.Args) optab.Op {
			op := optab.Op{Distortion: a.Float("distortion_scale"), P: a.Float("p"), Interp: a.Interp("interpolation")}
			a.TypedFill("fill", &op, true)
			return op
		},
		Compile: func(c *optab.Compiler, n *optab.Node, at optab.CompileAt) error {
			op := n.Op
			if err := optab.CheckProb(op, at); err != nil {
				return err
			}
			if !(op.Distortion >= 0 && op.Distortion <= 1) {
				return optab.OpError(at.Where, "distortion_scale %v: want 0..1", op.Distortion)
			}
			if err := optab.CheckFill(op.Fill, at.Where); err != nil {
				return err
			}
			if op.Interp != InterpNearest && op.Interp != InterpBilinear {
				return optab.OpError(at.Where, "interpolation %s: torchvision's perspective of a tensor is nearest or bilinear", op.Interp)
			}
			return nil
		},
		Draw: func(n *optab.Node, r *det.RNG, d *optab.Drawer) {
			if r.Float64() < n.Op.P { // _RandomApplyTransform's torch.rand(1) >= p skips
				d.Emit(drawPerspective(r, d.W, d.H, n.Op))
			}
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(distortion_scale=%g, p=%g, fill=%v", op.Distortion, op.P, op.Fill)
			formatInterp(b, op)
		},
		MaxNs: func(n *optab.Node, w, h int) float64 {
			return optab.StepNs(fn.Step{Fn: fn.Perspective, Interp: n.Op.Interp}, w, h)
		},
		Masks: warpMasks})
}

// warpMasks refuses a rotation, affine or perspective whose masks' fill is not a
// Mask's value (fillMasks): torchvision fills a Mask with the op's fill
// too (None: 0), or with a fill per type's Mask value.
func warpMasks(op *optab.Op) error {
	if op.FillNone && !op.FillTyped {
		return nil
	}
	return fillMasks(op)
}

// compileWarp checks RandomRotation's and RandomAffine's arguments.
func compileWarp(_ *optab.Compiler, n *optab.Node, at optab.CompileAt) error {
	op, where := n.Op, at.Where
	if !(op.Degrees[0] <= op.Degrees[1]) || math.Abs(op.Degrees[0]) > 1e6 || math.Abs(op.Degrees[1]) > 1e6 {
		return optab.OpError(where, "degrees %v: want min <= max, finite", op.Degrees)
	}
	if err := optab.CheckFill(op.Fill, where); err != nil {
		return err
	}
	if op.Interp != InterpNearest && op.Interp != InterpBilinear {
		return optab.OpError(where, "interpolation %s: torchvision rotates and shears tensors with nearest or bilinear", op.Interp)
	}
	if op.HasCenter && !(math.Abs(op.Center[0]) <= 1e6 && math.Abs(op.Center[1]) <= 1e6) {
		return optab.OpError(where, "center %v: want finite", op.Center)
	}
	if op.Kind == OpRandomRotation {
		return nil
	}
	if op.HasTranslate {
		for _, t := range op.Translate {
			if !(t >= 0 && t <= 1) {
				return optab.OpError(where, "translate %v: each must be in 0..1", op.Translate)
			}
		}
	}
	if op.Scale != [2]float64{} && !(op.Scale[0] > 0 && op.Scale[0] <= op.Scale[1] && op.Scale[1] <= 100) {
		return optab.OpError(where, "scale %v: want 0 < min <= max", op.Scale)
	}
	if op.HasShear {
		k := 2
		if op.ShearY {
			k = 4
		}
		for i := 0; i < k; i += 2 {
			if !(op.Shear[i] <= op.Shear[i+1]) || math.Abs(op.Shear[i]) > 1e6 || math.Abs(op.Shear[i+1]) > 1e6 {
				return optab.OpError(where, "shear %v: want min <= max, finite", op.Shear[:k])
			}
		}
	}
	return nil
}

// drawAffine is RandomAffine's make_params.
func drawAffine(n *optab.Node, r *det.RNG, d *optab.Drawer) {
	op := n.Op
	st := fn.Step{Fn: fn.Affine, Interp: op.Interp, Fill: op.Fill, FillNone: op.FillNone, MaskFill: maskFill(op), Center: op.Center, HasCenter: op.HasCenter}
	st.F[0] = r.Uniform(op.Degrees[0], op.Degrees[1])
	if op.HasTranslate {
		dx := float64(op.Translate[0] * float64(d.W))
		dy := float64(op.Translate[1] * float64(d.H))
		st.F[1] = math.RoundToEven(r.Uniform(-dx, dx))
		st.F[2] = math.RoundToEven(r.Uniform(-dy, dy))
	}
	st.F[3] = 1
	if op.Scale != [2]float64{} {
		st.F[3] = r.Uniform(op.Scale[0], op.Scale[1])
	}
	if op.HasShear {
		st.F[4] = r.Uniform(op.Shear[0], op.Shear[1])
		if op.ShearY {
			st.F[5] = r.Uniform(op.Shear[2], op.Shear[3])
		}
	}
	d.Emit(st)
}

// drawPerspective is RandomPerspective.make_params on a w x h image: each
// corner's x and y drawn as torch.randint over its band, bound =
// int(distortion_scale * (side // 2)) + 1 pixels from its edge, in its
// order (top left, top right, bottom right, bottom left; x then y).
func drawPerspective(r *det.RNG, w, h int, op *optab.Op) fn.Step {
	bw := int(float64(op.Distortion*float64(w/2))) + 1
	bh := int(float64(op.Distortion*float64(h/2))) + 1
	randint := func(lo, hi int) int { return lo + r.Intn(hi-lo) }
	st := fn.Step{Fn: fn.Perspective, Interp: op.Interp, Fill: op.Fill, FillNone: op.FillNone, MaskFill: maskFill(op)}
	st.I[0] = fn.PackPoint(randint(0, bw), randint(0, bh))
	st.I[1] = fn.PackPoint(randint(w-bw, w), randint(0, bh))
	st.I[2] = fn.PackPoint(randint(w-bw, w), randint(h-bh, h))
	st.I[3] = fn.PackPoint(randint(0, bw), randint(h-bh, h))
	st.I[4], st.I[5] = w-1, h-1
	return st
}

// ExpandBound bounds the size of op's rotation with expand=True (a
// RandomRotation's, its angle drawn in Degrees) of a w x h image: a side
// of the rotated image spans w|cos a| + h|sin a| (the height w|sin a| +
// h|cos a|), at most the diagonal, reached where the range holds an angle
// of atan2(h, w) (atan2(w, h)) modulo 180 degrees or its negative, else
// at an end; torchvision's size (kernels.RotatedSize: the ceiling of the
// maximum less the floor of the minimum, in float32) is less than that
// span plus 2.
func ExpandBound(op *optab.Op, w, h int) (int, int) {
	lo, hi := op.Degrees[0], op.Degrees[1]
	fw, fh := float64(w), float64(h)
	span := func(a, b float64) float64 { // a's cos weight, b's sin weight
		best := 0.0
		for _, deg := range []float64{lo, hi} { // det's sin and cos: the bound is the same on every machine
			r := float64(math.Mod(deg, 360) * (math.Pi / 180))
			best = max(best, float64(a*math.Abs(det.Cos(r)))+float64(b*math.Abs(det.Sin(r))))
		}
		phi := float64(det.Atan(b/a) * (180 / math.Pi))
		for _, c := range []float64{phi, -phi} {
			if k := math.Ceil((lo - c) / 180); c+float64(k*180) <= hi {
				best = math.Sqrt(float64(a*a) + float64(b*b))
			}
		}
		return best
	}
	side := func(s float64) int { return int(math.Ceil(float64(s*(1+1e-5))+0.01)) + 1 }
	return side(span(fw, fh)), side(span(fh, fw))
}

// growRotate bounds a transform whose ops after the geometry grow the
// image (RandomRotation with expand=True, rest[k] the first op that
// holds one): the largest image its ops make (room), and, unless a
// Resize((h, w)) or CenterCrop after the last such rotation fixes the
// size again (fixSize), each sample is its own size (the per-sample
// sizes of lsj.go), outH x outW their bound. geomW x geomH keeps the
// geometry's size (its bound, of a RandomShortestSize's per-sample
// sizes). The ops compiled for one size may not follow it.
func (t *Transform) growRotate(rest []optab.Op, first int) error {
	k := slices.IndexFunc(rest, func(op optab.Op) bool { return optab.Grows(&op) })
	if k < 0 {
		return nil
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: op %d (RandomRotation with expand=True): %s", errs.Unsupported, first+k, fmt.Sprintf(format, a...))
	}
	if t.mosaic != nil || t.yolo != nil {
		return bad("after a YOLO geometry (a load_image's or a mosaic's) is not supported (its size is fixed)")
	}
	if t.whole {
		return t.growWhole(rest, bad)
	}
	w, h, room, fixed := t.outW, t.outH, 3*t.outW*t.outH, !t.vary
	var walk func(ops []optab.Op)
	walk = func(ops []optab.Op) {
		for i := range ops {
			if ops[i].Kind == OpRandomRotation && ops[i].Expand {
				w, h = ExpandBound(&ops[i], w, h)
				room, fixed = max(room, 3*w*h), false
			}
			walk(ops[i].Ops)
		}
	}
	for i := k; i < len(rest); i++ {
		if k := rest[i].Kind; k == OpResize || k == OpCenterCrop { // fixSize
			h, w, fixed = rest[i].Size[0], rest[i].Size[1], true
			continue
		}
		if !fixed {
			vary := t.vary
			t.vary = true
			err := t.checkVaryOps(rest[i : i+1])
			if t.vary = vary; err != nil {
				return err
			}
		}
		walk(rest[i : i+1])
		if w > optab.MaxSide || h > optab.MaxSide {
			return bad("its bound %dx%d of the %dx%d image is more than %d a side", w, h, t.outW, t.outH, optab.MaxSide)
		}
	}
	t.geomW, t.geomH, t.room = t.outW, t.outH, room
	t.outW, t.outH, t.vary = w, h, !fixed
	return nil
}

// growWhole is growRotate for a transform whose geometry is the image
// whole (the rotation first): nothing bounds the image's size before a
// sample's header says it, so a Resize((h, w)) or CenterCrop at the top
// level after the last rotation must fix the size; the room a sample is
// made in is its own (RoomFor), counted in the memory budget's scratch
// from its header.
func (t *Transform) growWhole(rest []optab.Op, bad func(string, ...any) error) error {
	w, h, fixed := 0, 0, false
	for i := range rest {
		if k := rest[i].Kind; k == OpResize || k == OpCenterCrop { // fixSize
			h, w, fixed = rest[i].Size[0], rest[i].Size[1], true
			continue
		}
		if growsAny(rest[i : i+1]) {
			fixed = false
		}
	}
	if !fixed {
		return bad("first, before any geometry, it needs a Resize((h, w)) or CenterCrop at the top level after it: " +
			"each sample would be its own size, which nothing bounds (or put a geometry that fixes the size before it)")
	}
	t.grow = slices.Clone(rest)
	t.geomW, t.geomH, t.room = 1, 1, 0 // the geometry's size is each sample's (SampleSize)
	t.outW, t.outH, t.vary = w, h, false
	return nil
}

// growsAny says whether ops (or the ops they hold) grow the image.
func growsAny(ops []optab.Op) bool {
	for i := range ops {
		if optab.Grows(&ops[i]) || growsAny(ops[i].Ops) {
			return true
		}
	}
	return false
}

// RoomFor is the room, in bytes, a sample of a w x h image is made in:
// PixelBytes, or, for a transform whose geometry is the image whole (a
// RandomRotation with expand=True first), the largest image its ops make
// of that image, as growRotate bounds it (each rotation's ExpandBound,
// the Resize or CenterCrop after it), and the output's.
func (t *Transform) RoomFor(w, h int) int {
	if !t.whole {
		return t.PixelBytes()
	}
	room := max(3*t.outW*t.outH, 3*w*h)
	var walk func(ops []optab.Op)
	walk = func(ops []optab.Op) {
		for i := range ops {
			if ops[i].Kind == OpRandomRotation && ops[i].Expand {
				w, h = ExpandBound(&ops[i], w, h)
				room = max(room, 3*w*h)
			}
			walk(ops[i].Ops)
		}
	}
	for i := range t.grow {
		if k := t.grow[i].Kind; k == OpResize || k == OpCenterCrop {
			h, w = t.grow[i].Size[0], t.grow[i].Size[1]
			continue
		}
		walk(t.grow[i : i+1])
	}
	return room
}

// GrowBytes bounds the buffer the steps after a RandomRotation with
// expand=True first take besides the room (kernels.Scratch's Spare): a
// Resize's rows resampled across (3 bytes a pixel of the image's height
// by the new width) and a CenterCrop's copy of the image, for a w x h
// image, the sizes walked as RoomFor walks them; 0 for a transform whose
// geometry is not the image whole.
func (t *Transform) GrowBytes(w, h int) int {
	if !t.whole {
		return 0
	}
	n := 0
	step := func(op *optab.Op, w, h int) {
		switch op.Kind {
		case OpResize:
			nw, _ := ResizedSize(max(w, 1), max(h, 1), op.Size)
			n = max(n, 3*h*(nw+1))
		case OpCenterCrop:
			n = max(n, 3*w*h)
		}
	}
	var walk func(ops []optab.Op)
	walk = func(ops []optab.Op) {
		for i := range ops {
			if ops[i].Kind == OpRandomRotation && ops[i].Expand {
				w, h = ExpandBound(&ops[i], w, h)
			}
			step(&ops[i], w, h)
			walk(ops[i].Ops)
		}
	}
	for i := range t.grow {
		if k := t.grow[i].Kind; k == OpResize || k == OpCenterCrop {
			step(&t.grow[i], w, h)
			h, w = t.grow[i].Size[0], t.grow[i].Size[1]
			continue
		}
		walk(t.grow[i : i+1])
	}
	return n
}

// geomSize is the size the geometry makes: outW x outH, or of a
// transform whose ops grow the image (growRotate), geomW x geomH.
func (t *Transform) geomSize() (w, h int) {
	if t.geomW > 0 {
		return t.geomW, t.geomH
	}
	return t.outW, t.outH
}

// turns says whether t's ops (at the top level) have a RandomRotation, a
// RandomAffine or a RandomPerspective: what moves masks through canvas
// indexes (4 bytes a canvas pixel) rather than maps of rows and columns.
func (t *Transform) turns() bool {
	for i := range t.ops {
		if k := t.ops[i].Kind; k == OpRandomRotation || k == OpRandomAffine || k == OpRandomPerspective {
			return true
		}
	}
	return false
}

// KernelScratch is what the steps' kernels keep of a worker's scratch
// (kernels.Scratch) for images of px pixels and side the longer side at
// most: PerPx*px + PerSide*side + Fixed (kernelScratchOf).
type KernelScratch struct{ PerPx, PerSide, Fixed int64 }

// kernelScratchOf bounds what ops' kernels keep, by what each op's Def
// says it keeps (ops.Keeps; containers' ops counted; each kind of buffer
// once, as it is reused by the next step that keeps it): a warp's copy of
// the image and RGBX source (7 bytes a pixel; the policies' rotate, shear
// and translate too, and their sharpness, 2 rows), AugMix's original,
// running blend and accumulator (18 more), GaussianBlur's planes and sums
// (6 a pixel, 8 a side, its taps and padded rows by its kernel),
// RandomAdjustSharpness's two rows, and RandomErasing's noise tables (192
// KiB) with value="random"; the other steps keep nothing.
func kernelScratchOf(ops []optab.Op) KernelScratch {
	var keeps optab.Keeps
	var walk func(ops []optab.Op)
	walk = func(ops []optab.Op) {
		for i := range ops {
			if d := optab.Lookup(ops[i].Kind); d != nil && d.Keeps != nil {
				keeps = keeps.Or(d.Keeps(&ops[i]))
			}
			walk(ops[i].Ops)
		}
	}
	walk(ops)
	var k KernelScratch
	if keeps.Warp {
		k.PerPx += 7
	}
	if keeps.Mix {
		k.PerPx += 18
	}
	if keeps.Sharp {
		k.PerSide += 2
	}
	if keeps.Blur {
		k.PerPx += 6
		k.PerSide += 8
		k.Fixed += 16*int64(keeps.BlurSide) + 256
	}
	if keeps.Erase {
		k.Fixed += 3 << 16
	}
	if k != (KernelScratch{}) {
		k.Fixed += 4 << 10 // the warps' parameters, the slices' rounding
	}
	return k
}

// keepsWarp is what a warp's kernels keep: the image's copy and its RGBX
// source.
func keepsWarp(*optab.Op) optab.Keeps { return optab.Keeps{Warp: true} }

// angleArgs reads torchvision's _setup_angle: a number x >= 0 is (-x, x),
// else (min, max).
func angleArgs(a *optab.Args, name string) [2]float64 {
	switch fs := a.Floats(name); len(fs) {
	case 1:
		if !(fs[0] >= 0) {
			a.Errorf("%s %v: a single number must be >= 0", name, fs[0])
		}
		return [2]float64{0 - fs[0], fs[0]}
	case 2:
		return [2]float64(fs)
	}
	a.Errorf("%s %v: want a number or (min, max)", name, a.Floats(name))
	return [2]float64{}
}

// centerArgs reads a warp's center: None (the image's) or (x, y).
func centerArgs(a *optab.Args, op *optab.Op) {
	if a.IsNone("center") {
		return
	}
	op.Center, op.HasCenter = a.Pair("center"), true
}

// affineArgs reads RandomAffine's: translate and scale None or pairs,
// shear None, a number x ((-x, x) along x), (min, max) along x, or
// (min_x, max_x, min_y, max_y).
func affineArgs(a *optab.Args) optab.Op {
	op := optab.Op{Degrees: angleArgs(a, "degrees"), Interp: a.Interp("interpolation")}
	a.TypedFill("fill", &op, true)
	centerArgs(a, &op)
	if !a.IsNone("translate") {
		op.Translate, op.HasTranslate = a.Pair("translate"), true
	}
	if !a.IsNone("scale") {
		op.Scale = a.Pair("scale")
	}
	switch s := a.Floats("shear"); len(s) {
	case 0:
	case 1:
		op.HasShear, op.Shear = true, [4]float64{angleArgs(a, "shear")[0], s[0]}
	case 2:
		op.HasShear = true
		copy(op.Shear[:], s)
	case 4:
		op.HasShear, op.ShearY = true, true
		copy(op.Shear[:], s)
	default:
		a.Errorf("shear has %d values: want None, a number, 2 or 4", len(s))
	}
	return op
}
