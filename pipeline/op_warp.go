package pipeline

// The warps: torchvision.transforms.v2's RandomRotation, RandomAffine and
// RandomPerspective, and rotate, affine and perspective, with how they
// move a job's boxes and keypoints (pipeline/targets) and masks.
// Floating point as in ops_compile.go.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/det"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

const (
	OpRandomRotation OpKind = "RandomRotation"
	OpRandomAffine   OpKind = "RandomAffine"
	// OpRandomPerspective is torchvision's RandomPerspective: with
	// probability P, the image's corners moved each within Distortion of
	// half its side inward (drawPerspective), the image resampled so
	// (Interp, Fill); the targets move with it.
	OpRandomPerspective OpKind = "RandomPerspective"
)

func init() {
	defineOp(opDef{kind: OpRandomRotation, doc: "rotates by an angle drawn uniform in degrees (min, max), about center, filling with fill; expand grows the image to hold all of it",
		params: []param{{name: "degrees", typ: pRange}, {name: "interpolation", typ: pInterp, def: "'nearest'"},
			{name: "expand", typ: pBool, def: "False", field: "Expand"}, {name: "center", typ: pFloats, def: "None"}, {name: "fill", typ: pFillBy, def: "0"}},
		targets: targetsMove, compile: compileWarp, format: formatNone, masks: warpMasks,
		draw: func(n *node, r *RNG, d *drawer) {
			op := n.op
			st := Step{Fn: FnRotate, F: [6]float64{r.Uniform(op.Degrees[0], op.Degrees[1])}, Interp: op.Interp,
				Fill: op.Fill, FillNone: op.FillNone, MaskFill: op.maskFill(), Center: op.Center, HasCenter: op.HasCenter}
			if op.Expand { // the ops after it draw on the grown image
				st.I[0] = 1
				d.w, d.h = kernels.RotatedSize(d.w, d.h, st.F[0], op.Center, op.HasCenter)
			}
			d.emit(st)
		},
		maxNs: func(n *node, w, h int) float64 {
			if n.op.Expand {
				w, h = expandBound(n.op, w, h)
			}
			return stepNs(Step{Fn: FnRotate, Interp: n.op.Interp}, w, h)
		}})
	defineOp(opDef{kind: OpRandomAffine, doc: "an affine map of drawn angle, translation, scale and shear, about center",
		params: []param{{name: "degrees", typ: pRange}, {name: "translate", typ: pFloats, def: "None"}, {name: "scale", typ: pFloats, def: "None"},
			{name: "shear", typ: pFloats, def: "None"}, {name: "interpolation", typ: pInterp, def: "'nearest'"},
			{name: "fill", typ: pFillBy, def: "0"}, {name: "center", typ: pFloats, def: "None"}},
		targets: targetsMove, compile: compileWarp, format: formatNone, masks: warpMasks,
		draw:  func(n *node, r *RNG, d *drawer) { n.drawAffine(r, d) },
		maxNs: func(n *node, w, h int) float64 { return stepNs(Step{Fn: FnAffine, Interp: n.op.Interp}, w, h) }})
	defineOp(opDef{kind: OpRandomPerspective, doc: "with probability p, a perspective moving each corner up to distortion_scale of half the side inward",
		params: []param{{name: "distortion_scale", typ: pFloat, def: "0.5"}, pParam(0.5),
			{name: "interpolation", typ: pInterp, def: "'bilinear'"}, {name: "fill", typ: pFill, def: "0"}},
		targets: targetsMove,
		compile: func(c *compiler, n *node, at compileAt) error {
			op := n.op
			if err := checkProb(op, at); err != nil {
				return err
			}
			if !(op.Distortion >= 0 && op.Distortion <= 1) {
				return opError(at.where, "distortion_scale %v: want 0..1", op.Distortion)
			}
			if err := checkFill(op.Fill, at.where); err != nil {
				return err
			}
			if op.Interp != InterpNearest && op.Interp != InterpBilinear {
				return opError(at.where, "interpolation %s: torchvision's perspective of a tensor is nearest or bilinear", op.Interp)
			}
			return nil
		},
		draw: func(n *node, r *RNG, d *drawer) {
			if r.Float64() < n.op.P { // _RandomApplyTransform's torch.rand(1) >= p skips
				d.emit(drawPerspective(r, d.w, d.h, n.op))
			}
		},
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(distortion_scale=%g, p=%g, fill=%v", op.Distortion, op.P, op.Fill)
			formatInterp(b, op)
		},
		maxNs: func(n *node, w, h int) float64 { return stepNs(Step{Fn: FnPerspective, Interp: n.op.Interp}, w, h) },
		masks: func(*Op) error {
			return fmt.Errorf("masks through RandomPerspective are not written yet (boxes and keypoints are): ask for targets without \"masks\"")
		}})
}

// warpMasks refuses a rotation or affine whose masks' fill is not a
// Mask's value (fillMasks): torchvision fills a Mask with the op's fill
// too (None: 0), or with a fill per type's Mask value.
func warpMasks(op *Op) error {
	if op.FillNone && !op.FillTyped {
		return nil
	}
	return fillMasks(op)
}

// compileWarp checks RandomRotation's and RandomAffine's arguments.
func compileWarp(_ *compiler, n *node, at compileAt) error {
	op, where := n.op, at.where
	if !(op.Degrees[0] <= op.Degrees[1]) || math.Abs(op.Degrees[0]) > 1e6 || math.Abs(op.Degrees[1]) > 1e6 {
		return opError(where, "degrees %v: want min <= max, finite", op.Degrees)
	}
	if err := checkFill(op.Fill, where); err != nil {
		return err
	}
	if op.Interp != InterpNearest && op.Interp != InterpBilinear {
		return opError(where, "interpolation %s: torchvision rotates and shears tensors with nearest or bilinear", op.Interp)
	}
	if op.HasCenter && !(math.Abs(op.Center[0]) <= 1e6 && math.Abs(op.Center[1]) <= 1e6) {
		return opError(where, "center %v: want finite", op.Center)
	}
	if op.Kind == OpRandomRotation {
		return nil
	}
	if op.HasTranslate {
		for _, t := range op.Translate {
			if !(t >= 0 && t <= 1) {
				return opError(where, "translate %v: each must be in 0..1", op.Translate)
			}
		}
	}
	if op.Scale != [2]float64{} && !(op.Scale[0] > 0 && op.Scale[0] <= op.Scale[1] && op.Scale[1] <= 100) {
		return opError(where, "scale %v: want 0 < min <= max", op.Scale)
	}
	if op.HasShear {
		k := 2
		if op.ShearY {
			k = 4
		}
		for i := 0; i < k; i += 2 {
			if !(op.Shear[i] <= op.Shear[i+1]) || math.Abs(op.Shear[i]) > 1e6 || math.Abs(op.Shear[i+1]) > 1e6 {
				return opError(where, "shear %v: want min <= max, finite", op.Shear[:k])
			}
		}
	}
	return nil
}

// drawAffine is RandomAffine's make_params.
func (n *node) drawAffine(r *RNG, d *drawer) {
	op := n.op
	st := Step{Fn: FnAffine, Interp: op.Interp, Fill: op.Fill, FillNone: op.FillNone, MaskFill: op.maskFill(), Center: op.Center, HasCenter: op.HasCenter}
	st.F[0] = r.Uniform(op.Degrees[0], op.Degrees[1])
	if op.HasTranslate {
		dx := float64(op.Translate[0] * float64(d.w))
		dy := float64(op.Translate[1] * float64(d.h))
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
	d.emit(st)
}

// drawPerspective is RandomPerspective.make_params on a w x h image: each
// corner's x and y drawn as torch.randint over its band, bound =
// int(distortion_scale * (side // 2)) + 1 pixels from its edge, in its
// order (top left, top right, bottom right, bottom left; x then y).
func drawPerspective(r *RNG, w, h int, op *Op) Step {
	bw := int(float64(op.Distortion*float64(w/2))) + 1
	bh := int(float64(op.Distortion*float64(h/2))) + 1
	randint := func(lo, hi int) int { return lo + r.Intn(hi-lo) }
	st := Step{Fn: FnPerspective, Interp: op.Interp, Fill: op.Fill, FillNone: op.FillNone}
	st.I[0] = fn.PackPoint(randint(0, bw), randint(0, bh))
	st.I[1] = fn.PackPoint(randint(w-bw, w), randint(0, bh))
	st.I[2] = fn.PackPoint(randint(w-bw, w), randint(h-bh, h))
	st.I[3] = fn.PackPoint(randint(0, bw), randint(h-bh, h))
	st.I[4], st.I[5] = w-1, h-1
	return st
}

// expandBound bounds the size of op's rotation with expand=True (a
// RandomRotation's, its angle drawn in Degrees) of a w x h image: a side
// of the rotated image spans w|cos a| + h|sin a| (the height w|sin a| +
// h|cos a|), at most the diagonal, reached where the range holds an angle
// of atan2(h, w) (atan2(w, h)) modulo 180 degrees or its negative, else
// at an end; torchvision's size (kernels.RotatedSize: the ceiling of the
// maximum less the floor of the minimum, in float32) is less than that
// span plus 2.
func expandBound(op *Op, w, h int) (int, int) {
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
func (t *Transform) growRotate(rest []Op, first int) error {
	k := slices.IndexFunc(rest, func(op Op) bool { return expands(&op) })
	if k < 0 {
		return nil
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: op %d (RandomRotation with expand=True): %s", ErrUnsupported, first+k, fmt.Sprintf(format, a...))
	}
	if t.mosaic != nil || t.yolo != nil {
		return bad("after a Mosaic or a YOLO geometry is not supported (their sizes are fixed)")
	}
	w, h, room, fixed := t.outW, t.outH, 3*t.outW*t.outH, !t.vary
	var walk func(ops []Op)
	walk = func(ops []Op) {
		for i := range ops {
			if ops[i].Kind == OpRandomRotation && ops[i].Expand {
				w, h = expandBound(&ops[i], w, h)
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
		if w > maxSide || h > maxSide {
			return bad("its bound %dx%d of the %dx%d image is more than %d a side", w, h, t.outW, t.outH, maxSide)
		}
	}
	t.geomW, t.geomH, t.room = t.outW, t.outH, room
	t.outW, t.outH, t.vary = w, h, !fixed
	return nil
}

// expands reports whether op is, or holds, a RandomRotation with
// expand=True.
func expands(op *Op) bool {
	if op.Kind == OpRandomRotation && op.Expand {
		return true
	}
	return slices.ContainsFunc(op.Ops, func(o Op) bool { return expands(&o) })
}

// geomSize is the size the geometry makes: outW x outH, or of a
// transform whose ops grow the image (growRotate), geomW x geomH.
func (t *Transform) geomSize() (w, h int) {
	if t.geomW > 0 {
		return t.geomW, t.geomH
	}
	return t.outW, t.outH
}
