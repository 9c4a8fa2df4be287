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
	// OpRandomRotate90 is albumentations' RandomRotate90: with
	// probability P, k quarter turns counter-clockwise, k drawn uniform
	// in 0..3 (np.rot90(img, k)); a rotate step of 90k degrees with
	// expand (torchvision's rotate at a right angle: the pixels moved,
	// none resampled, the sides swapped by an odd k).
	OpRandomRotate90 optab.OpKind = "RandomRotate90"
)

// The warps' own arguments (optab.Op.Args), with torchvision's names,
// their interpolation and fill each one's optab.Resampling and
// optab.Filling; RandomPerspective's p is optab.Op.P.
type (
	// RotationArgs are RandomRotation's: degrees (min, max), expand, and
	// center, pixels from the top left (HasCenter false: None, the
	// image's centre).
	RotationArgs struct {
		Degrees   [2]float64
		Expand    bool
		Center    [2]float64
		HasCenter bool
		optab.Resampling
		optab.Filling
	}
	// AffineArgs are RandomAffine's: degrees; translate, (max_dx, max_dy)
	// as fractions of the size (HasTranslate false: None); scale (zero:
	// None); shear along x (Shear[0:2]) and, with ShearY, y (Shear[2:4])
	// (HasShear false: None); center, as RotationArgs'.
	AffineArgs struct {
		Degrees          [2]float64
		Translate        [2]float64
		HasTranslate     bool
		Scale            [2]float64
		Shear            [4]float64
		HasShear, ShearY bool
		Center           [2]float64
		HasCenter        bool
		optab.Resampling
		optab.Filling
	}
	// PerspectiveArgs are RandomPerspective's: distortion_scale (0..1).
	PerspectiveArgs struct {
		Distortion float64
		optab.Resampling
		optab.Filling
	}
)

func init() {
	optab.Define(optab.Def{Kind: OpRandomRotation, Doc: "rotates by an angle drawn uniform in degrees (min, max), about center, filling with fill; expand grows the image to hold all of it",
		Params: []optab.Param{{Name: "degrees", Typ: optab.PRange}, {Name: "interpolation", Typ: optab.PInterp, Def: "'nearest'"},
			{Name: "expand", Typ: optab.PBool, Def: "False"}, {Name: "center", Typ: optab.PFloats, Def: "None"}, {Name: "fill", Typ: optab.PFillBy, Def: "0"}},
		Targets: optab.TargetsMove, Compile: compileWarp, Format: optab.FormatNone, Masks: warpMasks, Keeps: keepsWarp,
		FromArgs: func(a *optab.Args) optab.Op {
			ra := &RotationArgs{Degrees: angleArgs(a, "degrees"), Expand: a.Bool("expand"), Resampling: a.Resampling("interpolation"), Filling: a.TypedFill("fill", true)}
			ra.Center, ra.HasCenter = centerArgs(a)
			return optab.Op{Args: ra}
		},
		Grow: func(op *optab.Op, w, h int) (int, int, bool) {
			if !optab.ArgsOf[RotationArgs](op).Expand {
				return w, h, false
			}
			w, h = ExpandBound(op, w, h)
			return w, h, true
		},
		Draw: func(n *optab.Node, r *det.RNG, d *optab.Drawer) {
			op, a := n.Op, optab.ArgsOf[RotationArgs](n.Op)
			st := fn.Step{Fn: fn.Rotate, F: [6]float64{r.Uniform(a.Degrees[0], a.Degrees[1])}, Interp: a.Interp,
				Fill: a.Fill, FillNone: a.FillNone, MaskFill: maskFill(op), Center: a.Center, HasCenter: a.HasCenter}
			if a.Expand { // the ops after it draw on the grown image
				st.I[0] = 1
				d.W, d.H = kernels.RotatedSize(d.W, d.H, st.F[0], a.Center, a.HasCenter)
			}
			d.Emit(st)
		},
		MaxNs: func(n *optab.Node, w, h int) float64 {
			if optab.ArgsOf[RotationArgs](n.Op).Expand {
				w, h = ExpandBound(n.Op, w, h)
			}
			return optab.StepNs(fn.Step{Fn: fn.Rotate, Interp: optab.ResamplingOf(n.Op).Interp}, w, h)
		}})
	optab.Define(optab.Def{Kind: OpRandomAffine, Doc: "an affine map of drawn angle, translation, scale and shear, about center",
		Params: []optab.Param{{Name: "degrees", Typ: optab.PRange}, {Name: "translate", Typ: optab.PFloats, Def: "None"}, {Name: "scale", Typ: optab.PFloats, Def: "None"},
			{Name: "shear", Typ: optab.PFloats, Def: "None"}, {Name: "interpolation", Typ: optab.PInterp, Def: "'nearest'"},
			{Name: "fill", Typ: optab.PFillBy, Def: "0"}, {Name: "center", Typ: optab.PFloats, Def: "None"}},
		Targets: optab.TargetsMove, Compile: compileWarp, Format: optab.FormatNone, Masks: warpMasks, Keeps: keepsWarp,
		Draw: drawAffine, FromArgs: affineArgs,
		MaxNs: func(n *optab.Node, w, h int) float64 {
			return optab.StepNs(fn.Step{Fn: fn.Affine, Interp: optab.ResamplingOf(n.Op).Interp}, w, h)
		}})
	optab.Define(optab.Def{Kind: OpRandomPerspective, Doc: "with probability p, a perspective moving each corner up to distortion_scale of half the side inward",
		Params: []optab.Param{{Name: "distortion_scale", Typ: optab.PFloat, Def: "0.5"}, optab.PParam(0.5),
			{Name: "interpolation", Typ: optab.PInterp, Def: "'bilinear'"}, {Name: "fill", Typ: optab.PFillBy, Def: "0"}},
		Targets: optab.TargetsMove, Keeps: keepsWarp,
		FromArgs: func(a *optab.Args) optab.Op {
			return optab.Op{P: a.Float("p"),
				Args: &PerspectiveArgs{Distortion: a.Float("distortion_scale"), Resampling: a.Resampling("interpolation"), Filling: a.TypedFill("fill", true)}}
		},
		Compile: func(c *optab.Compiler, n *optab.Node, at optab.CompileAt) error {
			op := n.Op
			if err := optab.CheckProb(op, at); err != nil {
				return err
			}
			if d := optab.ArgsOf[PerspectiveArgs](op).Distortion; !(d >= 0 && d <= 1) {
				return optab.OpError(at.Where, "distortion_scale %v: want 0..1", d)
			}
			if err := optab.CheckFill(optab.FillOf(op).Fill, at.Where); err != nil {
				return err
			}
			if in := optab.ResamplingOf(op).Interp; in != InterpNearest && in != InterpBilinear {
				return optab.OpError(at.Where, "interpolation %s: torchvision's perspective of a tensor is nearest or bilinear", in)
			}
			return nil
		},
		Draw: func(n *optab.Node, r *det.RNG, d *optab.Drawer) {
			if r.Float64() < n.Op.P { // _RandomApplyTransform's torch.rand(1) >= p skips
				d.Emit(drawPerspective(r, d.W, d.H, n.Op))
			}
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			pa := optab.ArgsOf[PerspectiveArgs](op)
			fmt.Fprintf(b, "(distortion_scale=%g, p=%g, fill=%v", pa.Distortion, op.P, pa.Fill)
			formatInterp(b, op)
		},
		MaxNs: func(n *optab.Node, w, h int) float64 {
			return optab.StepNs(fn.Step{Fn: fn.Perspective, Interp: optab.ResamplingOf(n.Op).Interp}, w, h)
		},
		Masks: warpMasks})
	optab.Define(optab.Def{Kind: OpRandomRotate90, Named: true, Targets: optab.TargetsMove,
		Doc:    "with probability p, k quarter turns counter-clockwise, k drawn uniform in 0..3 (albumentations' RandomRotate90); an odd k swaps the sides",
		Params: []optab.Param{optab.PParam(0.5)}, Keeps: keepsWarp,
		Compile: func(_ *optab.Compiler, n *optab.Node, at optab.CompileAt) error { return optab.CheckProb(n.Op, at) },
		Grow: func(_ *optab.Op, w, h int) (int, int, bool) { // a turn swaps the sides: the bound is the longer, both ways
			return max(w, h), max(w, h), true
		},
		Draw: func(n *optab.Node, r *det.RNG, d *optab.Drawer) {
			if r.Float64() >= n.Op.P {
				return
			}
			if k := r.Intn(4); k > 0 {
				st := fn.Step{Fn: fn.Rotate, F: [6]float64{float64(90 * k)}, Interp: InterpNearest}
				st.I[0] = 1 // expand: rotate's right-angle path, the sides swapped by an odd k
				d.W, d.H = kernels.RotatedSize(d.W, d.H, st.F[0], [2]float64{}, false)
				d.Emit(st)
			}
		},
		MaxNs: func(_ *optab.Node, w, h int) float64 {
			return optab.StepNs(fn.Step{Fn: fn.Rotate, Interp: InterpNearest}, max(w, h), max(w, h))
		}})
}

// warpMasks refuses a rotation, affine or perspective whose masks' fill is not a
// Mask's value (fillMasks): torchvision fills a Mask with the op's fill
// too (None: 0), or with a fill per type's Mask value.
func warpMasks(op *optab.Op) error {
	if f := optab.FillOf(op); f.FillNone && !f.FillTyped {
		return nil
	}
	return fillMasks(op)
}

// compileWarp checks RandomRotation's and RandomAffine's arguments.
func compileWarp(_ *optab.Compiler, n *optab.Node, at optab.CompileAt) error {
	op, where := n.Op, at.Where
	var a AffineArgs // a rotation's degrees and center, or the affine's
	if op.Kind == OpRandomRotation {
		ra := optab.ArgsOf[RotationArgs](op)
		a.Degrees, a.Center, a.HasCenter = ra.Degrees, ra.Center, ra.HasCenter
	} else {
		a = optab.ArgsOf[AffineArgs](op)
	}
	if !(a.Degrees[0] <= a.Degrees[1]) || math.Abs(a.Degrees[0]) > 1e6 || math.Abs(a.Degrees[1]) > 1e6 {
		return optab.OpError(where, "degrees %v: want min <= max, finite", a.Degrees)
	}
	if err := optab.CheckFill(optab.FillOf(op).Fill, where); err != nil {
		return err
	}
	if in := optab.ResamplingOf(op).Interp; in != InterpNearest && in != InterpBilinear {
		return optab.OpError(where, "interpolation %s: torchvision rotates and shears tensors with nearest or bilinear", in)
	}
	if a.HasCenter && !(math.Abs(a.Center[0]) <= 1e6 && math.Abs(a.Center[1]) <= 1e6) {
		return optab.OpError(where, "center %v: want finite", a.Center)
	}
	if op.Kind == OpRandomRotation {
		return nil
	}
	if a.HasTranslate {
		for _, t := range a.Translate {
			if !(t >= 0 && t <= 1) {
				return optab.OpError(where, "translate %v: each must be in 0..1", a.Translate)
			}
		}
	}
	if a.Scale != [2]float64{} && !(a.Scale[0] > 0 && a.Scale[0] <= a.Scale[1] && a.Scale[1] <= 100) {
		return optab.OpError(where, "scale %v: want 0 < min <= max", a.Scale)
	}
	if a.HasShear {
		k := 2
		if a.ShearY {
			k = 4
		}
		for i := 0; i < k; i += 2 {
			if !(a.Shear[i] <= a.Shear[i+1]) || math.Abs(a.Shear[i]) > 1e6 || math.Abs(a.Shear[i+1]) > 1e6 {
				return optab.OpError(where, "shear %v: want min <= max, finite", a.Shear[:k])
			}
		}
	}
	return nil
}

// drawAffine is RandomAffine's make_params.
func drawAffine(n *optab.Node, r *det.RNG, d *optab.Drawer) {
	op := optab.ArgsOf[AffineArgs](n.Op)
	st := fn.Step{Fn: fn.Affine, Interp: op.Interp, Fill: op.Fill, FillNone: op.FillNone, MaskFill: maskFill(n.Op), Center: op.Center, HasCenter: op.HasCenter}
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
	pa := optab.ArgsOf[PerspectiveArgs](op)
	dist := pa.Distortion
	bw := int(float64(dist*float64(w/2))) + 1
	bh := int(float64(dist*float64(h/2))) + 1
	randint := func(lo, hi int) int { return lo + r.Intn(hi-lo) }
	st := fn.Step{Fn: fn.Perspective, Interp: pa.Interp, Fill: pa.Fill, FillNone: pa.FillNone, MaskFill: maskFill(op)}
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
	deg := optab.ArgsOf[RotationArgs](op).Degrees
	lo, hi := deg[0], deg[1]
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
	if op, _ := oneSizeAfterGrowth(rest[k:], t.vary, true); op != nil {
		return bad("%s after it is not supported: it is compiled for one size, and the rotation leaves each sample its own", op.Kind)
	}
	room, fixed := 3*t.outW*t.outH, !t.vary
	w, h, err := walkGrowth(rest[k:], t.outW, t.outH, func(s growStep) error {
		switch {
		case s.fixes:
			fixed = true
			return nil
		}
		if s.grows {
			room, fixed = max(room, 3*s.w*s.h), false
		}
		if s.w > optab.MaxSide || s.h > optab.MaxSide {
			return bad("its bound %dx%d of the %dx%d image is more than %d a side", s.w, s.h, t.outW, t.outH, optab.MaxSide)
		}
		return nil
	})
	if err != nil {
		return err
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
	fixed := false
	w, h, _ := walkGrowth(rest, 1, 1, func(s growStep) error { // the sizes that count are the fixes'
		fixed = s.fixes || fixed && !s.grows
		return nil
	})
	if !fixed {
		return bad("first, before any geometry, it needs a Resize((h, w)) or CenterCrop at the top level after it: " +
			"each sample would be its own size, which nothing bounds (or put a geometry that fixes the size before it)")
	}
	if op, _ := oneSizeAfterGrowth(rest, true, true); op != nil {
		return bad("%s after it is not supported before a Resize((h, w)) or CenterCrop fixes the size: it is compiled for one size, and the rotation leaves each sample its own", op.Kind)
	}
	t.grow = slices.Clone(rest)
	t.geomW, t.geomH, t.room = 1, 1, 0 // the geometry's size is each sample's (SampleSize)
	t.outW, t.outH, t.vary = w, h, false
	return nil
}

// fixesSize says whether op, at the top level after an op that grows
// the image, fixes its size again (its Def's AfterGrow: a Resize((h, w)),
// a CenterCrop).
func fixesSize(op *optab.Op) bool {
	d := optab.Lookup(op.Kind)
	return d != nil && d.AfterGrow != nil
}

// oneSizeAfterGrowth is the first op of ops compiled for one size (its
// Def's OneSize: a policy) that may run on an image an op
// before it grew (its Def's Grow), at any depth, as each container runs
// its ops (its Def's Kids): a RandomApply's in order, a RandomChoice's
// each after what came before the container, a RandomOrder's each after
// any of the others; nil where there is none. grown says whether the
// image may have grown before ops (or be of per-sample sizes already);
// grew, whether it may be after them. A Resize((h, w)) or CenterCrop at
// the top level fixes the size again (fixesSize).
func oneSizeAfterGrowth(ops []optab.Op, grown, top bool) (op *optab.Op, grew bool) {
	for i := range ops {
		o := &ops[i]
		if top && fixesSize(o) {
			grown = false
			continue
		}
		d := optab.Lookup(o.Kind)
		if d == nil {
			continue
		}
		if grown && d.OneSize {
			return o, true
		}
		_, _, g := optab.GrowOf(o, 1, 1)
		grown = grown || g
		switch kids := o.Ops; d.Kids {
		case optab.KidsInOrder:
			if op, grown = oneSizeAfterGrowth(kids, grown, false); op != nil {
				return op, true
			}
		case optab.KidsOneOf, optab.KidsAnyOrder:
			after := grown
			for j := range kids {
				before := grown // a RandomChoice's: what came before it; a RandomOrder's: and any other kid
				for m := range kids {
					before = before || d.Kids == optab.KidsAnyOrder && m != j && optab.Grows(&kids[m])
				}
				op, g := oneSizeAfterGrowth(kids[j:j+1], before, false)
				if op != nil {
					return op, true
				}
				after = after || g
			}
			grown = after
		}
	}
	return nil, grown
}

// compileSizes is the size each top-level op of rest gets, as its
// Compile sees it (an op compiled for one size, Def.OneSize, needs it):
// the geometry's output (its bound, of per-sample sizes); after an op
// that grows the image, the bound walkGrowth gives; after a Resize((h, w))
// or CenterCrop at the top level that fixes the size again, that size;
// 0 x 0 where nothing bounds it (a rotation of the image whole, before
// the fix). A policy after a rotation and a CenterCrop was compiled for
// the size before the rotation, its translations that image's.
func (t *Transform) compileSizes(rest []optab.Op) [][2]int {
	sizes := make([][2]int, len(rest))
	unknown, i := t.whole, 0
	walkGrowth(rest, t.outW, t.outH, func(s growStep) error {
		if s.top {
			if !unknown {
				sizes[i] = [2]int{s.w0, s.h0}
			}
			i++
		}
		unknown = unknown && !s.fixes
		return nil
	})
	return sizes
}

// A growStep is one op of a transform whose ops grow the image, as
// walkGrowth walks them: the op, whether it stands at the top level, the
// image's size before it (w0 x h0) and after it (w x h), and whether it
// grew the image (its Def's Grow, at any depth) or fixed its size (a
// Resize((h, w)) or CenterCrop at the top level: fixSize).
type growStep struct {
	op           *optab.Op
	top          bool
	w0, h0, w, h int
	grows, fixes bool
}

// walkGrowth walks ops from a w x h image, each op before the ops it
// holds (a RandomChoice's each from the image it gets, the largest size
// they leave after it; any other container's in order), and returns the
// size they leave; at's error ends the walk. The
// one walk of the sizes a transform whose ops grow the image makes:
// growRotate's bounds, RoomFor's room and GrowBytes' buffers.
func walkGrowth(ops []optab.Op, w, h int, at func(s growStep) error) (int, int, error) {
	return walkGrowthAt(ops, w, h, true, at)
}

func walkGrowthAt(ops []optab.Op, w, h int, top bool, at func(s growStep) error) (int, int, error) {
	for i := range ops {
		op := &ops[i]
		s := growStep{op: op, top: top, w0: w, h0: h}
		if top && fixesSize(op) {
			s.h, s.w, s.fixes = op.Size[0], op.Size[1], true
		} else {
			s.w, s.h, s.grows = optab.GrowOf(op, w, h)
		}
		if err := at(s); err != nil {
			return 0, 0, err
		}
		var err error
		if d := optab.Lookup(op.Kind); d != nil && d.Kids == optab.KidsOneOf {
			w, h = s.w, s.h // one of them runs: each from the same image, the largest it leaves
			for j := range op.Ops {
				kw, kh, err := walkGrowthAt(op.Ops[j:j+1], s.w, s.h, false, at)
				if err != nil {
					return 0, 0, err
				}
				w, h = max(w, kw), max(h, kh)
			}
		} else if w, h, err = walkGrowthAt(op.Ops, s.w, s.h, false, at); err != nil {
			return 0, 0, err
		}
	}
	return w, h, nil
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
	walkGrowth(t.grow, w, h, func(s growStep) error {
		if s.grows {
			room = max(room, 3*s.w*s.h)
		}
		return nil
	})
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
	walkGrowth(t.grow, w, h, func(s growStep) error {
		switch s.op.Kind {
		case OpResize: // its rows resampled across
			nw, _ := ResizedSize(max(s.w0, 1), max(s.h0, 1), s.op.Size)
			n = max(n, 3*s.h0*(nw+1))
		case OpCenterCrop: // its copy
			n = max(n, 3*s.w0*s.h0)
		}
		return nil
	})
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

// centerArgs reads a warp's center: None (the image's: has false) or
// (x, y).
func centerArgs(a *optab.Args) (center [2]float64, has bool) {
	if a.IsNone("center") {
		return center, false
	}
	return a.Pair("center"), true
}

// affineArgs reads RandomAffine's: translate and scale None or pairs,
// shear None, a number x ((-x, x) along x), (min, max) along x, or
// (min_x, max_x, min_y, max_y).
func affineArgs(a *optab.Args) optab.Op {
	aa := &AffineArgs{Degrees: angleArgs(a, "degrees"), Resampling: a.Resampling("interpolation"), Filling: a.TypedFill("fill", true)}
	op := optab.Op{Args: aa}
	aa.Center, aa.HasCenter = centerArgs(a)
	if !a.IsNone("translate") {
		aa.Translate, aa.HasTranslate = a.Pair("translate"), true
	}
	if !a.IsNone("scale") {
		aa.Scale = a.Pair("scale")
	}
	switch s := a.Floats("shear"); len(s) {
	case 0:
	case 1:
		aa.HasShear, aa.Shear = true, [4]float64{angleArgs(a, "shear")[0], s[0]}
	case 2:
		aa.HasShear = true
		copy(aa.Shear[:], s)
	case 4:
		aa.HasShear, aa.ShearY = true, true
		copy(aa.Shear[:], s)
	default:
		a.Errorf("shear has %d values: want None, a number, 2 or 4", len(s))
	}
	return op
}
