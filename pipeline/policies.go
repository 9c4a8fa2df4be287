package pipeline

// The augmentation policies: torchvision.transforms.v2's TrivialAugmentWide,
// RandAugment, AutoAugment and AugMix (their augmentation spaces, magnitude
// bins, signs, fills and default interpolations), and timm's RandAugment
// ("rand-m9-mstd0.5-inc1" and the like) as a policy of its own name, never
// mixed up with torchvision's. Each draws functional steps for the kernels,
// so a policy costs no more than the ops it picks.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/internal/det"
)

// augOp is one operation of a policy's augmentation space.
type augOp uint8

const (
	augIdentity augOp = iota
	augShearX
	augShearY
	augTranslateX
	augTranslateY
	augRotate
	augBrightness
	augColor
	augContrast
	augSharpness
	augPosterize
	augSolarize
	augAutoContrast
	augEqualize
	augInvert
	augSolarizeAdd // timm's
	augDesaturate  // timm's AutoAugment 3a: ImageEnhance.Color(1 - level)
	augBlurRand    // timm's AutoAugment 3a: PIL's GaussianBlur of a random radius
)

// augEntry is one operation of a space with its magnitudes (nil: the
// operation takes none) and whether a magnitude's sign is drawn.
type augEntry struct {
	op     augOp
	mags   []float64
	signed bool
}

// policy is a compiled policy.
type policy struct {
	kind     OpKind
	space    []augEntry
	interp   Interpolation
	fill     [3]float64
	fillNone bool
	maxSteps int
	// RandAugment, TrivialAugmentWide.
	numOps, magnitude, bins int
	// AutoAugment: sub-policies of (op, probability, magnitude bin; -1
	// none).
	subs [][2]aaOp
	// AugMix.
	severity, width, depth int
	alpha                  float64
	// timm's RandAugment.
	timm timmConfig
}

// aaOp is one operation of an AutoAugment sub-policy.
type aaOp struct {
	op  augOp
	p   float64
	bin int
}

// linspace32 is torch.linspace(start, end, n) in float32 as torch computes
// it on x86-64 CPUs with AVX2 (its vectorized kernels, compiled with
// fused multiply-adds): from both ends towards the middle, each value
// start + step*i (or end - step*(n-1-i)) rounded once, not the product
// and then the sum; widened to float64. The products and sums are exact
// in float64 here (a float32 times an index under 2^16, added to a
// float32 within a few binades of it), so rounding the float64 result to
// float32 rounds once. docs/transforms.md says where torch rounds twice
// (its default kernels, without AVX2) and which bins that moves.
func linspace32(start, end float32, n int) []float64 {
	out := make([]float64, n)
	if n == 1 {
		out[0] = float64(start)
		return out
	}
	step := (end - start) / float32(n-1)
	for i := range n {
		if i < n/2 {
			out[i] = float64(float32(math.FMA(float64(step), float64(i), float64(start))))
		} else {
			out[i] = float64(float32(math.FMA(-float64(step), float64(n-1-i), float64(end))))
		}
	}
	return out
}

// posterizeBits is torchvision's posterize magnitudes:
// (top - arange(n) / ((n - 1) / span)).round().int(), in float32.
func posterizeBits(top, span float32, n int) []float64 {
	out := make([]float64, n)
	for i := range n {
		div := float32(n-1) / span
		v := top - float32(i)/div
		if n == 1 {
			v = top
		}
		out[i] = math.RoundToEven(float64(v))
	}
	return out
}

// tvSpace is torchvision's augmentation space of a policy for n bins on an
// image of w x h.
func tvSpace(kind OpKind, n, w, h int) []augEntry {
	lin := func(hi float32) []float64 { return linspace32(0, hi, n) }
	switch kind {
	case OpTrivialAugmentWide:
		return []augEntry{
			{augIdentity, nil, false},
			{augShearX, lin(0.99), true}, {augShearY, lin(0.99), true},
			{augTranslateX, lin(32), true}, {augTranslateY, lin(32), true},
			{augRotate, lin(135), true},
			{augBrightness, lin(0.99), true}, {augColor, lin(0.99), true},
			{augContrast, lin(0.99), true}, {augSharpness, lin(0.99), true},
			{augPosterize, posterizeBits(8, 6, n), false},
			{augSolarize, linspace32(1, 0, n), false},
			{augAutoContrast, nil, false}, {augEqualize, nil, false},
		}
	case OpAugMix:
		return []augEntry{
			{augShearX, lin(0.3), true}, {augShearY, lin(0.3), true},
			{augTranslateX, lin(float32(w) / 3), true}, {augTranslateY, lin(float32(h) / 3), true},
			{augRotate, lin(30), true},
			{augPosterize, posterizeBits(4, 4, n), false},
			{augSolarize, linspace32(1, 0, n), false},
			{augAutoContrast, nil, false}, {augEqualize, nil, false},
			{augBrightness, lin(0.9), true}, {augColor, lin(0.9), true},
			{augContrast, lin(0.9), true}, {augSharpness, lin(0.9), true},
		}
	}
	// RandAugment (with Identity first) and AutoAugment (with Invert).
	s := []augEntry{
		{augShearX, lin(0.3), true}, {augShearY, lin(0.3), true},
		{augTranslateX, lin(float32(float32(150.0/331.0) * float32(w))), true},
		{augTranslateY, lin(float32(float32(150.0/331.0) * float32(h))), true},
		{augRotate, lin(30), true},
		{augBrightness, lin(0.9), true}, {augColor, lin(0.9), true},
		{augContrast, lin(0.9), true}, {augSharpness, lin(0.9), true},
		{augPosterize, posterizeBits(8, 4, n), false},
		{augSolarize, linspace32(1, 0, n), false},
		{augAutoContrast, nil, false}, {augEqualize, nil, false},
	}
	if kind == OpRandAugment {
		return append([]augEntry{{augIdentity, nil, false}}, s...)
	}
	return append(s, augEntry{augInvert, nil, false})
}

// newPolicy compiles a policy op for an output of w x h.
func newPolicy(op *Op, w, h int) (*policy, error) {
	p := &policy{kind: op.Kind, interp: op.Interp, fill: op.Fill, fillNone: op.FillNone}
	for _, v := range op.Fill {
		if !(v >= 0 && v <= 255) {
			return nil, fmt.Errorf("fill %v: want values in 0..255", op.Fill)
		}
	}
	// torchvision's policies take nearest, bilinear and bicubic on PIL
	// images (ClassificationPresetTrain's --interpolation bicubic); its
	// tensor kernels refuse bicubic. A bicubic rotate or shear here is the
	// warp kernel timm's RandAugment uses (kernels_bicubic.go: torch's
	// grid_sample cubic), not PIL's fixed-point bicubic (docs/transforms.md).
	if !op.Interp.valid() {
		return nil, fmt.Errorf("interpolation %s: want nearest, bilinear or bicubic", op.Interp)
	}
	switch op.Kind {
	case OpTrivialAugmentWide:
		if op.Bins < 2 || op.Bins > 1000 {
			return nil, fmt.Errorf("num_magnitude_bins %d: want 2..1000", op.Bins)
		}
		p.bins, p.space, p.maxSteps = op.Bins, tvSpace(op.Kind, op.Bins, w, h), 1
	case OpRandAugment:
		if op.NumOps < 0 || op.NumOps > maxPolicyOp {
			return nil, fmt.Errorf("num_ops %d: want 0..%d", op.NumOps, maxPolicyOp)
		}
		if op.Bins < 2 || op.Bins > 1000 {
			return nil, fmt.Errorf("num_magnitude_bins %d: want 2..1000", op.Bins)
		}
		if op.Magnitude < 0 || op.Magnitude >= op.Bins {
			return nil, fmt.Errorf("magnitude %d: want 0..num_magnitude_bins-1 (%d)", op.Magnitude, op.Bins-1)
		}
		p.numOps, p.magnitude, p.bins = op.NumOps, op.Magnitude, op.Bins
		p.space, p.maxSteps = tvSpace(op.Kind, op.Bins, w, h), op.NumOps
	case OpAutoAugment:
		subs, ok := autoAugmentPolicies[op.Policy]
		if !ok {
			return nil, fmt.Errorf("policy %q: want imagenet, cifar10 or svhn", op.Policy)
		}
		p.subs, p.space, p.maxSteps = subs, tvSpace(op.Kind, 10, w, h), 2
	case OpAugMix:
		if op.Severity < 1 || op.Severity > 10 {
			return nil, fmt.Errorf("severity %d: want 1..10", op.Severity)
		}
		if op.MixtureWidth < 1 || op.MixtureWidth > maxPolicyOp {
			return nil, fmt.Errorf("mixture_width %d: want 1..%d", op.MixtureWidth, maxPolicyOp)
		}
		if op.ChainDepth > maxPolicyOp || op.ChainDepth == 0 {
			return nil, fmt.Errorf("chain_depth %d: want -1 (random 1..3) or 1..%d", op.ChainDepth, maxPolicyOp)
		}
		if !(op.Alpha > 0 && op.Alpha <= 1e3) {
			return nil, fmt.Errorf("alpha %v: want > 0", op.Alpha)
		}
		p.severity, p.width, p.depth, p.alpha = op.Severity, op.MixtureWidth, op.ChainDepth, op.Alpha
		p.space = tvSpace(op.Kind, 10, w, h)
		if op.PartialOps {
			p.space = p.space[:9]
		}
		depth := op.ChainDepth
		if depth < 0 {
			depth = 3
		}
		p.maxSteps = 2 + op.MixtureWidth*(1+depth)
	case OpTimmRandAugment:
		cfg, err := parseTimmConfig(op.Policy)
		if err != nil {
			return nil, err
		}
		if op.Interp == InterpNearest && !op.RandomInterp {
			return nil, fmt.Errorf("interpolation nearest: timm's RandAugment resamples with bilinear, bicubic or a random choice of the two")
		}
		cfg.random = op.RandomInterp
		p.timm, p.space, p.maxSteps = cfg, timmSpace(cfg), cfg.n
	case OpTimmAugMix:
		cfg, err := parseTimmAugMixConfig(op.Policy)
		if err != nil {
			return nil, err
		}
		if op.Interp == InterpNearest && !op.RandomInterp {
			return nil, fmt.Errorf("interpolation nearest: timm's AugMix resamples with bilinear, bicubic or a random choice of the two")
		}
		cfg.random = op.RandomInterp
		p.timm, p.space = cfg, make([]augEntry, len(timmAugMixOps))
		for i, o := range timmAugMixOps {
			p.space[i] = augEntry{op: o}
		}
		depth := cfg.depth
		if depth <= 0 {
			depth = 3
		}
		p.maxSteps = 3 + cfg.width*(2+depth) // blended: a fold per chain
	case OpTimmAutoAugment:
		cfg, err := parseTimmAAConfig(op.Policy)
		if err != nil {
			return nil, err
		}
		if op.Interp == InterpNearest && !op.RandomInterp {
			return nil, fmt.Errorf("interpolation nearest: timm's AutoAugment resamples with bilinear, bicubic or a random choice of the two")
		}
		cfg.random = op.RandomInterp
		p.timm, p.space = cfg, nil
		for _, sub := range cfg.aa {
			p.maxSteps = max(p.maxSteps, len(sub))
			for _, a := range sub {
				if !slices.ContainsFunc(p.space, func(e augEntry) bool { return e.op == a.op }) {
					p.space = append(p.space, augEntry{op: a.op})
				}
			}
		}
	default:
		return nil, fmt.Errorf("not a policy: %s", op.Kind)
	}
	return p, nil
}

// draw appends the policy's steps for one sample.
func (p *policy) draw(r *RNG, d *drawer) {
	switch p.kind {
	case OpTrivialAugmentWide:
		e := &p.space[r.Intn(len(p.space))]
		p.emit(d, e, p.magOf(r, e, r.Intn(p.bins)))
	case OpRandAugment:
		for range p.numOps {
			e := &p.space[r.Intn(len(p.space))]
			p.emit(d, e, p.magOf(r, e, p.magnitude))
		}
	case OpAutoAugment:
		sub := p.subs[r.Intn(len(p.subs))]
		for _, a := range sub {
			if !(r.Float64() <= a.p) {
				continue
			}
			e := p.entry(a.op)
			p.emit(d, e, p.magOf(r, e, a.bin))
		}
	case OpAugMix:
		p.drawAugMix(r, d)
	case OpTimmRandAugment:
		p.drawTimm(r, d)
	case OpTimmAugMix:
		p.drawTimmAugMix(r, d)
	case OpTimmAutoAugment:
		// timm's AutoAugment.__call__: random.choice of a sub-policy, each
		// op applied with its probability (AugmentOp: random() > prob skips).
		for _, a := range p.timm.aa[r.Intn(len(p.timm.aa))] {
			if a.p < 1 && r.Float64() > a.p {
				continue
			}
			p.timmStep(r, d, a.op, a.variant, a.m)
		}
	}
}

// entry is the space's entry for op.
func (p *policy) entry(op augOp) *augEntry {
	for i := range p.space {
		if p.space[i].op == op {
			return &p.space[i]
		}
	}
	panic("pipeline: policy op not in its space")
}

// magOf is the magnitude of bin in e's magnitudes, negated with
// probability 1/2 (torch.rand(()) <= 0.5) when e is signed; 0 when e takes
// none.
func (p *policy) magOf(r *RNG, e *augEntry, bin int) float64 {
	if e.mags == nil {
		return 0
	}
	m := e.mags[bin]
	if e.signed && r.Float64() <= 0.5 {
		m = -m
	}
	return m
}

// emit appends the step of torchvision's _apply_image_or_video_transform
// for e at magnitude m.
func (p *policy) emit(d *drawer, e *augEntry, m float64) {
	geo := Step{Fn: FnAffine, Interp: p.interp, Fill: p.fill, FillNone: p.fillNone, F: [6]float64{0, 0, 0, 1, 0, 0}}
	switch e.op {
	case augIdentity:
	case augShearX:
		geo.F[4] = det.Atan(m) * 180 / math.Pi
		geo.HasCenter = true
		d.emit(geo)
	case augShearY:
		geo.F[5] = det.Atan(m) * 180 / math.Pi
		geo.HasCenter = true
		d.emit(geo)
	case augTranslateX:
		geo.F[1] = math.Trunc(m)
		d.emit(geo)
	case augTranslateY:
		geo.F[2] = math.Trunc(m)
		d.emit(geo)
	case augRotate:
		d.emit(Step{Fn: FnRotate, F: [6]float64{m}, Interp: p.interp, Fill: p.fill, FillNone: p.fillNone})
	case augBrightness:
		d.emit(Step{Fn: FnAdjustBrightness, F: [6]float64{1 + m}})
	case augColor:
		d.emit(Step{Fn: FnAdjustSaturation, F: [6]float64{1 + m}})
	case augContrast:
		d.emit(Step{Fn: FnAdjustContrast, F: [6]float64{1 + m}})
	case augSharpness:
		d.emit(Step{Fn: FnAdjustSharpness, F: [6]float64{1 + m}})
	case augPosterize:
		d.emit(Step{Fn: FnPosterize, I: [6]int{int(m)}})
	case augSolarize:
		d.emit(Step{Fn: FnSolarize, F: [6]float64{float64(255 * m)}})
	case augAutoContrast:
		d.emit(Step{Fn: FnAutocontrast})
	case augEqualize:
		d.emit(Step{Fn: FnEqualize})
	case augInvert:
		d.emit(Step{Fn: FnInvert})
	}
}

// drawAugMix is torchvision's AugMix.forward for one image: a Beta (as a
// two-weight Dirichlet) between the image and the mix of mixture_width
// chains, each of chain_depth (or 1..3) ops at a severity bin below
// severity.
func (p *policy) drawAugMix(r *RNG, d *drawer) {
	var m [2]float64
	r.Dirichlet(p.alpha, m[:])
	var wbuf [maxPolicyOp]float64
	ws := wbuf[:p.width]
	r.Dirichlet(p.alpha, ws)
	d.emit(Step{Fn: FnMixBegin, F: [6]float64{m[0]}})
	for _, w := range ws {
		d.emit(Step{Fn: FnMixChain, F: [6]float64{float64(w * m[1])}})
		depth := p.depth
		if depth <= 0 {
			depth = 1 + r.Intn(3)
		}
		for range depth {
			e := &p.space[r.Intn(len(p.space))]
			p.emit(d, e, p.magOf(r, e, r.Intn(p.severity)))
		}
	}
	d.emit(Step{Fn: FnMixEnd})
}

// autoAugmentPolicies are torchvision's AutoAugmentPolicy sub-policies:
// (op, probability, magnitude bin of 10; -1 none).
var autoAugmentPolicies = map[string][][2]aaOp{
	"imagenet": {
		{{augPosterize, 0.4, 8}, {augRotate, 0.6, 9}},
		{{augSolarize, 0.6, 5}, {augAutoContrast, 0.6, -1}},
		{{augEqualize, 0.8, -1}, {augEqualize, 0.6, -1}},
		{{augPosterize, 0.6, 7}, {augPosterize, 0.6, 6}},
		{{augEqualize, 0.4, -1}, {augSolarize, 0.2, 4}},
		{{augEqualize, 0.4, -1}, {augRotate, 0.8, 8}},
		{{augSolarize, 0.6, 3}, {augEqualize, 0.6, -1}},
		{{augPosterize, 0.8, 5}, {augEqualize, 1.0, -1}},
		{{augRotate, 0.2, 3}, {augSolarize, 0.6, 8}},
		{{augEqualize, 0.6, -1}, {augPosterize, 0.4, 6}},
		{{augRotate, 0.8, 8}, {augColor, 0.4, 0}},
		{{augRotate, 0.4, 9}, {augEqualize, 0.6, -1}},
		{{augEqualize, 0.0, -1}, {augEqualize, 0.8, -1}},
		{{augInvert, 0.6, -1}, {augEqualize, 1.0, -1}},
		{{augColor, 0.6, 4}, {augContrast, 1.0, 8}},
		{{augRotate, 0.8, 8}, {augColor, 1.0, 2}},
		{{augColor, 0.8, 8}, {augSolarize, 0.8, 7}},
		{{augSharpness, 0.4, 7}, {augInvert, 0.6, -1}},
		{{augShearX, 0.6, 5}, {augEqualize, 1.0, -1}},
		{{augColor, 0.4, 0}, {augEqualize, 0.6, -1}},
		{{augEqualize, 0.4, -1}, {augSolarize, 0.2, 4}},
		{{augSolarize, 0.6, 5}, {augAutoContrast, 0.6, -1}},
		{{augInvert, 0.6, -1}, {augEqualize, 1.0, -1}},
		{{augColor, 0.6, 4}, {augContrast, 1.0, 8}},
		{{augEqualize, 0.8, -1}, {augEqualize, 0.6, -1}},
	},
	"cifar10": {
		{{augInvert, 0.1, -1}, {augContrast, 0.2, 6}},
		{{augRotate, 0.7, 2}, {augTranslateX, 0.3, 9}},
		{{augSharpness, 0.8, 1}, {augSharpness, 0.9, 3}},
		{{augShearY, 0.5, 8}, {augTranslateY, 0.7, 9}},
		{{augAutoContrast, 0.5, -1}, {augEqualize, 0.9, -1}},
		{{augShearY, 0.2, 7}, {augPosterize, 0.3, 7}},
		{{augColor, 0.4, 3}, {augBrightness, 0.6, 7}},
		{{augSharpness, 0.3, 9}, {augBrightness, 0.7, 9}},
		{{augEqualize, 0.6, -1}, {augEqualize, 0.5, -1}},
		{{augContrast, 0.6, 7}, {augSharpness, 0.6, 5}},
		{{augColor, 0.7, 7}, {augTranslateX, 0.5, 8}},
		{{augEqualize, 0.3, -1}, {augAutoContrast, 0.4, -1}},
		{{augTranslateY, 0.4, 3}, {augSharpness, 0.2, 6}},
		{{augBrightness, 0.9, 6}, {augColor, 0.2, 8}},
		{{augSolarize, 0.5, 2}, {augInvert, 0.0, -1}},
		{{augEqualize, 0.2, -1}, {augAutoContrast, 0.6, -1}},
		{{augEqualize, 0.2, -1}, {augEqualize, 0.6, -1}},
		{{augColor, 0.9, 9}, {augEqualize, 0.6, -1}},
		{{augAutoContrast, 0.8, -1}, {augSolarize, 0.2, 8}},
		{{augBrightness, 0.1, 3}, {augColor, 0.7, 0}},
		{{augSolarize, 0.4, 5}, {augAutoContrast, 0.9, -1}},
		{{augTranslateY, 0.9, 9}, {augTranslateY, 0.7, 9}},
		{{augAutoContrast, 0.9, -1}, {augSolarize, 0.8, 3}},
		{{augEqualize, 0.8, -1}, {augInvert, 0.1, -1}},
		{{augTranslateY, 0.7, 9}, {augAutoContrast, 0.9, -1}},
	},
	"svhn": {
		{{augShearX, 0.9, 4}, {augInvert, 0.2, -1}},
		{{augShearY, 0.9, 8}, {augInvert, 0.7, -1}},
		{{augEqualize, 0.6, -1}, {augSolarize, 0.6, 6}},
		{{augInvert, 0.9, -1}, {augEqualize, 0.6, -1}},
		{{augEqualize, 0.6, -1}, {augRotate, 0.9, 3}},
		{{augShearX, 0.9, 4}, {augAutoContrast, 0.8, -1}},
		{{augShearY, 0.9, 8}, {augInvert, 0.4, -1}},
		{{augShearY, 0.9, 5}, {augSolarize, 0.2, 6}},
		{{augInvert, 0.9, -1}, {augAutoContrast, 0.8, -1}},
		{{augEqualize, 0.6, -1}, {augRotate, 0.9, 3}},
		{{augShearX, 0.9, 4}, {augSolarize, 0.3, 3}},
		{{augShearY, 0.8, 8}, {augInvert, 0.7, -1}},
		{{augEqualize, 0.9, -1}, {augTranslateY, 0.6, 6}},
		{{augInvert, 0.9, -1}, {augEqualize, 0.6, -1}},
		{{augContrast, 0.3, 3}, {augRotate, 0.8, 4}},
		{{augInvert, 0.8, -1}, {augTranslateY, 0.0, 2}},
		{{augShearY, 0.7, 6}, {augSolarize, 0.4, 8}},
		{{augInvert, 0.6, -1}, {augRotate, 0.8, 4}},
		{{augShearY, 0.3, 7}, {augTranslateX, 0.9, 3}},
		{{augShearX, 0.1, 6}, {augInvert, 0.6, -1}},
		{{augSolarize, 0.7, 2}, {augTranslateY, 0.6, 7}},
		{{augShearY, 0.8, 4}, {augInvert, 0.8, -1}},
		{{augShearX, 0.7, 9}, {augTranslateY, 0.8, 3}},
		{{augShearY, 0.8, 5}, {augAutoContrast, 0.7, -1}},
		{{augShearX, 0.7, 2}, {augInvert, 0.1, -1}},
	},
}

// timmConfig is a timm RandAugment config string, parsed as timm's
// rand_augment_transform parses it (timm/data/auto_augment.py): "rand" and
// then m (magnitude, default 10; the last one given counts), n (ops per
// image, default 2), p (each op's probability, default 0.5), mstd
// (magnitude noise; > 100: uniform; the first one given counts, as timm's
// hparams.setdefault), mmax (the magnitude's upper bound, default and for
// mmax0 10, _LEVEL_DENOM, as timm's `magnitude_max or _LEVEL_DENOM`; the
// first one counts), inc (the increasing variants: timm tests bool() of
// the string, so inc0 turns them on too) and t (the transform set, the
// first one counts: "weights" is timm's _RAND_WEIGHTED_0, chosen by weight
// without replacement; "3a" and "3aw" are refused, stoker's RandAugment
// has not their op sets (timm's AutoAugment "3a" is TimmAutoAugment's);
// any other name is the default set, as timm's rand_augment_choices).
type timmConfig struct {
	text      string
	m         float64
	n         int
	p         float64
	mstd      float64
	mmax      float64
	increase  bool
	weighted  bool    // t "weights"
	translate float64 // translate_pct, default 0.45
	random    bool    // Op.RandomInterp
	// aa: timm's AutoAugment sub-policies (TimmAutoAugment), its config's
	// policy name first.
	aa [][]timmAAOp
	// TimmAugMix: width chains of depth ops (<= 0: 1..3 per chain), the
	// Dirichlet's and the Beta's alpha; m is its severity.
	width, depth int
	alpha        float64
	blended      bool // b1: one PIL blend per chain (augmix_fold)
}

// timmAugMixOps is timm's _AUGMIX_TRANSFORMS, in its order, each the
// increasing variant where there are two.
var timmAugMixOps = []augOp{augAutoContrast, augColor, augContrast, augBrightness, augSharpness, augEqualize, augRotate,
	augPosterize, augSolarize, augShearX, augShearY, augTranslateX, augTranslateY}

// parseTimmAugMixConfig parses a timm AugMix config as timm's
// augment_and_mix_transform does: "augmix", then sections of a key and a
// value starting at the first digit (a section without one skipped): m
// severity (3), w width (3), d depth (-1), a alpha (1.0), b blended (0),
// mstd (the first counts; default infinite, uniform magnitudes in
// [0, m]). translate_pct is create_transform's 0.3.
func parseTimmAugMixConfig(s string) (timmConfig, error) {
	c := timmConfig{text: s, m: 3, width: 3, depth: -1, alpha: 1, mstd: math.Inf(1), mmax: 10, translate: 0.3}
	parts := strings.Split(s, "-")
	if len(s) > 256 || parts[0] != "augmix" {
		return c, fmt.Errorf("timm AugMix config %q: want \"augmix-...\" (e.g. augmix-m5-w4-d2)", truncateString(s, 64))
	}
	haveStd := false
	for _, part := range parts[1:] {
		i := strings.IndexAny(part, "0123456789")
		if i < 0 {
			continue // timm: re.split finds no digit, the section is skipped
		}
		key, val := part[:i], part[i:]
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return c, fmt.Errorf("timm AugMix config %q: %s: %q is not a number", s, key, val)
		}
		whole := f == math.Trunc(f) && !strings.ContainsAny(val, ".eE") // timm's int(val)
		switch key {
		case "m":
			if !whole || f > 30 {
				return c, fmt.Errorf("timm AugMix config %q: m%s: want an integer 0..30", s, val)
			}
			c.m = f
		case "w":
			if !whole || f < 1 || f > maxPolicyOp {
				return c, fmt.Errorf("timm AugMix config %q: w%s: want an integer 1..%d", s, val, maxPolicyOp)
			}
			c.width = int(f)
		case "d":
			if !whole || f > maxPolicyOp {
				return c, fmt.Errorf("timm AugMix config %q: d%s: want an integer 0..%d (0: 1..3 per chain)", s, val, maxPolicyOp)
			}
			c.depth = int(f)
		case "a":
			if !(f > 0 && f <= 1e3) {
				return c, fmt.Errorf("timm AugMix config %q: a%s: want 0 < alpha <= 1000", s, val)
			}
			c.alpha = f
		case "b":
			if !whole {
				return c, fmt.Errorf("timm AugMix config %q: b%s: want an integer", s, val)
			}
			c.blended = f != 0 // timm: bool(int(val))
		case "mstd":
			if f > 1e3 {
				return c, fmt.Errorf("timm AugMix config %q: mstd%s: want at most 1000", s, val)
			}
			if !haveStd {
				haveStd, c.mstd = true, f
			}
		default:
			return c, fmt.Errorf("timm AugMix config %q: unknown section %q (timm's AugMix knows m, w, d, a, b and mstd)", s, part)
		}
	}
	return c, nil
}

// drawTimmAugMix is timm's AugMixAugment.__call__: float32
// Dirichlet weights of the chains and a float32 Beta weight m; each chain
// depth ops (or 1..3) chosen with replacement from the image, each at the
// severity through timmStep (probability 1); the chains' float32 sum
// (augmix_begin of weight 0, as timm's zeros, and a chain per weight),
// clipped and truncated to uint8 (augmix_end); then PIL's blend of the
// image with it by m (augmix_blend). Blended (b1, _apply_blended): each
// chain's result blended into the image so far by timm's blended weights
// (augmix_fold), the chains' sum unused.
func (p *policy) drawTimmAugMix(r *RNG, d *drawer) {
	c := &p.timm
	var wbuf [maxPolicyOp]float64
	ws := wbuf[:c.width]
	r.Dirichlet(c.alpha, ws)
	var m [2]float64
	r.Dirichlet(c.alpha, m[:])
	d.emit(Step{Fn: FnMixBegin})
	var folds [maxPolicyOp]float32
	if c.blended {
		// _calc_blended_weights, in float32 as numpy computes it: each
		// chain's weight times m, from the last, over what the later
		// blends leave of it.
		mf, cump := float32(m[0]), float32(1)
		for i := len(ws) - 1; i >= 0; i-- {
			a := float32(float32(float32(ws[i])*mf) / cump)
			cump = float32(cump * float32(1-a))
			folds[i] = a
		}
	}
	for i, w := range ws {
		if c.blended {
			d.emit(Step{Fn: FnMixChain}) // from the image; the sum is not used
		} else {
			d.emit(Step{Fn: FnMixChain, F: [6]float64{float64(float32(w))}})
		}
		depth := c.depth
		if depth <= 0 {
			depth = 1 + r.Intn(3)
		}
		for range depth {
			p.timmStep(r, d, p.space[r.Intn(len(p.space))].op, timmIncreasing, c.m)
		}
		if c.blended {
			d.emit(Step{Fn: FnMixFold, F: [6]float64{float64(folds[i])}})
		}
	}
	if !c.blended {
		d.emit(Step{Fn: FnMixEnd})
		d.emit(Step{Fn: FnMixBlend, F: [6]float64{float64(float32(m[0]))}})
	}
}

// timmVariant is which of timm's level functions an op takes: the plain
// one, the increasing one ("...Increasing") or PosterizeOriginal's.
type timmVariant uint8

const (
	timmPlain timmVariant = iota
	timmIncreasing
	timmOriginal
)

// timmAAOp is one op of a timm AutoAugment sub-policy.
type timmAAOp struct {
	op      augOp
	variant timmVariant
	p, m    float64
}

// parseTimmAAConfig parses a timm AutoAugment config as timm's
// auto_augment_transform does: the policy's name, then sections split on
// "-" of a key and a value starting at the first digit, where a section
// without a digit is skipped and only mstd (the first counts, as timm's
// hparams.setdefault) is known. Its magnitudes are bounded by 10 (timm's
// _LEVEL_DENOM; AutoAugment has no mmax).
func parseTimmAAConfig(s string) (timmConfig, error) {
	c := timmConfig{text: s, mmax: 10, translate: 0.45}
	parts := strings.Split(s, "-")
	subs, ok := timmAutoAugmentPolicies[parts[0]]
	if len(s) > 256 || !ok {
		return c, fmt.Errorf("timm AutoAugment config %q: want original, originalr, v0, v0r or 3a, then -mstd sections (e.g. v0r-mstd0.5)", truncateString(s, 64))
	}
	c.aa = subs
	haveStd := false
	for _, part := range parts[1:] {
		i := strings.IndexAny(part, "0123456789")
		if i < 0 {
			continue // timm: re.split finds no digit, the section is skipped
		}
		key, val := part[:i], part[i:]
		if key != "mstd" {
			return c, fmt.Errorf("timm AutoAugment config %q: unknown section %q (timm's AutoAugment knows mstd only)", s, part)
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e3 {
			return c, fmt.Errorf("timm AutoAugment config %q: mstd: %q is not a number up to 1000", s, val)
		}
		if !haveStd {
			haveStd, c.mstd = true, f
		}
	}
	return c, nil
}

// timmAutoAugmentPolicies are timm's auto_augment_policy sub-policies
// (timm/data/auto_augment.py, timm 1.0.31): (op, variant, probability,
// magnitude).
var timmAutoAugmentPolicies = map[string][][]timmAAOp{
	"original": {
		{{augPosterize, timmOriginal, 0.4, 8}, {augRotate, timmPlain, 0.6, 9}},
		{{augSolarize, timmPlain, 0.6, 5}, {augAutoContrast, timmPlain, 0.6, 5}},
		{{augEqualize, timmPlain, 0.8, 8}, {augEqualize, timmPlain, 0.6, 3}},
		{{augPosterize, timmOriginal, 0.6, 7}, {augPosterize, timmOriginal, 0.6, 6}},
		{{augEqualize, timmPlain, 0.4, 7}, {augSolarize, timmPlain, 0.2, 4}},
		{{augEqualize, timmPlain, 0.4, 4}, {augRotate, timmPlain, 0.8, 8}},
		{{augSolarize, timmPlain, 0.6, 3}, {augEqualize, timmPlain, 0.6, 7}},
		{{augPosterize, timmOriginal, 0.8, 5}, {augEqualize, timmPlain, 1.0, 2}},
		{{augRotate, timmPlain, 0.2, 3}, {augSolarize, timmPlain, 0.6, 8}},
		{{augEqualize, timmPlain, 0.6, 8}, {augPosterize, timmOriginal, 0.4, 6}},
		{{augRotate, timmPlain, 0.8, 8}, {augColor, timmPlain, 0.4, 0}},
		{{augRotate, timmPlain, 0.4, 9}, {augEqualize, timmPlain, 0.6, 2}},
		{{augEqualize, timmPlain, 0.0, 7}, {augEqualize, timmPlain, 0.8, 8}},
		{{augInvert, timmPlain, 0.6, 4}, {augEqualize, timmPlain, 1.0, 8}},
		{{augColor, timmPlain, 0.6, 4}, {augContrast, timmPlain, 1.0, 8}},
		{{augRotate, timmPlain, 0.8, 8}, {augColor, timmPlain, 1.0, 2}},
		{{augColor, timmPlain, 0.8, 8}, {augSolarize, timmPlain, 0.8, 7}},
		{{augSharpness, timmPlain, 0.4, 7}, {augInvert, timmPlain, 0.6, 8}},
		{{augShearX, timmPlain, 0.6, 5}, {augEqualize, timmPlain, 1.0, 9}},
		{{augColor, timmPlain, 0.4, 0}, {augEqualize, timmPlain, 0.6, 3}},
		{{augEqualize, timmPlain, 0.4, 7}, {augSolarize, timmPlain, 0.2, 4}},
		{{augSolarize, timmPlain, 0.6, 5}, {augAutoContrast, timmPlain, 0.6, 5}},
		{{augInvert, timmPlain, 0.6, 4}, {augEqualize, timmPlain, 1.0, 8}},
		{{augColor, timmPlain, 0.6, 4}, {augContrast, timmPlain, 1.0, 8}},
		{{augEqualize, timmPlain, 0.8, 8}, {augEqualize, timmPlain, 0.6, 3}},
	},
	"originalr": {
		{{augPosterize, timmIncreasing, 0.4, 8}, {augRotate, timmPlain, 0.6, 9}},
		{{augSolarize, timmPlain, 0.6, 5}, {augAutoContrast, timmPlain, 0.6, 5}},
		{{augEqualize, timmPlain, 0.8, 8}, {augEqualize, timmPlain, 0.6, 3}},
		{{augPosterize, timmIncreasing, 0.6, 7}, {augPosterize, timmIncreasing, 0.6, 6}},
		{{augEqualize, timmPlain, 0.4, 7}, {augSolarize, timmPlain, 0.2, 4}},
		{{augEqualize, timmPlain, 0.4, 4}, {augRotate, timmPlain, 0.8, 8}},
		{{augSolarize, timmPlain, 0.6, 3}, {augEqualize, timmPlain, 0.6, 7}},
		{{augPosterize, timmIncreasing, 0.8, 5}, {augEqualize, timmPlain, 1.0, 2}},
		{{augRotate, timmPlain, 0.2, 3}, {augSolarize, timmPlain, 0.6, 8}},
		{{augEqualize, timmPlain, 0.6, 8}, {augPosterize, timmIncreasing, 0.4, 6}},
		{{augRotate, timmPlain, 0.8, 8}, {augColor, timmPlain, 0.4, 0}},
		{{augRotate, timmPlain, 0.4, 9}, {augEqualize, timmPlain, 0.6, 2}},
		{{augEqualize, timmPlain, 0.0, 7}, {augEqualize, timmPlain, 0.8, 8}},
		{{augInvert, timmPlain, 0.6, 4}, {augEqualize, timmPlain, 1.0, 8}},
		{{augColor, timmPlain, 0.6, 4}, {augContrast, timmPlain, 1.0, 8}},
		{{augRotate, timmPlain, 0.8, 8}, {augColor, timmPlain, 1.0, 2}},
		{{augColor, timmPlain, 0.8, 8}, {augSolarize, timmPlain, 0.8, 7}},
		{{augSharpness, timmPlain, 0.4, 7}, {augInvert, timmPlain, 0.6, 8}},
		{{augShearX, timmPlain, 0.6, 5}, {augEqualize, timmPlain, 1.0, 9}},
		{{augColor, timmPlain, 0.4, 0}, {augEqualize, timmPlain, 0.6, 3}},
		{{augEqualize, timmPlain, 0.4, 7}, {augSolarize, timmPlain, 0.2, 4}},
		{{augSolarize, timmPlain, 0.6, 5}, {augAutoContrast, timmPlain, 0.6, 5}},
		{{augInvert, timmPlain, 0.6, 4}, {augEqualize, timmPlain, 1.0, 8}},
		{{augColor, timmPlain, 0.6, 4}, {augContrast, timmPlain, 1.0, 8}},
		{{augEqualize, timmPlain, 0.8, 8}, {augEqualize, timmPlain, 0.6, 3}},
	},
	"v0": {
		{{augEqualize, timmPlain, 0.8, 1}, {augShearY, timmPlain, 0.8, 4}},
		{{augColor, timmPlain, 0.4, 9}, {augEqualize, timmPlain, 0.6, 3}},
		{{augColor, timmPlain, 0.4, 1}, {augRotate, timmPlain, 0.6, 8}},
		{{augSolarize, timmPlain, 0.8, 3}, {augEqualize, timmPlain, 0.4, 7}},
		{{augSolarize, timmPlain, 0.4, 2}, {augSolarize, timmPlain, 0.6, 2}},
		{{augColor, timmPlain, 0.2, 0}, {augEqualize, timmPlain, 0.8, 8}},
		{{augEqualize, timmPlain, 0.4, 8}, {augSolarizeAdd, timmPlain, 0.8, 3}},
		{{augShearX, timmPlain, 0.2, 9}, {augRotate, timmPlain, 0.6, 8}},
		{{augColor, timmPlain, 0.6, 1}, {augEqualize, timmPlain, 1.0, 2}},
		{{augInvert, timmPlain, 0.4, 9}, {augRotate, timmPlain, 0.6, 0}},
		{{augEqualize, timmPlain, 1.0, 9}, {augShearY, timmPlain, 0.6, 3}},
		{{augColor, timmPlain, 0.4, 7}, {augEqualize, timmPlain, 0.6, 0}},
		{{augPosterize, timmPlain, 0.4, 6}, {augAutoContrast, timmPlain, 0.4, 7}},
		{{augSolarize, timmPlain, 0.6, 8}, {augColor, timmPlain, 0.6, 9}},
		{{augSolarize, timmPlain, 0.2, 4}, {augRotate, timmPlain, 0.8, 9}},
		{{augRotate, timmPlain, 1.0, 7}, {augTranslateY, timmPlain, 0.8, 9}},
		{{augShearX, timmPlain, 0.0, 0}, {augSolarize, timmPlain, 0.8, 4}},
		{{augShearY, timmPlain, 0.8, 0}, {augColor, timmPlain, 0.6, 4}},
		{{augColor, timmPlain, 1.0, 0}, {augRotate, timmPlain, 0.6, 2}},
		{{augEqualize, timmPlain, 0.8, 4}, {augEqualize, timmPlain, 0.0, 8}},
		{{augEqualize, timmPlain, 1.0, 4}, {augAutoContrast, timmPlain, 0.6, 2}},
		{{augShearY, timmPlain, 0.4, 7}, {augSolarizeAdd, timmPlain, 0.6, 7}},
		{{augPosterize, timmPlain, 0.8, 2}, {augSolarize, timmPlain, 0.6, 10}},
		{{augSolarize, timmPlain, 0.6, 8}, {augEqualize, timmPlain, 0.6, 1}},
		{{augColor, timmPlain, 0.8, 6}, {augRotate, timmPlain, 0.4, 5}},
	},
	"v0r": {
		{{augEqualize, timmPlain, 0.8, 1}, {augShearY, timmPlain, 0.8, 4}},
		{{augColor, timmPlain, 0.4, 9}, {augEqualize, timmPlain, 0.6, 3}},
		{{augColor, timmPlain, 0.4, 1}, {augRotate, timmPlain, 0.6, 8}},
		{{augSolarize, timmPlain, 0.8, 3}, {augEqualize, timmPlain, 0.4, 7}},
		{{augSolarize, timmPlain, 0.4, 2}, {augSolarize, timmPlain, 0.6, 2}},
		{{augColor, timmPlain, 0.2, 0}, {augEqualize, timmPlain, 0.8, 8}},
		{{augEqualize, timmPlain, 0.4, 8}, {augSolarizeAdd, timmPlain, 0.8, 3}},
		{{augShearX, timmPlain, 0.2, 9}, {augRotate, timmPlain, 0.6, 8}},
		{{augColor, timmPlain, 0.6, 1}, {augEqualize, timmPlain, 1.0, 2}},
		{{augInvert, timmPlain, 0.4, 9}, {augRotate, timmPlain, 0.6, 0}},
		{{augEqualize, timmPlain, 1.0, 9}, {augShearY, timmPlain, 0.6, 3}},
		{{augColor, timmPlain, 0.4, 7}, {augEqualize, timmPlain, 0.6, 0}},
		{{augPosterize, timmIncreasing, 0.4, 6}, {augAutoContrast, timmPlain, 0.4, 7}},
		{{augSolarize, timmPlain, 0.6, 8}, {augColor, timmPlain, 0.6, 9}},
		{{augSolarize, timmPlain, 0.2, 4}, {augRotate, timmPlain, 0.8, 9}},
		{{augRotate, timmPlain, 1.0, 7}, {augTranslateY, timmPlain, 0.8, 9}},
		{{augShearX, timmPlain, 0.0, 0}, {augSolarize, timmPlain, 0.8, 4}},
		{{augShearY, timmPlain, 0.8, 0}, {augColor, timmPlain, 0.6, 4}},
		{{augColor, timmPlain, 1.0, 0}, {augRotate, timmPlain, 0.6, 2}},
		{{augEqualize, timmPlain, 0.8, 4}, {augEqualize, timmPlain, 0.0, 8}},
		{{augEqualize, timmPlain, 1.0, 4}, {augAutoContrast, timmPlain, 0.6, 2}},
		{{augShearY, timmPlain, 0.4, 7}, {augSolarizeAdd, timmPlain, 0.6, 7}},
		{{augPosterize, timmIncreasing, 0.8, 2}, {augSolarize, timmPlain, 0.6, 10}},
		{{augSolarize, timmPlain, 0.6, 8}, {augEqualize, timmPlain, 0.6, 1}},
		{{augColor, timmPlain, 0.8, 6}, {augRotate, timmPlain, 0.4, 5}},
	},
	"3a": {
		{{augSolarize, timmPlain, 1.0, 5}},
		{{augDesaturate, timmPlain, 1.0, 10}},
		{{augBlurRand, timmPlain, 1.0, 10}},
	},
}

func parseTimmConfig(s string) (timmConfig, error) {
	c := timmConfig{text: s, m: 10, n: 2, p: 0.5, mmax: 10, translate: 0.45}
	parts := strings.Split(s, "-")
	if len(s) > 256 || parts[0] != "rand" {
		return c, fmt.Errorf("timm RandAugment config %q: want \"rand-...\" (e.g. rand-m9-mstd0.5-inc1)", truncateString(s, 64))
	}
	var haveStd, haveMax, haveT bool
	for _, part := range parts[1:] {
		if strings.HasPrefix(part, "t") {
			if haveT {
				continue
			}
			haveT = true
			switch part[1:] {
			case "weights":
				c.weighted = true
			case "3a", "3aw":
				return c, fmt.Errorf("timm RandAugment config %q: transform set %q is not supported (timm's AutoAugment 3a is TimmAutoAugment's); stoker runs timm's default set (no t section, or any other name) and tweights", s, part[1:])
			}
			continue
		}
		i := strings.IndexAny(part, "0123456789")
		if i <= 0 {
			return c, fmt.Errorf("timm RandAugment config %q: section %q is not KEYVALUE", s, part)
		}
		key, val := part[:i], part[i:]
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return c, fmt.Errorf("timm RandAugment config %q: %s: %q is not a number", s, key, val)
		}
		switch key {
		case "m":
			if f < 0 || f > 30 || f != math.Trunc(f) {
				return c, fmt.Errorf("timm RandAugment config %q: m%v: want an integer 0..30", s, val)
			}
			c.m = f
		case "n":
			if f < 0 || f > maxPolicyOp || f != math.Trunc(f) {
				return c, fmt.Errorf("timm RandAugment config %q: n%v: want an integer 0..%d", s, val, maxPolicyOp)
			}
			c.n = int(f)
		case "p":
			if f > 1 {
				return c, fmt.Errorf("timm RandAugment config %q: p%v: want a probability 0..1", s, val)
			}
			c.p = f
		case "mstd":
			if haveStd {
				continue
			}
			haveStd = true
			c.mstd = f
			if f > 100 {
				c.mstd = math.Inf(1)
			}
		case "mmax":
			if haveMax {
				continue
			}
			haveMax = true
			if f > 30 || f != math.Trunc(f) {
				return c, fmt.Errorf("timm RandAugment config %q: mmax%v: want an integer 0..30", s, val)
			}
			c.mmax = f
			if f == 0 {
				c.mmax = 10 // timm: magnitude_max or _LEVEL_DENOM
			}
		case "inc":
			c.increase = true // timm: bool(val) of the string
		default:
			return c, fmt.Errorf("timm RandAugment config %q: unknown section %q (stoker knows m, n, p, mstd, mmax, inc and t)", s, key)
		}
	}
	if c.weighted && c.n > len(timmWeights) {
		return c, fmt.Errorf("timm RandAugment config %q: n%d with tweights: timm chooses without replacement from %d ops", s, c.n, len(timmWeights))
	}
	return c, nil
}

// timmWeights is timm's _RAND_WEIGHTED_0, in its order: the ops (their
// increasing variants where there are two) and their weights.
var timmWeights = []struct {
	op augOp
	w  float64
}{
	{augRotate, 3}, {augShearX, 2}, {augShearY, 2}, {augTranslateX, 1}, {augTranslateY, 1},
	{augColor, .25}, {augSharpness, 0.25}, {augAutoContrast, 0.25}, {augSolarize, .05}, {augSolarizeAdd, .05},
	{augContrast, .05}, {augBrightness, .05}, {augEqualize, .05}, {augPosterize, 0.05}, {augInvert, 0.05},
}

// truncateString cuts s to n bytes, marking the cut.
func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// timmSpace is timm's _RAND_TRANSFORMS, or _RAND_INCREASING_TRANSFORMS with
// inc, in timm's order (the magnitudes are computed per draw).
func timmSpace(c timmConfig) []augEntry {
	if c.weighted {
		out := make([]augEntry, len(timmWeights))
		for i, e := range timmWeights {
			out[i] = augEntry{op: e.op}
		}
		return out
	}
	ops := []augOp{augAutoContrast, augEqualize, augInvert, augRotate, augPosterize, augSolarize, augSolarizeAdd,
		augColor, augContrast, augBrightness, augSharpness, augShearX, augShearY, augTranslateX, augTranslateY}
	out := make([]augEntry, len(ops))
	for i, op := range ops {
		out[i] = augEntry{op: op}
	}
	return out
}

// drawTimm is timm's RandAugment.__call__: n ops chosen with replacement,
// each applied with probability 0.5 at magnitude m (timmStep).
func (p *policy) drawTimm(r *RNG, d *drawer) {
	c := &p.timm
	var chosen [maxPolicyOp]int
	if c.weighted {
		timmChoose(r, chosen[:c.n])
	}
	variant := timmPlain
	if c.increase || c.weighted { // _RAND_WEIGHTED_0 names the increasing variants
		variant = timmIncreasing
	}
	for k := range c.n {
		var e *augEntry
		if c.weighted {
			e = &p.space[chosen[k]]
		} else {
			e = &p.space[r.Intn(len(p.space))]
		}
		if c.p < 1 && r.Float64() > c.p {
			continue
		}
		p.timmStep(r, d, e.op, variant, c.m)
	}
}

// timmStep is timm's AugmentOp.__call__ once its probability has passed:
// the magnitude m (with gaussian noise of mstd, or uniform in [0, m] when
// mstd is infinite), clipped to [0, mmax], its argument from timm's level
// function for the op's variant. Resampling is the policy's
// interpolation; for bilinear-or-bicubic ("random" in the wire's terms)
// each op draws one, as timm's _interpolation does.
func (p *policy) timmStep(r *RNG, d *drawer, op augOp, variant timmVariant, m float64) {
	c := &p.timm
	switch {
	case math.IsInf(c.mstd, 1):
		m = r.Uniform(0, m)
	case c.mstd > 0:
		m = float64(m + float64(c.mstd*r.Normal()))
	}
	m = math.Max(0, math.Min(m, c.mmax))
	lvl := m / 10
	negate := func(v float64) float64 {
		if r.Float64() > 0.5 {
			return -v
		}
		return v
	}
	interp := p.interp
	if p.timmRandomInterp() {
		interp = InterpBilinear
		if r.Intn(2) == 1 {
			interp = InterpBicubic
		}
	}
	inc := variant == timmIncreasing
	geo := Step{Fn: FnAffine, Interp: interp, Fill: p.fill, FillNone: p.fillNone, F: [6]float64{0, 0, 0, 1, 0, 0}}
	enhance := func(fn Fn) {
		f := float64(lvl*1.8) + 0.1
		if inc {
			f = math.Max(0.1, 1+negate(float64(lvl*0.9)))
		}
		d.emit(Step{Fn: fn, F: [6]float64{f}})
	}
	switch op {
	case augAutoContrast:
		d.emit(Step{Fn: FnAutocontrast})
	case augEqualize:
		d.emit(Step{Fn: FnEqualize})
	case augInvert:
		d.emit(Step{Fn: FnInvert})
	case augRotate:
		d.emit(Step{Fn: FnRotate, F: [6]float64{negate(float64(lvl * 30))}, Interp: interp, Fill: p.fill, FillNone: p.fillNone})
	case augPosterize:
		bits := int(float64(lvl * 4))
		switch variant {
		case timmIncreasing:
			// 4 - int(level * 4): negative past m10 (mmax > 10),
			// which PIL refuses (13: bits must be 1..8) or, before
			// it, made black, as 0 bits do
			bits = max(4-bits, 0)
		case timmOriginal:
			bits += 4 // _posterize_original_level_to_arg: 4..8
		}
		if bits < 8 {
			d.emit(Step{Fn: FnPosterize, I: [6]int{bits}})
		}
	case augSolarize:
		thresh := min(256, int(float64(lvl*256))) // timm's min(256, ...)
		if inc {
			thresh = 256 - thresh
		}
		if thresh <= 255 {
			d.emit(Step{Fn: FnSolarize, F: [6]float64{float64(thresh)}})
		}
	case augSolarizeAdd:
		d.emit(Step{Fn: FnSolarizeAdd, I: [6]int{min(128, int(float64(lvl*110)))}, F: [6]float64{128}}) // timm's min(128, ...)
	case augColor:
		enhance(FnAdjustSaturation)
	case augContrast:
		enhance(FnAdjustContrast)
	case augBrightness:
		enhance(FnAdjustBrightness)
	case augSharpness:
		enhance(FnAdjustSharpness)
	case augShearX, augShearY:
		f := negate(float64(lvl * 0.3))
		geo.F[4+int(op-augShearX)] = det.Atan(f) * 180 / math.Pi
		geo.HasCenter = true
		d.emit(geo)
	case augTranslateX:
		geo.F[1] = -float64(negate(float64(lvl*c.translate)) * float64(d.w))
		d.emit(geo)
	case augTranslateY:
		geo.F[2] = -float64(negate(float64(lvl*c.translate)) * float64(d.h))
		d.emit(geo)
	case augDesaturate:
		// _minmax_level_to_arg(min 0.5, max 1), then desaturate's
		// ImageEnhance.Color(min(1, max(0, 1 - level)))
		l := math.Max(0.5, math.Min(1, float64(0.5+float64(0.5*lvl))))
		d.emit(Step{Fn: FnAdjustSaturation, F: [6]float64{math.Min(1, math.Max(0, 1-l))}})
	case augBlurRand:
		// gaussian_blur_rand: PIL's GaussianBlur of radius
		// uniform(0.1, 2 * level), as torchvision's gaussian_blur of that
		// sigma over 2*ceil(3 sigma)+1 taps (at most the image allows)
		sigma := r.Uniform(0.1, float64(2*math.Max(0, math.Min(1, lvl))))
		k := 2*int(math.Ceil(float64(3*sigma))) + 1
		k = min(k, 2*(min(d.w, d.h)-1)+1)
		d.emit(Step{Fn: FnGaussianBlur, I: [6]int{k, k}, F: [6]float64{sigma, sigma}})
	}
}

// timmChoose is numpy's choice(len(timmWeights), len(out), replace=False,
// p=weights), as timm's RandAugment with weights calls it, in distribution:
// one index at a time by its weight among those not yet chosen (numpy
// draws them in rounds and keeps the first of each, which gives each
// ordered choice the same probability).
func timmChoose(r *RNG, out []int) {
	var taken [16]bool
	for k := range out {
		total := 0.0
		for i, e := range timmWeights {
			if !taken[i] {
				total += e.w
			}
		}
		x, pick := r.Float64()*total, -1
		for i, e := range timmWeights {
			if taken[i] {
				continue
			}
			pick = i
			if x -= e.w; x < 0 {
				break
			}
		}
		taken[pick], out[k] = true, pick
	}
}

// timmRandomInterp reports whether the policy draws bilinear or bicubic
// per resampling op (timm's default, _RANDOM_INTERPOLATION).
func (p *policy) timmRandomInterp() bool { return p.timm.random }
