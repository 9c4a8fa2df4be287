package pipeline

// Floating point in this file: a sample's steps must be the same bits on
// every machine, so every product that is added is wrapped in float64(...)
// (no fused multiply-add), and exp and log are det.Exp and det.Log.

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline/internal/det"
)

// drawer collects the steps a sample's ops draw, for an output of w x h.
type drawer struct {
	k     Key
	w, h  int
	steps []Step
}

func (d *drawer) emit(st Step) { d.steps = append(d.steps, st) }

// drawSteps appends to buf the steps t's ops after the geometry draw for
// key k, in the order they run, and returns it.
func (t *Transform) drawSteps(k Key, buf []Step) []Step {
	return t.drawStepsAt(k, t.outW, t.outH, buf)
}

// drawStepsAt is drawSteps for a sample of w x h (its own size, of a
// transform of per-sample sizes).
func (t *Transform) drawStepsAt(k Key, w, h int, buf []Step) []Step {
	d := drawer{k: k, w: w, h: h, steps: buf}
	for i := range t.post {
		t.post[i].draw(&d)
	}
	return d.steps
}

// draw appends the node's steps for the sample, drawing from its stream,
// with torchvision.transforms.v2's sampling.
func (n *node) draw(d *drawer) {
	op := n.op
	r := d.k.Stream(n.stream)
	switch op.Kind {
	case OpRandomHorizontalFlip, OpRandomVerticalFlip, OpRandomGrayscale, OpRandomSolarize, OpRandomPosterize,
		OpRandomInvert, OpRandomEqualize, OpRandomAutocontrast, OpRandomAdjustSharpness:
		// torchvision's _RandomApplyTransform: torch.rand(1) >= p skips.
		if r.Float64() < op.P {
			d.emit(n.step)
		}
	case OpGrayscale, OpSanitizeBoundingBoxes, OpConvertBoundingBoxFormat, OpClampKeyPoints, OpSanitizeKeyPoints:
		d.emit(n.step)
	case OpClampBoundingBoxes:
		if !op.ClampNone { // None: torchvision's returns the boxes as they are
			d.emit(n.step)
		}
	case OpColorJitter:
		n.drawJitter(&r, d)
	case OpRandomPhotometricDistort:
		n.drawPhotometric(&r, d)
	case OpGaussianBlur:
		s := r.Uniform(op.Sigma[0], op.Sigma[1])
		d.emit(Step{Fn: FnGaussianBlur, I: [6]int{op.KernelSize[0], op.KernelSize[1]}, F: [6]float64{s, s}})
	case OpRandomRotation:
		d.emit(Step{Fn: FnRotate, F: [6]float64{r.Uniform(op.Degrees[0], op.Degrees[1])}, Interp: op.Interp,
			Fill: op.Fill, FillNone: op.FillNone, Center: op.Center, HasCenter: op.HasCenter})
	case OpRandomAffine:
		n.drawAffine(&r, d)
	case OpRandomPerspective:
		if r.Float64() < op.P { // _RandomApplyTransform's torch.rand(1) >= p skips
			d.emit(drawPerspective(&r, d.w, d.h, op))
		}
	case OpRandomErasing:
		n.drawErasing(&r, d)
	case OpRandomApply:
		if r.Float64() < op.P {
			for i := range n.kids {
				n.kids[i].draw(d)
			}
		}
	case OpRandomChoice:
		u := r.Float64()
		i := 0
		for i < len(n.cum)-1 && u >= n.cum[i] {
			i++
		}
		n.kids[i].draw(d)
	case OpRandomOrder:
		var perm [maxOps]int
		p := perm[:len(n.kids)]
		r.Perm(p)
		for _, i := range p {
			n.kids[i].draw(d)
		}
	default:
		if n.pol != nil {
			n.pol.draw(&r, d)
		}
	}
}

// drawJitter is ColorJitter's make_params and transform: a random order of
// the four adjustments, each factor uniform in its range, None skipped.
func (n *node) drawJitter(r *RNG, d *drawer) {
	var order [4]int
	r.Perm(order[:])
	var f [4]float64
	for i := range 4 {
		if n.jitOn[i] {
			f[i] = r.Uniform(n.jit[i][0], n.jit[i][1])
		}
	}
	fns := [4]Fn{FnAdjustBrightness, FnAdjustContrast, FnAdjustSaturation, FnAdjustHue}
	for _, i := range order {
		if n.jitOn[i] {
			d.emit(Step{Fn: fns[i], F: [6]float64{f[i]}})
		}
	}
}

// drawPhotometric is RandomPhotometricDistort's make_params and transform:
// each factor drawn at p in its range (brightness, contrast, saturation,
// hue, in that order), contrast before or after the middle two at even
// odds, a channel permutation at p; applied brightness, contrast if
// before, saturation, hue, contrast if after, the permutation.
func (n *node) drawPhotometric(r *RNG, d *drawer) {
	var f [4]float64
	var on [4]bool
	for i := range 4 {
		if r.Float64() < n.op.P {
			on[i], f[i] = true, r.Uniform(n.jit[i][0], n.jit[i][1])
		}
	}
	before := r.Float64() < 0.5
	var perm [3]int
	permute := r.Float64() < n.op.P
	if permute {
		r.Perm(perm[:])
	}
	emit := func(i int, fn Fn) {
		if on[i] {
			d.emit(Step{Fn: fn, F: [6]float64{f[i]}})
		}
	}
	emit(0, FnAdjustBrightness)
	if before {
		emit(1, FnAdjustContrast)
	}
	emit(2, FnAdjustSaturation)
	emit(3, FnAdjustHue)
	if !before {
		emit(1, FnAdjustContrast)
	}
	if permute {
		d.emit(Step{Fn: FnPermuteChannels, I: [6]int{perm[0], perm[1], perm[2]}})
	}
}

// drawAffine is RandomAffine's make_params.
func (n *node) drawAffine(r *RNG, d *drawer) {
	op := n.op
	st := Step{Fn: FnAffine, Interp: op.Interp, Fill: op.Fill, FillNone: op.FillNone, Center: op.Center, HasCenter: op.HasCenter}
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

// drawErasing is RandomErasing's forward and make_params: with
// probability p, ten tries at a box of random area and log-uniform aspect
// that fits; none fitting erases nothing, as torchvision's fallback (v
// None) does. With a count (timm's RandomErasing), that many boxes (or a
// uniform number of MinCount..MaxCount), each its own ten tries at an area
// divided by the count; with RandomColor each box one colour, drawn as
// the pixel a standard normal value per channel is after the Normalize.
func (n *node) drawErasing(r *RNG, d *drawer) {
	op := n.op
	if !(r.Float64() < op.P) {
		return
	}
	count := max(op.MinCount, 1)
	if op.MaxCount > count {
		count += r.Intn(op.MaxCount - count + 1)
	}
	area := float64(d.w * d.h)
	for range count {
		n.eraseBox(r, d, area, count)
	}
}

// eraseBox is one box of drawErasing: ten tries at one that fits.
func (n *node) eraseBox(r *RNG, d *drawer, area float64, count int) {
	op := n.op
	for range 10 {
		ea := float64(area * r.Uniform(op.Scale[0], op.Scale[1]))
		if count > 1 {
			ea /= float64(count) // timm's uniform(min_area, max_area) * area / count
		}
		aspect := det.Exp(r.Uniform(n.logRatio[0], n.logRatio[1]))
		h := int(math.RoundToEven(math.Sqrt(float64(ea * aspect))))
		w := int(math.RoundToEven(math.Sqrt(ea / aspect)))
		if !(h < d.h && w < d.w) {
			continue
		}
		st := Step{Fn: FnErase, I: [6]int{0, 0, h, w}, Fill: op.Value}
		if op.RandomValue && !op.RandomColor {
			st.Random, st.Seed = true, r.Uint64()
			st.F = [6]float64{op.Mean[0], op.Mean[1], op.Mean[2], op.Std[0], op.Std[1], op.Std[2]}
		}
		st.I[0] = r.Intn(d.h - h + 1)
		st.I[1] = r.Intn(d.w - w + 1)
		if op.RandomColor {
			for c := range 3 {
				st.Fill[c] = normalPixel(r.Normal(), op.Mean[c], op.Std[c])
			}
		}
		d.emit(st)
		return
	}
}

// normalPixel is the uint8 pixel a Normalize of mean and std (in [0, 1]
// units) turns into about z: round(255 * (mean + std * z)), clamped to
// 0..255, as eraseRandom's tables draw it.
func normalPixel(z, mean, std float64) float64 {
	v := math.Floor(float64(255*float64(mean+float64(std*z))) + 0.5)
	return math.Max(0, math.Min(255, v))
}

// OpRandomPerspective is torchvision's RandomPerspective: with
// probability P, the image's corners moved each within Distortion of half
// its side inward (drawPerspective), the image resampled so (Interp,
// Fill); the targets move with it.
const OpRandomPerspective OpKind = "RandomPerspective"

// drawPerspective is RandomPerspective.make_params on a w x h image: each
// corner's x and y drawn as torch.randint over its band, bound =
// int(distortion_scale * (side // 2)) + 1 pixels from its edge, in its
// order (top left, top right, bottom right, bottom left; x then y).
func drawPerspective(r *RNG, w, h int, op *Op) Step {
	bw := int(float64(op.Distortion*float64(w/2))) + 1
	bh := int(float64(op.Distortion*float64(h/2))) + 1
	randint := func(lo, hi int) int { return lo + r.Intn(hi-lo) }
	st := Step{Fn: FnPerspective, Interp: op.Interp, Fill: op.Fill, FillNone: op.FillNone}
	st.I[0] = packPoint(randint(0, bw), randint(0, bh))
	st.I[1] = packPoint(randint(w-bw, w), randint(0, bh))
	st.I[2] = packPoint(randint(w-bw, w), randint(h-bh, h))
	st.I[3] = packPoint(randint(0, bw), randint(h-bh, h))
	st.I[4], st.I[5] = w-1, h-1
	return st
}
