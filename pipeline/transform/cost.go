package transform

import (
	"fmt"
	"math"
	"time"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
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
// with no entry of its own (one place per functional op: its fn.Def.Ns). The
// geometry is the decode of the source (at a nominal size: the source's is
// not known at open) and the resampling to each view's output.

// Calibration: nanoseconds of one core, measured by `stoker bench cost`
// (bench/cost.go) on the 2-core build machine (an Intel Xeon at 2.6 GHz
// with AVX-512, libjpeg-turbo; 2026-11-24, load ~10), which prints the
// table of each functional op's fn.Def.Ns (BENCHMARKS.md, "The cost
// model"). A pixel is one RGB pixel of the step's image.
//
//	go build -o bin/stoker ./cmd/stoker
//	bin/stoker bench cost --data /work/shared/data/photos --samples 300 --reps 200

const (
	// DecodeNs is the decode of one source pixel (entropy decoding,
	// IDCT, colour conversion), at the DCT scale a 224 px output of a
	// photo of ~0.13 MP takes.
	DecodeNs = 2.62
	// ResampleNs is one output pixel of the fused crop and resize
	// (bilinear, antialiased; interpNs scales it).
	ResampleNs = 0.543
	// NominalSourcePx is the source a decode is predicted for: about an
	// ImageNet photo (the datasets' photos average 0.13 MP), or the
	// output's size if larger (an upsampled source is the exception),
	// but for a detection geometry (RandomZoomOut, RandomIoUCrop,
	// ScaleJitter, FixedSizeCrop), which resizes the whole photo or a crop
	// of it drawn against its boxes, often up (COCO's 640 px photos to
	// 640x640 or 1024x1024): the nominal source then.
	NominalSourcePx = 160_000
	// The canvas path (resizeCanvas: a RandomZoomOut's canvas, or the
	// image's own before a RandomIoUCrop's flip or after the ops before
	// the geometry, resized by the SIMD resampler from the rows of the
	// crop its taps read): an output pixel costs CanvasOutNs plus
	// canvasTapNs for each time the canvas' side is the output's (the
	// antialiased taps of a downscale), a canvas pixel canvasNs (its rows
	// made and passed horizontally where the crop reads them). Fitted on
	// one thread from bench cost's detection rows (--annotations) on
	// mkdata --coco's photos (0.16 MP), canvasTapNs kept at the 0.4 of
	// CanvasOutNs that a zoom sweep gave the Go resize before: IoUCrop +
	// flip(p=1) + Resize(640) 0.34 to 0.42 ms over IoUCrop + Resize(640),
	// ZoomOut(p=1) + IoUCrop + Resize(640) 0.75 to 0.80 ms over it (in Go,
	// with the whole canvas filled: 5.5 and 8.3 ms).
	CanvasOutNs = 0.57
	CanvasTapNs = 0.22
	CanvasNs    = 0.35
	// JitterOutNs is one output pixel of a ScaleJitter and its
	// FixedSizeCrop (the resize to the jittered size, the crop of it, the
	// fill of the rest): 1.2 ns from bench cost's lsj and ScaleJitter(640)
	// rows, over twice resampleNs (the jittered size is mostly an upsample,
	// of a 4:3 photo into a square).
	JitterOutNs = 1.2
	// SampleNs is each sample's fixed cost: its read from a local file,
	// the header, the plan, the draws.
	SampleNs = 10_000
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
	srcPx := float64(NominalSourcePx)
	for _, v := range views {
		if !v.detGeometry() {
			srcPx = max(srcPx, float64(v.outW*v.outH))
		}
	}
	mean = SampleNs + float64(DecodeNs*srcPx)
	worst = mean
	dominant, domNs := "the decode", mean
	var buf []fn.Step
	for vi, v := range views {
		where := ""
		if len(views) > 1 {
			where = fmt.Sprintf("view %d (%s) > ", vi, t.ViewName(vi))
		}
		w, h := v.outW, v.outH
		px := float64(w * h)
		perPx := float64(ResampleNs)
		if v.jitter != nil || v.fixed != nil {
			perPx = JitterOutNs
		}
		geo := float64(perPx * px * v.geomInterpNs())
		if v.norm != nil {
			geo += float64(fn.Normalize.Def().Ns * px)
		}
		mean += geo
		worst += geo
		if geo > domNs {
			dominant, domNs = where+fmt.Sprintf("op 0 (%s): the resampling to %dx%d", v.ops[0].Kind, w, h), geo
		}
		if m, x := v.canvasNs(srcPx, px, !t.sharedPre || vi == 0, &buf); x > 0 {
			mean += m
			worst += x
			if x > domNs {
				dominant, domNs = where+"op 0: the canvas resized (RandomZoomOut's, or the image's before the geometry)", x
				if v.yolo != nil {
					dominant = where + "op 0: the YOLO geometry (load_image's resize, LetterBox, RandomPerspective's warp)"
				}
			}
		}
		if m, x := v.multiNs(srcPx, px); x > 0 {
			mean += m
			worst += x
			if x > domNs {
				dominant, domNs = where+"op 0 ("+string(v.mosaic.Kind)+"): its partners' decodes and its canvas", x
			}
		}
		if v.whole { // the ops run on the image whole (a rotation with expand=True first): at the nominal source
			s := int(math.Sqrt(srcPx))
			w, h = max(w, s), max(h, s)
		}
		// The mean: the steps of costDraws samples, as drawn.
		var sum float64
		for i := range costDraws {
			buf = v.drawStepsFor(det.Key{Seed: 0x5eed, Index: uint64(i), View: uint64(vi)}, buf[:0])
			for _, st := range buf {
				sum += optab.StepNs(st, w, h)
			}
		}
		mean += float64(sum / costDraws)
		first := 1 + len(v.ops) - len(v.post) // the position of post[0] in ops
		if v.norm != nil {
			first--
		}
		for i := range v.post {
			n := &v.post[i]
			x := n.MaxNs(w, h)
			worst += x
			if x > domNs {
				dominant, domNs = where+fmt.Sprintf("op %d (%s)", first+i-1, n.Op.Kind), x
			}
		}
	}
	c.Mean, c.Max = nsDuration(mean), nsDuration(worst)
	c.Dominant, c.DominantMax = dominant, nsDuration(domNs)
	return c
}

// detGeometry says whether t's geometry is a detection recipe's
// (RandomZoomOut, RandomIoUCrop, ScaleJitter, FixedSizeCrop): its decode is
// priced at the nominal source whatever the output's size.
func (t *Transform) detGeometry() bool {
	return t.zoom != nil || t.iou != nil || t.jitter != nil || t.fixed != nil || t.yolo != nil || t.mosaic != nil
}

// canvasNs is the canvas path's cost (resizeCanvas), mean and worst, for
// a source of srcPx pixels resized to px: taken by every sample with ops
// before the geometry, else by those whose RandomZoomOut or whose flip
// between a RandomIoUCrop and its Resize is drawn; the canvas r*r times
// the source when zoomed (r uniform in side_range), else the source. The
// ops before the geometry run on the source: their drawn steps' mean over
// costDraws samples, all of them at worst (pre false: not counted, a
// SharedPre view after the first, which runs them once for all). 0, 0
// without a canvas path.
func (t *Transform) canvasNs(srcPx, px float64, pre bool, buf *[]fn.Step) (mean, worst float64) {
	if t.yolo != nil {
		x := t.yolo.ns(srcPx, px)
		return x, x
	}
	flip := 0.0
	if t.iou != nil {
		flip = t.preFlip
	}
	if t.resize == nil || (t.zoom == nil && len(t.pre) == 0 && t.preCrop == nil && flip == 0) {
		return 0, 0
	}
	if c := t.preCrop; c != nil { // the canvas is the crop's size
		srcPx = float64(c.Size[0] * c.Size[1])
	}
	// A canvas r times the source a side, as an output pixel and a canvas
	// pixel cost it.
	side := math.Sqrt(srcPx / px) // the source's side over the output's
	at := func(r float64) float64 {
		down := max(1, float64(r*side))
		return float64(px*float64(CanvasOutNs+float64(CanvasTapNs*down))) + float64(CanvasNs*float64(srcPx*float64(r*r)))
	}
	pz, zoomed, hi := 0.0, at(1), 1.0
	if z := t.zoom; z != nil { // its canvas's rule (canvas)
		pz, zoomed, hi = canvases[z.Kind].cost(z, at)
	}
	pc := 1.0 // the chance of the canvas path
	if len(t.pre) == 0 && t.preCrop == nil {
		pc = 1 - float64((1-pz)*(1-flip))
	}
	mean = float64(pz*zoomed) + float64((pc-pz)*at(1))
	worst = max(at(hi), at(1))
	if len(t.pre) > 0 && pre {
		s := int(math.Sqrt(srcPx))
		var sum float64
		for i := range costDraws {
			*buf = t.drawPre(det.Key{Seed: 0x5eed, Index: uint64(i)}, (*buf)[:0])
			for _, st := range *buf {
				sum += optab.StepNs(st, s, s)
			}
		}
		mean += float64(sum / costDraws)
		for i := range t.pre {
			worst += t.pre[i].MaxNs(s, s)
		}
	}
	return mean, worst
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
	for _, op := range []*optab.Op{t.rrc, t.resize, t.center, t.jitter} {
		if op != nil && op.Kind != OpCenterCrop {
			return fn.InterpCost(optab.ResamplingOf(op).Interp)
		}
	}
	return 1
}

// DefaultMaxSampleCPU is the default of the server's --max-sample-cpu: the
// most a job's worst sample may be predicted to cost. The presets' worst
// samples are under 10 ms and torchvision's policies at their defaults
// under 15 ms at 224 px (TestCostPresetsUnderLimit), so a recipe near the
// limit is a hundred times theirs; a batch of 256 such samples is still
// under a minute of one core.
const DefaultMaxSampleCPU = 250 * time.Millisecond
