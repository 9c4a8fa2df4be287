package policy

// torchvision's policies: their augmentation spaces, magnitude bins,
// signs, fills and default interpolations, and the compiled Policy they
// share with timm's (timm*.go).

import (
	"fmt"
	"math"
	"slices"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
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
type Policy struct {
	kind     Kind
	space    []augEntry
	interp   kernels.Interpolation
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
func tvSpace(kind Kind, n, w, h int) []augEntry {
	lin := func(hi float32) []float64 { return linspace32(0, hi, n) }
	switch kind {
	case TrivialAugmentWide:
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
	case AugMix:
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
	if kind == RandAugment {
		return append([]augEntry{{augIdentity, nil, false}}, s...)
	}
	return append(s, augEntry{augInvert, nil, false})
}

// newPolicy compiles a policy op for an output of w x h.
func New(op *Params, w, h int) (*Policy, error) {
	p := &Policy{kind: op.Kind, interp: op.Interp, fill: op.Fill, fillNone: op.FillNone}
	for _, v := range op.Fill {
		if !(v >= 0 && v <= 255) {
			return nil, fmt.Errorf("fill %v: want values in 0..255", op.Fill)
		}
	}
	// torchvision's policies take nearest, bilinear and bicubic on PIL
	// images (ClassificationPresetTrain's --interpolation bicubic); its
	// tensor kernels refuse bicubic. A bicubic rotate or shear here is the
	// warp kernel timm's RandAugment uses (kernels/bicubic.go: torch's
	// grid_sample cubic), not PIL's fixed-point bicubic (docs/transforms.md).
	if !op.Interp.Valid() {
		return nil, fmt.Errorf("interpolation %s: want nearest, bilinear or bicubic", op.Interp)
	}
	switch op.Kind {
	case TrivialAugmentWide:
		if op.Bins < 2 || op.Bins > 1000 {
			return nil, fmt.Errorf("num_magnitude_bins %d: want 2..1000", op.Bins)
		}
		p.bins, p.space, p.maxSteps = op.Bins, tvSpace(op.Kind, op.Bins, w, h), 1
	case RandAugment:
		if op.NumOps < 0 || op.NumOps > MaxOps {
			return nil, fmt.Errorf("num_ops %d: want 0..%d", op.NumOps, MaxOps)
		}
		if op.Bins < 2 || op.Bins > 1000 {
			return nil, fmt.Errorf("num_magnitude_bins %d: want 2..1000", op.Bins)
		}
		if op.Magnitude < 0 || op.Magnitude >= op.Bins {
			return nil, fmt.Errorf("magnitude %d: want 0..num_magnitude_bins-1 (%d)", op.Magnitude, op.Bins-1)
		}
		p.numOps, p.magnitude, p.bins = op.NumOps, op.Magnitude, op.Bins
		p.space, p.maxSteps = tvSpace(op.Kind, op.Bins, w, h), op.NumOps
	case AutoAugment:
		subs, ok := autoAugmentPolicies[op.Policy]
		if !ok {
			return nil, fmt.Errorf("policy %q: want imagenet, cifar10 or svhn", op.Policy)
		}
		p.subs, p.space, p.maxSteps = subs, tvSpace(op.Kind, 10, w, h), 2
	case AugMix:
		if op.Severity < 1 || op.Severity > 10 {
			return nil, fmt.Errorf("severity %d: want 1..10", op.Severity)
		}
		if op.MixtureWidth < 1 || op.MixtureWidth > MaxOps {
			return nil, fmt.Errorf("mixture_width %d: want 1..%d", op.MixtureWidth, MaxOps)
		}
		if op.ChainDepth > MaxOps || op.ChainDepth == 0 {
			return nil, fmt.Errorf("chain_depth %d: want -1 (random 1..3) or 1..%d", op.ChainDepth, MaxOps)
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
	case TimmRandAugment:
		cfg, err := parseTimmConfig(op.Policy)
		if err != nil {
			return nil, err
		}
		if op.Interp == kernels.Nearest && !op.RandomInterp {
			return nil, fmt.Errorf("interpolation nearest: timm's RandAugment resamples with bilinear, bicubic or a random choice of the two")
		}
		cfg.random = op.RandomInterp
		p.timm, p.space, p.maxSteps = cfg, timmSpace(cfg), cfg.n
	case TimmAugMix:
		cfg, err := parseTimmAugMixConfig(op.Policy)
		if err != nil {
			return nil, err
		}
		if op.Interp == kernels.Nearest && !op.RandomInterp {
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
	case TimmAutoAugment:
		cfg, err := parseTimmAAConfig(op.Policy)
		if err != nil {
			return nil, err
		}
		if op.Interp == kernels.Nearest && !op.RandomInterp {
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
func (p *Policy) draw(r *det.RNG, d *drawer) {
	switch p.kind {
	case TrivialAugmentWide:
		e := &p.space[r.Intn(len(p.space))]
		p.emit(d, e, p.magOf(r, e, r.Intn(p.bins)))
	case RandAugment:
		for range p.numOps {
			e := &p.space[r.Intn(len(p.space))]
			p.emit(d, e, p.magOf(r, e, p.magnitude))
		}
	case AutoAugment:
		sub := p.subs[r.Intn(len(p.subs))]
		for _, a := range sub {
			if !(r.Float64() <= a.p) {
				continue
			}
			e := p.entry(a.op)
			p.emit(d, e, p.magOf(r, e, a.bin))
		}
	case AugMix:
		p.drawAugMix(r, d)
	case TimmRandAugment:
		p.drawTimm(r, d)
	case TimmAugMix:
		p.drawTimmAugMix(r, d)
	case TimmAutoAugment:
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
func (p *Policy) entry(op augOp) *augEntry {
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
func (p *Policy) magOf(r *det.RNG, e *augEntry, bin int) float64 {
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
func (p *Policy) emit(d *drawer, e *augEntry, m float64) {
	geo := fn.Step{Fn: fn.Affine, Interp: p.interp, Fill: p.fill, FillNone: p.fillNone, F: [6]float64{0, 0, 0, 1, 0, 0}}
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
		d.emit(fn.Step{Fn: fn.Rotate, F: [6]float64{m}, Interp: p.interp, Fill: p.fill, FillNone: p.fillNone})
	case augBrightness:
		d.emit(fn.Step{Fn: fn.AdjustBrightness, F: [6]float64{1 + m}})
	case augColor:
		d.emit(fn.Step{Fn: fn.AdjustSaturation, F: [6]float64{1 + m}})
	case augContrast:
		d.emit(fn.Step{Fn: fn.AdjustContrast, F: [6]float64{1 + m}})
	case augSharpness:
		d.emit(fn.Step{Fn: fn.AdjustSharpness, F: [6]float64{1 + m}})
	case augPosterize:
		d.emit(fn.Step{Fn: fn.Posterize, I: [6]int{int(m)}})
	case augSolarize:
		d.emit(fn.Step{Fn: fn.Solarize, F: [6]float64{float64(255 * m)}})
	case augAutoContrast:
		d.emit(fn.Step{Fn: fn.Autocontrast})
	case augEqualize:
		d.emit(fn.Step{Fn: fn.Equalize})
	case augInvert:
		d.emit(fn.Step{Fn: fn.Invert})
	}
}

// drawAugMix is torchvision's AugMix.forward for one image: a Beta (as a
// two-weight Dirichlet) between the image and the mix of mixture_width
// chains, each of chain_depth (or 1..3) ops at a severity bin below
// severity.
func (p *Policy) drawAugMix(r *det.RNG, d *drawer) {
	var m [2]float64
	r.Dirichlet(p.alpha, m[:])
	var wbuf [MaxOps]float64
	ws := wbuf[:p.width]
	r.Dirichlet(p.alpha, ws)
	d.emit(fn.Step{Fn: fn.MixBegin, F: [6]float64{m[0]}})
	for _, w := range ws {
		d.emit(fn.Step{Fn: fn.MixChain, F: [6]float64{float64(w * m[1])}})
		depth := p.depth
		if depth <= 0 {
			depth = 1 + r.Intn(3)
		}
		for range depth {
			e := &p.space[r.Intn(len(p.space))]
			p.emit(d, e, p.magOf(r, e, r.Intn(p.severity)))
		}
	}
	d.emit(fn.Step{Fn: fn.MixEnd})
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
