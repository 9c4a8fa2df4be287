// Package opspec turns the wire's transform spec (stokerv1.TransformSpec)
// into the pipeline's ops, filling in torchvision's defaults where the wire
// leaves a field unset. It is the one place that knows both: the server
// compiles jobs with it, and `stoker ops` draws traces with it.
//
// Errors wrap errs.Unsupported and name the op by its position
// (through its containers) and the argument that is wrong.
package opspec

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// MaxPresetName bounds a preset's name on the wire.
const MaxPresetName = 256

// Transform compiles a TransformSpec for layout: a preset name, an op
// list, or view groups, exactly one of the three.
func Transform(spec *stokerv1.TransformSpec, layout transform.Layout) (*transform.Transform, error) {
	return TransformData(spec, layout, 0, 0)
}

// TransformData is Transform for a dataset whose images are at most w x h
// (0: not known): an op list without a max_size is bounded by them where
// its geometry needs a bound (transform.NewTransformData).
func TransformData(spec *stokerv1.TransformSpec, layout transform.Layout, w, h int) (*transform.Transform, error) {
	set := 0
	for _, has := range []bool{spec.GetPreset() != "", len(spec.GetOps()) > 0, len(spec.GetViews()) > 0} {
		if has {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%w: transform: set exactly one of preset, ops and views", errs.Unsupported)
	}
	var bound [2]int
	switch ms := spec.GetMaxSize(); {
	case len(ms) == 0:
	case len(ms) != 2:
		return nil, fmt.Errorf("%w: transform: max_size of %d values: want 2, (height, width)", errs.Unsupported, len(ms))
	case spec.GetPreset() != "":
		return nil, fmt.Errorf("%w: transform: max_size bounds the sizes of an op list's samples (or of views' op lists): not with a preset", errs.Unsupported)
	default:
		bound = [2]int{int(min(ms[0], 1<<20)), int(min(ms[1], 1<<20))}
	}
	if len(spec.GetViews()) > 0 {
		groups, err := views(spec.GetViews())
		if err != nil {
			return nil, err
		}
		return transform.NewViewsBound(layout, bound, groups...)
	}
	if spec.GetPreset() != "" {
		if err := presetName(spec.GetPreset()); err != nil {
			return nil, err
		}
		return transform.ParseTransform(spec.GetPreset(), layout)
	}
	ops, err := Ops(spec.GetOps())
	if err != nil {
		return nil, err
	}
	if bound == [2]int{} {
		return transform.NewTransformData(layout, w, h, ops...)
	}
	return transform.NewTransformBound(layout, bound, ops...)
}

// presetName refuses a preset's name over MaxPresetName.
func presetName(p string) error {
	if len(p) > MaxPresetName {
		return fmt.Errorf("%w: transform preset name %q… of %d bytes: the limit is %d (known: %s)",
			errs.Unsupported, p[:64], len(p), MaxPresetName, strings.Join(transform.PresetNames(), ", "))
	}
	return nil
}

// views converts the wire's view groups, each a one-view preset or an op
// list. Counts are bounded before anything is made of them.
func views(in []*stokerv1.ViewGroup) ([]transform.ViewGroup, error) {
	if len(in) > transform.MaxViews {
		return nil, fmt.Errorf("%w: transform: %d view groups: the limit is %d views", errs.Unsupported, len(in), transform.MaxViews)
	}
	out := make([]transform.ViewGroup, len(in))
	total := 0
	for g, vg := range in {
		where := fmt.Sprintf("view group %d", g)
		if n := vg.GetName(); n != "" {
			where += fmt.Sprintf(" (%q)", truncate(n, 64))
		}
		total += int(min(vg.GetCount(), transform.MaxViews+1))
		if total > transform.MaxViews {
			return nil, fmt.Errorf("%w: transform: %s: %d views or more: the limit is %d", errs.Unsupported, where, total, transform.MaxViews)
		}
		t := vg.GetTransform()
		out[g] = transform.ViewGroup{Name: vg.GetName(), Count: int(vg.GetCount())}
		switch {
		case vg.GetSeveralImages() && vg.GetOneImage():
			return nil, fmt.Errorf("%w: transform: %s: several_images and one_image: give one (or neither: every image)", errs.Unsupported, where)
		case vg.GetSeveralImages():
			out[g].Images = transform.SeveralImages
		case vg.GetOneImage():
			out[g].Images = transform.OneImage
		}
		switch {
		case len(t.GetViews()) > 0:
			return nil, fmt.Errorf("%w: transform: %s: views inside a view: give each group a preset or ops", errs.Unsupported, where)
		case t.GetPreset() != "" && len(t.GetOps()) > 0, t.GetPreset() == "" && len(t.GetOps()) == 0:
			return nil, fmt.Errorf("%w: transform: %s: set exactly one of preset and ops", errs.Unsupported, where)
		case t.GetPreset() != "":
			if err := presetName(t.GetPreset()); err != nil {
				return nil, err
			}
			ops, err := transform.Preset(t.GetPreset())
			if err != nil {
				return nil, fmt.Errorf("%w (%s)", err, where)
			}
			out[g].Ops = ops
		default:
			list, err := ops(t.GetOps(), where+": ", 0)
			if err != nil {
				return nil, err
			}
			out[g].Ops = list
		}
	}
	return out, nil
}

// truncate shortens a client's string for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Ops converts wire ops to pipeline ops, torchvision's defaults filled in.
func Ops(in []*stokerv1.Op) ([]opspkg.Op, error) { return ops(in, "", 0) }

// maxWireDepth bounds the containers' nesting before the pipeline sees it
// (which refuses deeper than its own, smaller, bound with a clearer error).
const maxWireDepth = 16

func ops(in []*stokerv1.Op, path string, depth int) ([]opspkg.Op, error) {
	if depth > maxWireDepth {
		return nil, fmt.Errorf("%w: transform: %s: containers nested deeper than %d", errs.Unsupported, path, maxWireDepth)
	}
	out := make([]opspkg.Op, 0, len(in))
	for i, o := range in {
		where := fmt.Sprintf("%sop %d", path, i)
		op, err := convert(o, where, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

// p is an optional probability, def when unset.
func p(v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	return *v
}

// interp maps a wire interpolation, def when unspecified.
func interp(i stokerv1.Interpolation, def transform.Interpolation, where string) (transform.Interpolation, error) {
	switch i {
	case stokerv1.Interpolation_INTERPOLATION_UNSPECIFIED:
		return def, nil
	case stokerv1.Interpolation_INTERPOLATION_NEAREST:
		return transform.InterpNearest, nil
	case stokerv1.Interpolation_INTERPOLATION_BILINEAR:
		return transform.InterpBilinear, nil
	case stokerv1.Interpolation_INTERPOLATION_BICUBIC:
		return transform.InterpBicubic, nil
	}
	return 0, fmt.Errorf("%w: transform: %s: unknown interpolation %d", errs.Unsupported, where, i)
}

// fill maps 0, 1 or 3 fill values (0: def).
func fill(v []float64, def [3]float64, where, name string) ([3]float64, error) {
	switch len(v) {
	case 0:
		return def, nil
	case 1:
		return [3]float64{v[0], v[0], v[0]}, nil
	case 3:
		return [3]float64(v), nil
	}
	return def, fmt.Errorf("%w: transform: %s: %s has %d values: want 1 or 3 (one per channel)", errs.Unsupported, where, name, len(v))
}

// maskFill sets op's fill per type from a wire op's mask_fill (nil: the
// one fill is every type's, the masks' too): torchvision's {Image: fill,
// Mask: mask_fill}, a uint8 Mask's value.
func maskFill(op *opspkg.Op, v *float64, where string) error {
	if v == nil {
		return nil
	}
	if !(*v >= 0 && *v <= 255) || *v != math.Trunc(*v) {
		return fmt.Errorf("%w: transform: %s: mask_fill %v: want an integer 0..255 (a uint8 Mask's value)", errs.Unsupported, where, *v)
	}
	op.FillTyped, op.FillMask = true, *v
	return nil
}

// rng maps a wire Range ((0, 0) when unset).
func rng(r *stokerv1.Range) [2]float64 { return [2]float64{r.GetMin(), r.GetMax()} }

func convert(o *stokerv1.Op, where string, depth int) (opspkg.Op, error) {
	bad := func(format string, a ...any) (opspkg.Op, error) {
		return opspkg.Op{}, fmt.Errorf("%w: transform: %s: %s", errs.Unsupported, where, fmt.Sprintf(format, a...))
	}
	var (
		op  opspkg.Op
		err error
	)
	switch x := o.GetOp().(type) {
	case *stokerv1.Op_RandomResizedCrop:
		r := x.RandomResizedCrop
		op = opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{int(r.GetHeight()), int(r.GetWidth())},
			Scale: [2]float64{r.GetScaleMin(), r.GetScaleMax()}, Ratio: [2]float64{r.GetRatioMin(), r.GetRatioMax()},
			NoAntialias: r.Antialias != nil && !r.GetAntialias(), RandomInterp: r.GetRandomInterpolation()}
		op.Interp, err = interp(r.GetInterpolation(), transform.InterpBilinear, where)
		if err == nil && op.RandomInterp && r.GetInterpolation() != stokerv1.Interpolation_INTERPOLATION_UNSPECIFIED {
			err = fmt.Errorf("%w: transform: %s: random_interpolation draws bilinear or bicubic: leave interpolation unset (got %s)", errs.Unsupported, where, op.Interp)
		}
	case *stokerv1.Op_Resize:
		r := x.Resize
		op = opspkg.Op{Kind: transform.OpResize, Size: [2]int{int(r.GetHeight()), int(r.GetWidth())},
			NoAntialias: r.Antialias != nil && !r.GetAntialias()}
		op.Interp, err = interp(r.GetInterpolation(), transform.InterpBilinear, where)
	case *stokerv1.Op_CenterCrop:
		op = opspkg.Op{Kind: transform.OpCenterCrop, Size: [2]int{int(x.CenterCrop.GetHeight()), int(x.CenterCrop.GetWidth())}}
	case *stokerv1.Op_RandomCrop:
		op, err = randomCrop(x.RandomCrop, where)
	case *stokerv1.Op_Pad:
		op, err = padOp(x.Pad, where)
	case *stokerv1.Op_RandomZoomOut:
		z := x.RandomZoomOut
		op = opspkg.Op{Kind: transform.OpRandomZoomOut, P: p(z.P, 0.5), SideRange: [2]float64{1, 4}}
		if z.SideRange != nil {
			op.SideRange = rng(z.SideRange)
		}
		if op.Fill, err = fill(z.GetFill(), [3]float64{}, where, "fill"); err == nil {
			err = maskFill(&op, z.MaskFill, where)
		}
	case *stokerv1.Op_ScaleJitter:
		j := x.ScaleJitter
		op = opspkg.Op{Kind: transform.OpScaleJitter, Size: [2]int{int(j.GetTargetHeight()), int(j.GetTargetWidth())},
			Scale: [2]float64{0.1, 2}, NoAntialias: j.Antialias != nil && !j.GetAntialias()}
		if j.ScaleRange != nil {
			op.Scale = rng(j.ScaleRange)
		}
		op.Interp, err = interp(j.GetInterpolation(), transform.InterpBilinear, where)
	case *stokerv1.Op_RandomShortestSize:
		r := x.RandomShortestSize
		op = opspkg.Op{Kind: transform.OpRandomShortestSize, MaxSize: int(min(r.GetMaxSize(), 1<<20)), NoAntialias: r.Antialias != nil && !r.GetAntialias()}
		for _, m := range r.GetMinSize() {
			op.Sizes = append(op.Sizes, int(min(m, 1<<20)))
		}
		op.Interp, err = interp(r.GetInterpolation(), transform.InterpBilinear, where)
	case *stokerv1.Op_RandomResize:
		r := x.RandomResize
		op = opspkg.Op{Kind: transform.OpRandomResize, Sizes: []int{int(min(r.GetMinSize(), 1<<20)), int(min(r.GetMaxSize(), 1<<20))},
			NoAntialias: r.Antialias != nil && !r.GetAntialias()}
		op.Interp, err = interp(r.GetInterpolation(), transform.InterpBilinear, where)
	case *stokerv1.Op_FixedSizeCrop:
		c := x.FixedSizeCrop
		op = opspkg.Op{Kind: transform.OpFixedSizeCrop, Size: [2]int{int(c.GetHeight()), int(c.GetWidth())}}
		err = padding(&op, nil, c.GetFill(), c.GetPaddingMode(), where)
	case *stokerv1.Op_PadIfSmaller:
		c := x.PadIfSmaller
		op = opspkg.Op{Kind: transform.OpPadIfSmaller, Size: [2]int{int(min(c.GetSize(), 1<<20)), int(min(c.GetSize(), 1<<20))}}
		if err = padding(&op, nil, c.GetFill(), "", where); err == nil {
			err = maskFill(&op, c.MaskFill, where)
		}
	case *stokerv1.Op_RandomIouCrop:
		c := x.RandomIouCrop
		op = opspkg.Op{Kind: transform.OpRandomIoUCrop, Scale: [2]float64{p(c.MinScale, 0.3), p(c.MaxScale, 1)},
			Ratio: [2]float64{p(c.MinAspectRatio, 0.5), p(c.MaxAspectRatio, 2)}, Trials: 40,
			Options: append([]float64(nil), c.GetSamplerOptions()...)}
		if len(op.Options) == 0 {
			op.Options = []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1}
		}
		if c.Trials != nil {
			op.Trials = int(min(c.GetTrials(), 1<<20))
		}
		if op.P = p(c.P, 1); !(op.P > 0 && op.P <= 1) {
			err = fmt.Errorf("%w: transform: %s: RandomIoUCrop p=%v: want 0 < p <= 1 (p=0 never crops: leave the op out)", errs.Unsupported, where, op.P)
		}
	case *stokerv1.Op_RandomPhotometricDistort:
		d := x.RandomPhotometricDistort
		op = opspkg.Op{Kind: opspkg.OpRandomPhotometricDistort, P: p(d.P, 0.5), JitterRanges: true,
			Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}
		for i, r := range []*stokerv1.Range{d.Brightness, d.Contrast, d.Saturation, d.Hue} {
			if r != nil {
				op.Jitter[i] = rng(r)
			}
		}
	case *stokerv1.Op_ConvertBoundingBoxFormat:
		op = opspkg.Op{Kind: opspkg.OpConvertBoundingBoxFormat}
		op.BoxFormat, err = targets.ParseBoxFormat(x.ConvertBoundingBoxFormat.GetFormat())
		if err != nil {
			err = fmt.Errorf("transform: %s: %w", where, err)
		}
	case *stokerv1.Op_ClampBoundingBoxes:
		op = opspkg.Op{Kind: opspkg.OpClampBoundingBoxes}
		switch m := x.ClampBoundingBoxes.GetClampingMode(); m {
		case "", "auto", "soft", "hard": // the same for unrotated boxes
		case "none":
			op.ClampNone = true
		default:
			return bad("ClampBoundingBoxes clamping_mode %q: want auto, soft, hard or none", truncate(m, 32))
		}
	case *stokerv1.Op_RandomPerspective:
		r := x.RandomPerspective
		op = opspkg.Op{Kind: transform.OpRandomPerspective, Distortion: p(r.DistortionScale, 0.5), P: p(r.P, 0.5), FillNone: r.GetFillNone()}
		if op.Interp, err = interp(r.GetInterpolation(), transform.InterpBilinear, where); err != nil {
			return op, err
		}
		if op.Fill, err = fill(r.GetFill(), [3]float64{}, where, "fill"); err != nil {
			return op, err
		}
		if op.FillNone && len(r.GetFill()) > 0 {
			return bad("set fill or fill_none, not both")
		}
		err = maskFill(&op, r.MaskFill, where)
	case *stokerv1.Op_ClampKeyPoints:
		op = opspkg.Op{Kind: opspkg.OpClampKeyPoints}
	case *stokerv1.Op_SanitizeKeyPoints:
		op = opspkg.Op{Kind: opspkg.OpSanitizeKeyPoints}
	case *stokerv1.Op_SanitizeBoundingBoxes:
		s := x.SanitizeBoundingBoxes
		op = opspkg.Op{Kind: opspkg.OpSanitizeBoundingBoxes, MinSize: p(s.MinSize, 1), MinArea: p(s.MinArea, 1)}
	case *stokerv1.Op_RandomHorizontalFlip:
		op = opspkg.Op{Kind: opspkg.OpRandomHorizontalFlip, P: p(x.RandomHorizontalFlip.P, 0.5)}
	case *stokerv1.Op_RandomVerticalFlip:
		op = opspkg.Op{Kind: opspkg.OpRandomVerticalFlip, P: p(x.RandomVerticalFlip.P, 0.5)}
	case *stokerv1.Op_ColorJitter:
		op, err = colorJitter(x.ColorJitter, where)
	case *stokerv1.Op_Normalize:
		n := x.Normalize
		if len(n.GetMean()) != 3 || len(n.GetStd()) != 3 {
			return bad("Normalize needs 3 means and 3 stds, got %d and %d", len(n.GetMean()), len(n.GetStd()))
		}
		op = opspkg.Op{Kind: opspkg.OpNormalize, Mean: [3]float64(n.GetMean()), Std: [3]float64(n.GetStd())}
	case *stokerv1.Op_Grayscale:
		if c := x.Grayscale.GetNumOutputChannels(); c != 0 && c != 3 {
			return bad("Grayscale(num_output_channels=%d): stoker's batches have 3 channels; use num_output_channels=3", c)
		}
		op = opspkg.Op{Kind: opspkg.OpGrayscale}
	case *stokerv1.Op_RandomGrayscale:
		op = opspkg.Op{Kind: opspkg.OpRandomGrayscale, P: p(x.RandomGrayscale.P, 0.1)}
	case *stokerv1.Op_GaussianBlur:
		g := x.GaussianBlur
		op = opspkg.Op{Kind: opspkg.OpGaussianBlur, KernelSize: [2]int{int(g.GetKernelX()), int(g.GetKernelY())},
			Sigma: [2]float64{g.GetSigmaMin(), g.GetSigmaMax()}}
		if op.KernelSize[1] == 0 {
			op.KernelSize[1] = op.KernelSize[0]
		}
		if op.Sigma == [2]float64{} {
			op.Sigma = [2]float64{0.1, 2.0}
		}
	case *stokerv1.Op_RandomSolarize:
		op = opspkg.Op{Kind: opspkg.OpRandomSolarize, Threshold: x.RandomSolarize.GetThreshold(), P: p(x.RandomSolarize.P, 0.5)}
	case *stokerv1.Op_RandomPosterize:
		op = opspkg.Op{Kind: opspkg.OpRandomPosterize, Bits: int(min(x.RandomPosterize.GetBits(), 1<<10)), P: p(x.RandomPosterize.P, 0.5)}
	case *stokerv1.Op_RandomInvert:
		op = opspkg.Op{Kind: opspkg.OpRandomInvert, P: p(x.RandomInvert.P, 0.5)}
	case *stokerv1.Op_RandomEqualize:
		op = opspkg.Op{Kind: opspkg.OpRandomEqualize, P: p(x.RandomEqualize.P, 0.5)}
	case *stokerv1.Op_RandomAutocontrast:
		op = opspkg.Op{Kind: opspkg.OpRandomAutocontrast, P: p(x.RandomAutocontrast.P, 0.5)}
	case *stokerv1.Op_RandomAdjustSharpness:
		s := x.RandomAdjustSharpness
		op = opspkg.Op{Kind: opspkg.OpRandomAdjustSharpness, Factor: s.GetSharpnessFactor(), P: p(s.P, 0.5)}
	case *stokerv1.Op_RandomRotation:
		op, err = rotation(x.RandomRotation, where)
	case *stokerv1.Op_RandomAffine:
		op, err = affine(x.RandomAffine, where)
	case *stokerv1.Op_RandomErasing:
		op, err = erasing(x.RandomErasing, where)
	case *stokerv1.Op_RandomApply:
		op = opspkg.Op{Kind: opspkg.OpRandomApply, P: p(x.RandomApply.P, 0.5)}
		op.Ops, err = ops(x.RandomApply.GetOps(), where+" (RandomApply) > ", depth+1)
	case *stokerv1.Op_RandomChoice:
		op = opspkg.Op{Kind: opspkg.OpRandomChoice, Probs: x.RandomChoice.GetP()}
		op.Ops, err = ops(x.RandomChoice.GetOps(), where+" (RandomChoice) > ", depth+1)
	case *stokerv1.Op_RandomOrder:
		op = opspkg.Op{Kind: opspkg.OpRandomOrder}
		op.Ops, err = ops(x.RandomOrder.GetOps(), where+" (RandomOrder) > ", depth+1)
	case *stokerv1.Op_TrivialAugmentWide, *stokerv1.Op_RandAugment, *stokerv1.Op_AutoAugment, *stokerv1.Op_AugMix, *stokerv1.Op_TimmRandAugment,
		*stokerv1.Op_TimmAutoAugment, *stokerv1.Op_TimmAugMix:
		op, err = policy(o, where)
	case *stokerv1.Op_Named:
		op, err = named(x.Named, where)
	default:
		return bad("the op is empty (a newer client's op this server does not know?)")
	}
	return op, err
}

// Bounds of a NamedOp (proto/stoker/v1/stoker.proto).
const (
	maxNamedName    = 64
	maxNamedArgs    = 32
	maxNamedNumbers = 512
	maxNamedText    = 256
)

// named reads a NamedOp through the op's schema (ops.NamedOp), its
// sizes bounded first.
func named(n *stokerv1.NamedOp, where string) (opspkg.Op, error) {
	bad := func(format string, a ...any) (opspkg.Op, error) {
		return opspkg.Op{}, fmt.Errorf("%w: transform: %s: %s", errs.Unsupported, where, fmt.Sprintf(format, a...))
	}
	if len(n.GetName()) > maxNamedName {
		return bad("a NamedOp's name of %d bytes: the limit is %d", len(n.GetName()), maxNamedName)
	}
	if len(n.GetArgs()) > maxNamedArgs {
		return bad("%s with %d arguments: the limit is %d", n.GetName(), len(n.GetArgs()), maxNamedArgs)
	}
	args := make(map[string]any, len(n.GetArgs()))
	for _, a := range n.GetArgs() {
		name := a.GetName()
		if len(name) > maxNamedName {
			return bad("%s: an argument's name of %d bytes: the limit is %d", n.GetName(), len(name), maxNamedName)
		}
		if _, dup := args[name]; dup {
			return bad("%s: argument %q given twice", n.GetName(), name)
		}
		switch v := a.GetValue().(type) {
		case *stokerv1.NamedArg_Number:
			args[name] = v.Number
		case *stokerv1.NamedArg_Numbers:
			if len(v.Numbers.GetValues()) > maxNamedNumbers {
				return bad("%s: %s has %d values: the limit is %d", n.GetName(), name, len(v.Numbers.GetValues()), maxNamedNumbers)
			}
			args[name] = append([]float64(nil), v.Numbers.GetValues()...)
		case *stokerv1.NamedArg_Text:
			if len(v.Text) > maxNamedText {
				return bad("%s: %s is a string of %d bytes: the limit is %d", n.GetName(), name, len(v.Text), maxNamedText)
			}
			args[name] = v.Text
		case *stokerv1.NamedArg_Flag:
			args[name] = v.Flag
		default:
			return bad("%s: %s has no value", n.GetName(), name)
		}
	}
	op, err := opspkg.NamedOp(n.GetName(), args)
	if err != nil {
		return op, fmt.Errorf("transform: %s: %w", where, err)
	}
	return op, nil
}

func colorJitter(c *stokerv1.ColorJitter, where string) (opspkg.Op, error) {
	op := opspkg.Op{Kind: opspkg.OpColorJitter, JitterRanges: true}
	scalars := [4]float64{c.GetBrightness(), c.GetContrast(), c.GetSaturation(), c.GetHue()}
	ranges := [4]*stokerv1.Range{c.GetBrightnessRange(), c.GetContrastRange(), c.GetSaturationRange(), c.GetHueRange()}
	names := [4]string{"brightness", "contrast", "saturation", "hue"}
	for i := range 4 {
		x := scalars[i]
		if !(x >= 0) || math.IsInf(x, 0) {
			return op, fmt.Errorf("%w: transform: %s (ColorJitter): %s %v: a single number must be finite and >= 0",
				errs.Unsupported, where, names[i], x)
		}
		switch {
		case ranges[i] != nil:
			op.Jitter[i] = rng(ranges[i])
		case i == 3:
			op.Jitter[i] = [2]float64{-x, x}
		default:
			op.Jitter[i] = [2]float64{max(1-x, 0), 1 + x}
		}
	}
	return op, nil
}

func rotation(r *stokerv1.RandomRotation, where string) (opspkg.Op, error) {
	op := opspkg.Op{Kind: transform.OpRandomRotation, Degrees: rng(r.GetDegrees()), Expand: r.GetExpand()}
	var err error
	if op.Interp, err = interp(r.GetInterpolation(), transform.InterpNearest, where); err != nil {
		return op, err
	}
	if op.Fill, err = fill(r.GetFill(), [3]float64{}, where, "fill"); err != nil {
		return op, err
	}
	if op.FillNone = r.GetFillNone(); op.FillNone && len(r.GetFill()) > 0 {
		return op, fmt.Errorf("%w: transform: %s: set fill or fill_none, not both", errs.Unsupported, where)
	}
	if err = maskFill(&op, r.MaskFill, where); err != nil {
		return op, err
	}
	op.Center, op.HasCenter, err = center(r.GetCenter(), where)
	return op, err
}

func center(v []float64, where string) ([2]float64, bool, error) {
	switch len(v) {
	case 0:
		return [2]float64{}, false, nil
	case 2:
		return [2]float64(v), true, nil
	}
	return [2]float64{}, false, fmt.Errorf("%w: transform: %s: center has %d values: want none or (x, y)", errs.Unsupported, where, len(v))
}

func affine(a *stokerv1.RandomAffine, where string) (opspkg.Op, error) {
	op := opspkg.Op{Kind: transform.OpRandomAffine, Degrees: rng(a.GetDegrees()), Scale: rng(a.GetScale())}
	var err error
	if op.Interp, err = interp(a.GetInterpolation(), transform.InterpNearest, where); err != nil {
		return op, err
	}
	if op.Fill, err = fill(a.GetFill(), [3]float64{}, where, "fill"); err != nil {
		return op, err
	}
	if op.FillNone = a.GetFillNone(); op.FillNone && len(a.GetFill()) > 0 {
		return op, fmt.Errorf("%w: transform: %s: set fill or fill_none, not both", errs.Unsupported, where)
	}
	if err = maskFill(&op, a.MaskFill, where); err != nil {
		return op, err
	}
	if op.Center, op.HasCenter, err = center(a.GetCenter(), where); err != nil {
		return op, err
	}
	switch t := a.GetTranslate(); len(t) {
	case 0:
	case 2:
		op.Translate, op.HasTranslate = [2]float64(t), true
	default:
		return op, fmt.Errorf("%w: transform: %s: translate has %d values: want none or (max_dx, max_dy)", errs.Unsupported, where, len(t))
	}
	switch s := a.GetShear(); len(s) {
	case 0:
	case 2:
		op.HasShear = true
		copy(op.Shear[:], s)
	case 4:
		op.HasShear, op.ShearY = true, true
		copy(op.Shear[:], s)
	default:
		return op, fmt.Errorf("%w: transform: %s: shear has %d values: want none, 2 or 4", errs.Unsupported, where, len(s))
	}
	return op, nil
}

func erasing(e *stokerv1.RandomErasing, where string) (opspkg.Op, error) {
	op := opspkg.Op{Kind: opspkg.OpRandomErasing, P: p(e.P, 0.5), Scale: rng(e.GetScale()), Ratio: rng(e.GetRatio()),
		RandomValue: e.GetRandomValue()}
	if e.Scale == nil {
		op.Scale = [2]float64{0.02, 0.33}
	}
	if e.Ratio == nil {
		op.Ratio = [2]float64{0.3, 3.3}
	}
	var err error
	if op.Value, err = fill(e.GetValue(), [3]float64{}, where, "value"); err != nil {
		return op, err
	}
	if op.RandomValue && len(e.GetValue()) > 0 {
		return op, fmt.Errorf("%w: transform: %s: set value or random_value, not both", errs.Unsupported, where)
	}
	m, s := e.GetNoiseMean(), e.GetNoiseStd()
	if len(m) != len(s) || (len(m) != 0 && len(m) != 3) {
		return op, fmt.Errorf("%w: transform: %s: noise_mean and noise_std: want 3 values each (or none: ImageNet's), got %d and %d",
			errs.Unsupported, where, len(m), len(s))
	}
	for i := range m {
		if !(s[i] > 0 && s[i] < 1e3 && math.Abs(m[i]) < 1e3) {
			return op, fmt.Errorf("%w: transform: %s: noise_mean %v and noise_std %v: want finite, std > 0", errs.Unsupported, where, m, s)
		}
	}
	if len(m) == 3 {
		op.Mean, op.Std = [3]float64(m), [3]float64(s)
	}
	if e.GetRandomColor() && !op.RandomValue {
		return op, fmt.Errorf("%w: transform: %s: random_color (one random colour per box) needs random_value", errs.Unsupported, where)
	}
	op.RandomColor = e.GetRandomColor()
	lo, hi := max(e.GetMinCount(), 1), e.GetMaxCount()
	if hi == 0 {
		hi = lo
	}
	if lo > hi || hi > opspkg.MaxEraseCount {
		return op, fmt.Errorf("%w: transform: %s: min_count %d, max_count %d: want 1 <= min_count <= max_count <= %d (0: 1, and max_count 0: min_count)",
			errs.Unsupported, where, e.GetMinCount(), e.GetMaxCount(), opspkg.MaxEraseCount)
	}
	op.MinCount, op.MaxCount = int(lo), int(hi)
	return op, nil
}

func policy(o *stokerv1.Op, where string) (opspkg.Op, error) {
	var (
		op       opspkg.Op
		in       stokerv1.Interpolation
		fillV    []float64
		defInt   = transform.InterpNearest
		defFill  [3]float64
		bins     uint32
		numBins  = func(b uint32) int { return int(min(b, 1<<20)) }
		wireName string
	)
	switch x := o.GetOp().(type) {
	case *stokerv1.Op_TrivialAugmentWide:
		t := x.TrivialAugmentWide
		op = opspkg.Op{Kind: opspkg.OpTrivialAugmentWide}
		bins, in, fillV, wireName = t.GetNumMagnitudeBins(), t.GetInterpolation(), t.GetFill(), "TrivialAugmentWide"
		if bins == 0 {
			bins = 31
		}
		op.Bins = numBins(bins)
	case *stokerv1.Op_RandAugment:
		r := x.RandAugment
		op = opspkg.Op{Kind: opspkg.OpRandAugment, NumOps: 2, Magnitude: 9}
		if r.NumOps != nil {
			op.NumOps = int(min(r.GetNumOps(), 1<<20))
		}
		if r.Magnitude != nil {
			op.Magnitude = int(min(r.GetMagnitude(), 1<<20))
		}
		bins, in, fillV, wireName = r.GetNumMagnitudeBins(), r.GetInterpolation(), r.GetFill(), "RandAugment"
		if bins == 0 {
			bins = 31
		}
		op.Bins = numBins(bins)
	case *stokerv1.Op_AutoAugment:
		a := x.AutoAugment
		op = opspkg.Op{Kind: opspkg.OpAutoAugment, Policy: a.GetPolicy()}
		if op.Policy == "" {
			op.Policy = "imagenet"
		}
		in, fillV, wireName = a.GetInterpolation(), a.GetFill(), "AutoAugment"
	case *stokerv1.Op_AugMix:
		a := x.AugMix
		op = opspkg.Op{Kind: opspkg.OpAugMix, Severity: int(min(a.GetSeverity(), 1<<20)), MixtureWidth: int(min(a.GetMixtureWidth(), 1<<20)),
			ChainDepth: -1, Alpha: a.GetAlpha(), PartialOps: a.AllOps != nil && !a.GetAllOps()}
		if op.Severity == 0 {
			op.Severity = 3
		}
		if op.MixtureWidth == 0 {
			op.MixtureWidth = 3
		}
		if a.ChainDepth != nil && a.GetChainDepth() > 0 {
			op.ChainDepth = int(a.GetChainDepth())
		} else if a.ChainDepth != nil && a.GetChainDepth() == 0 {
			return op, fmt.Errorf("%w: transform: %s: AugMix chain_depth 0: want -1 (random 1..3) or >= 1", errs.Unsupported, where)
		}
		if op.Alpha == 0 {
			op.Alpha = 1
		}
		in, fillV, wireName, defInt = a.GetInterpolation(), a.GetFill(), "AugMix", transform.InterpBilinear
	case *stokerv1.Op_TimmRandAugment:
		t := x.TimmRandAugment
		op = opspkg.Op{Kind: opspkg.OpTimmRandAugment, Policy: t.GetConfig()}
		in, fillV, wireName = t.GetInterpolation(), t.GetFill(), "TimmRandAugment"
		defFill = [3]float64{124, 116, 104}
		if in == stokerv1.Interpolation_INTERPOLATION_UNSPECIFIED {
			op.RandomInterp = true
		}
	case *stokerv1.Op_TimmAutoAugment:
		t := x.TimmAutoAugment
		op = opspkg.Op{Kind: opspkg.OpTimmAutoAugment, Policy: t.GetConfig()}
		in, fillV, wireName = t.GetInterpolation(), t.GetFill(), "TimmAutoAugment"
		defFill = [3]float64{124, 116, 104}
		if in == stokerv1.Interpolation_INTERPOLATION_UNSPECIFIED {
			op.RandomInterp = true
		}
	case *stokerv1.Op_TimmAugMix:
		t := x.TimmAugMix
		op = opspkg.Op{Kind: opspkg.OpTimmAugMix, Policy: t.GetConfig()}
		in, fillV, wireName = t.GetInterpolation(), t.GetFill(), "TimmAugMix"
		defFill = [3]float64{124, 116, 104}
		if in == stokerv1.Interpolation_INTERPOLATION_UNSPECIFIED {
			op.RandomInterp = true
		}
	}
	var err error
	if op.Interp, err = interp(in, defInt, where); err != nil {
		return op, err
	}
	if op.Fill, err = fill(fillV, defFill, where+" ("+wireName+")", "fill"); err != nil {
		return op, err
	}
	// torchvision's policies' fill=None; timm's default is its mean colour.
	op.FillNone = len(fillV) == 0 && op.Kind != opspkg.OpTimmRandAugment && op.Kind != opspkg.OpTimmAutoAugment &&
		op.Kind != opspkg.OpTimmAugMix
	return op, nil
}

// randomCrop is a wire RandomCrop: torchvision's padding forms (1, 2 or 4
// values) as (left, top, right, bottom), its fill (1 or 3 values), and
// the constant padding mode, the one stoker has.
func randomCrop(r *stokerv1.RandomCrop, where string) (opspkg.Op, error) {
	op := opspkg.Op{Kind: transform.OpRandomCrop, Size: [2]int{int(r.GetHeight()), int(r.GetWidth())}, PadIfNeeded: r.GetPadIfNeeded()}
	if err := padding(&op, r.GetPadding(), r.GetFill(), r.GetPaddingMode(), where); err != nil {
		return op, err
	}
	return op, maskFill(&op, r.MaskFill, where)
}

// padOp is a wire Pad: RandomCrop's padding forms, fill and mode, the
// padding required (torchvision's Pad has no default).
func padOp(r *stokerv1.Pad, where string) (opspkg.Op, error) {
	op := opspkg.Op{Kind: transform.OpPad}
	if len(r.GetPadding()) == 0 {
		return op, fmt.Errorf("%w: %s: Pad without padding: want 1, 2 or 4 values", errs.Unsupported, where)
	}
	if err := padding(&op, r.GetPadding(), r.GetFill(), r.GetPaddingMode(), where); err != nil {
		return op, err
	}
	return op, maskFill(&op, r.MaskFill, where)
}

// padding sets op's Padding (torchvision's pad forms, as (left, top,
// right, bottom)) and Fill, refusing a padding mode other than constant.
func padding(op *opspkg.Op, pad []uint32, fill []float64, mode, where string) error {
	if mode != "" && mode != "constant" {
		return fmt.Errorf("%w: %s: %s padding_mode %q: stoker pads with a constant fill only (padding_mode=\"constant\")", errs.Unsupported, where, op.Kind, truncate(mode, 32))
	}
	switch len(pad) {
	case 0:
	case 1:
		op.Padding = [4]int{int(pad[0]), int(pad[0]), int(pad[0]), int(pad[0])}
	case 2:
		op.Padding = [4]int{int(pad[0]), int(pad[1]), int(pad[0]), int(pad[1])}
	case 4:
		op.Padding = [4]int{int(pad[0]), int(pad[1]), int(pad[2]), int(pad[3])}
	default:
		return fmt.Errorf("%w: %s: %s padding of %d values: want 1, 2 or 4", errs.Unsupported, where, op.Kind, len(pad))
	}
	switch len(fill) {
	case 0:
	case 1:
		op.Fill = [3]float64{fill[0], fill[0], fill[0]}
	case 3:
		op.Fill = [3]float64{fill[0], fill[1], fill[2]}
	default:
		return fmt.Errorf("%w: %s: %s fill of %d values: want 1 or 3", errs.Unsupported, where, op.Kind, len(fill))
	}
	return nil
}
