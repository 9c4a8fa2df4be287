package pipeline

import (
	"fmt"
	"math"
	"time"
)

// The cost model: what a sample of a Transform costs in CPU, predicted
// from its ops, their parameters and the output's size, before any image
// is read. The server refuses at open a job whose worst sample is
// predicted over its limit (--max-sample-cpu) and hints the executor's
// CPU schedule with the mean (Queue.SetCost).
//
// Every op after the geometry runs as Steps of the functional ops (Fn):
// a step's cost is its Fn's calibrated nanoseconds per pixel times the
// pixels it touches (times the taps, for a blur), so an op's cost is the
// cost of the steps it may draw, and a new op costs what its steps cost
// with no entry of its own (one place per kernel family: fnNs). The
// geometry is the decode of the source (at a nominal size: the source's is
// not known at open) and the resampling to each view's output.

// Calibration: nanoseconds of one core, measured by `stoker bench cost`
// (bench/cost.go) on the 2-core build machine (an Intel Xeon at 2.6 GHz
// with AVX-512, libjpeg-turbo; 2026-11-24, load ~10), which prints this
// table (BENCHMARKS.md, "The cost model"). A pixel is one RGB pixel of
// the step's image.
//
//	go build -o bin/stoker ./cmd/stoker
//	bin/stoker bench cost --data /work/shared/data/photos --samples 300 --reps 200
var fnNs = [numFns]float64{
	FnHorizontalFlip:   0.062,
	FnVerticalFlip:     0.069,
	FnAdjustBrightness: 0.099,
	FnAdjustContrast:   0.40,
	FnAdjustSaturation: 1.04,
	FnAdjustHue:        0.87,
	FnPermuteChannels:  0.062,
	FnAdjustSharpness:  2.71,
	FnRGBToGrayscale:   0.28,
	FnGaussianBlur:     0.061, // a pixel of one tap of one pass: (kx+ky) taps a pixel
	FnSolarize:         0.057,
	FnPosterize:        0.055,
	FnInvert:           0.054,
	FnEqualize:         1.07,
	FnAutocontrast:     0.15,
	FnRotate:           4.09, // bilinear; nearest and bicubic scale by interpNs
	FnAffine:           3.78,
	FnErase:            0.067, // a pixel of the erased box
	FnNormalize:        7.4,   // an output pixel as float32 (a decode with it over one without)
	FnSolarizeAdd:      0.070,
	FnMixBegin:         2.73,
	FnMixChain:         2.78,
	FnMixEnd:           2.73,
	FnMixBlend:         2.73,
	FnMixFold:          2.73,
	FnPerspective:      30, // bilinear, Go only (no C kernel): about 8x FnAffine (C), timed against it on 224 px
}

// interpNs scales a resampling step's fnNs by its interpolation (bench
// cost's "FnRotate nearest" and "FnAffine bicubic" over the bilinear
// ones).
var interpNs = [...]float64{InterpBilinear: 1, InterpNearest: 0.41, InterpBicubic: 2.0}

const (
	// decodeNs is the decode of one source pixel (entropy decoding,
	// IDCT, colour conversion), at the DCT scale a 224 px output of a
	// photo of ~0.13 MP takes.
	decodeNs = 2.62
	// resampleNs is one output pixel of the fused crop and resize
	// (bilinear, antialiased; interpNs scales it).
	resampleNs = 0.543
	// nominalSourcePx is the source a decode is predicted for: about an
	// ImageNet photo (the datasets' photos average 0.13 MP), or the
	// output's size if larger (an upsampled source is the exception).
	nominalSourcePx = 160_000
	// zoomCanvasNs is one canvas pixel of a RandomZoomOut before a
	// Resize: the canvas filled and resized in Go (resizeCanvas;
	// BenchmarkZoomOutResize: about 6 ms more for a canvas of ~0.6 MP, a
	// fill row's pass made once).
	zoomCanvasNs = 12
	// sampleNs is each sample's fixed cost: its read from a local file,
	// the header, the plan, the draws.
	sampleNs = 10_000
)

// costDraws is how many samples' draws the mean is taken over.
const costDraws = 64

// Cost is a Transform's predicted CPU per sample.
type Cost struct {
	// Mean is the expected CPU of a sample (its ops at their
	// probabilities, its policies' draws as they come).
	Mean time.Duration
	// Max is the most one sample may cost: every op that may apply
	// applied, every policy at its longest and most expensive draw.
	Max time.Duration
	// Dominant names the op whose worst case is the largest part of Max
	// (its position and kind, as the transform's errors name ops), and
	// DominantMax is that part.
	Dominant    string
	DominantMax time.Duration
}

// String is the cost as a job's refusal and `stoker status` say it.
func (c Cost) String() string {
	return fmt.Sprintf("%v a sample (%v at worst, most of it %s)", roundCost(c.Mean), roundCost(c.Max), c.Dominant)
}

// roundCost rounds d to 3 significant digits for messages.
func roundCost(d time.Duration) time.Duration {
	for _, r := range []time.Duration{time.Hour, time.Minute, time.Second, time.Millisecond, time.Microsecond} {
		if d >= 100*r {
			return d.Round(r)
		}
		if d >= r {
			return d.Round(r / 100)
		}
	}
	return d
}

// Cost predicts t's CPU per sample (see the cost model above). It is
// computed from the compiled ops each call: cache it where it is asked
// often.
func (t *Transform) Cost() Cost {
	views := t.views
	if views == nil {
		views = []*Transform{t}
	}
	var c Cost
	var mean, worst float64
	srcPx := float64(nominalSourcePx)
	for _, v := range views {
		srcPx = max(srcPx, float64(v.outW*v.outH))
	}
	mean = sampleNs + float64(decodeNs*srcPx)
	worst = mean
	dominant, domNs := "the decode", mean
	var buf []Step
	for vi, v := range views {
		where := ""
		if len(views) > 1 {
			where = fmt.Sprintf("view %d (%s) > ", vi, t.ViewName(vi))
		}
		w, h := v.outW, v.outH
		px := float64(w * h)
		geo := float64(resampleNs * px * v.geomInterpNs())
		if v.norm != nil {
			geo += float64(fnNs[FnNormalize] * px)
		}
		mean += geo
		worst += geo
		if geo > domNs {
			dominant, domNs = where+fmt.Sprintf("op 0 (%s): the resampling to %dx%d", v.ops[0].Kind, w, h), geo
		}
		if z := v.zoom; z != nil && v.resize != nil {
			// The canvas, r*r times the source, r uniform in side_range.
			lo, hi := z.SideRange[0], z.SideRange[1]
			canvas := float64(zoomCanvasNs * srcPx)
			mean += float64(z.P*canvas) * float64(float64(lo*lo)+float64(lo*hi)+float64(hi*hi)) / 3
			x := float64(canvas * float64(hi*hi))
			worst += x
			if x > domNs {
				dominant, domNs = where+fmt.Sprintf("op 0 (RandomZoomOut): its canvas, up to %gx%g the image, resized", hi, hi), x
			}
		}
		if len(v.pre) > 0 {
			// Ops before the geometry, on the image, and its canvas resized.
			side := int(math.Sqrt(srcPx))
			x := float64(zoomCanvasNs * srcPx)
			for i := range v.pre {
				x += v.pre[i].maxNs(side, side)
			}
			mean += x
			worst += x
		} else if v.iou != nil && v.preFlip > 0 {
			// A flip before the resize: the image's canvas, resized.
			x := float64(zoomCanvasNs * srcPx)
			mean += float64(v.preFlip * x)
			worst += x
		}
		// The mean: the steps of costDraws samples, as drawn.
		var sum float64
		for i := range costDraws {
			buf = v.drawSteps(Key{Seed: 0x5eed, Index: uint64(i), View: uint64(vi)}, buf[:0])
			for _, st := range buf {
				sum += stepNs(st, w, h)
			}
		}
		mean += float64(sum / costDraws)
		first := 1 + len(v.ops) - len(v.post) // the position of post[0] in ops
		if v.norm != nil {
			first--
		}
		for i := range v.post {
			n := &v.post[i]
			x := n.maxNs(w, h)
			worst += x
			if x > domNs {
				dominant, domNs = where+fmt.Sprintf("op %d (%s)", first+i-1, n.op.Kind), x
			}
		}
	}
	c.Mean, c.Max = nsDuration(mean), nsDuration(worst)
	c.Dominant, c.DominantMax = dominant, nsDuration(domNs)
	return c
}

// nsDuration is x ns as a Duration, saturated.
func nsDuration(x float64) time.Duration {
	if !(x < math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(x)
}

// geomInterpNs is the geometry's interpolation factor.
func (t *Transform) geomInterpNs() float64 {
	for _, op := range []*Op{t.rrc, t.resize, t.center} {
		if op != nil && op.Kind != OpCenterCrop {
			return interpCost(op.Interp)
		}
	}
	return 1
}

// interpCost is interpNs[i], 1 for an unknown one.
func interpCost(i Interpolation) float64 {
	if int(i) < len(interpNs) && interpNs[i] > 0 {
		return interpNs[i]
	}
	return 1
}

// stepNs is what st costs on a w x h image.
func stepNs(st Step, w, h int) float64 {
	if st.Fn >= numFns {
		return 0
	}
	px := float64(w) * float64(h)
	ns := fnNs[st.Fn]
	switch st.Fn {
	case FnGaussianBlur:
		return ns * px * float64(st.I[0]+st.I[1])
	case FnRotate, FnAffine, FnPerspective:
		return ns * px * interpCost(st.Interp)
	case FnErase:
		return ns * float64(st.I[2]) * float64(st.I[3])
	}
	return ns * px
}

// maxNs is the most the node's steps may cost on a w x h image: every op
// that may apply applied, the most expensive choice of a RandomChoice,
// a policy's longest draw of its most expensive op.
func (n *node) maxNs(w, h int) float64 {
	op := n.op
	switch op.Kind {
	case OpColorJitter:
		fns := [4]Fn{FnAdjustBrightness, FnAdjustContrast, FnAdjustSaturation, FnAdjustHue}
		var s float64
		for i, on := range n.jitOn {
			if on {
				s += stepNs(Step{Fn: fns[i]}, w, h)
			}
		}
		return s
	case OpRandomPhotometricDistort: // contrast once, before or after
		var s float64
		for _, f := range []Fn{FnAdjustBrightness, FnAdjustContrast, FnAdjustSaturation, FnAdjustHue, FnPermuteChannels} {
			s += stepNs(Step{Fn: f}, w, h)
		}
		return s
	case OpGaussianBlur:
		return stepNs(Step{Fn: FnGaussianBlur, I: [6]int{op.KernelSize[0], op.KernelSize[1]}}, w, h)
	case OpRandomRotation:
		return stepNs(Step{Fn: FnRotate, Interp: op.Interp}, w, h)
	case OpRandomAffine:
		return stepNs(Step{Fn: FnAffine, Interp: op.Interp}, w, h)
	case OpRandomPerspective:
		return stepNs(Step{Fn: FnPerspective, Interp: op.Interp}, w, h)
	case OpRandomErasing:
		return stepNs(Step{Fn: FnErase, I: [6]int{0, 0, h, w}}, w, h)
	case OpRandomApply, OpRandomOrder, OpRandomChoice:
		var s float64
		for i := range n.kids {
			x := n.kids[i].maxNs(w, h)
			if op.Kind == OpRandomChoice {
				s = max(s, x)
			} else {
				s += x
			}
		}
		return s
	}
	if n.pol != nil {
		return n.pol.maxNs(w, h)
	}
	return stepNs(n.step, w, h)
}

// maxNs is the policy's longest draw (maxSteps) at its most expensive op
// (AugMix's blends counted as such steps).
func (p *policy) maxNs(w, h int) float64 {
	interp := p.interp
	if (p.kind == OpTimmRandAugment || p.kind == OpTimmAutoAugment || p.kind == OpTimmAugMix) && p.timmRandomInterp() {
		interp = InterpBicubic
	}
	var most float64
	for _, e := range p.space {
		st := Step{Fn: augFn(e.op), Interp: interp}
		if e.op == augBlurRand {
			st.I = [6]int{13, 13} // 2*ceil(3 * 2)+1 at timm's largest radius
		}
		most = max(most, stepNs(st, w, h))
	}
	if p.kind == OpAugMix || p.kind == OpTimmAugMix {
		most = max(most, stepNs(Step{Fn: FnMixChain}, w, h))
	}
	return float64(p.maxSteps) * most
}

// augFn is the functional op a policy's op runs as.
func augFn(op augOp) Fn {
	return [...]Fn{
		augIdentity: FnNone, augShearX: FnAffine, augShearY: FnAffine, augTranslateX: FnAffine, augTranslateY: FnAffine,
		augRotate: FnRotate, augBrightness: FnAdjustBrightness, augColor: FnAdjustSaturation, augContrast: FnAdjustContrast,
		augSharpness: FnAdjustSharpness, augPosterize: FnPosterize, augSolarize: FnSolarize, augAutoContrast: FnAutocontrast,
		augEqualize: FnEqualize, augInvert: FnInvert, augSolarizeAdd: FnSolarizeAdd, augDesaturate: FnAdjustSaturation,
		augBlurRand: FnGaussianBlur,
	}[op]
}

// DefaultMaxSampleCPU is the default of the server's --max-sample-cpu: the
// most a job's worst sample may be predicted to cost. The presets' worst
// samples are under 10 ms and torchvision's policies at their defaults
// under 15 ms at 224 px (TestCostPresetsUnderLimit), so a recipe near the
// limit is a hundred times theirs; a batch of 256 such samples is still
// under a minute of one core.
const DefaultMaxSampleCPU = 250 * time.Millisecond
