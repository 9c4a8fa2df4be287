// Package testops holds the op lists the pipeline's tests and
// pipeline/transform's external tests (package transform_test) share: a
// recipe of every drawing op, torchvision's policies, the large-scale
// jitter, the YOLO family by name. One copy, so a
// test that decodes (the root's) and one that draws without decoding
// (pipeline/transform's) hold the same ops. It imports
// pipeline/transform, so that room's internal tests cannot use it.
package testops

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// Recipe is a transform with one op of every kind that draws, in
// containers and policies too.
func Recipe() []optab.Op {
	return []optab.Op{
		{Kind: transform.OpRandomResizedCrop, Size: [2]int{32, 24}, Args: &transform.RRCArgs{Resampling: optab.Resampling{Interp: transform.InterpBicubic}}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpRandomApply, P: 0.8, Ops: []optab.Op{optab.ColorJitterOp(0.4, 0.4, 0.2, 0.1)}},
		{Kind: optab.OpRandomGrayscale, P: 0.2},
		{Kind: optab.OpRandomChoice, Ops: []optab.Op{
			{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{5, 5}, Sigma: [2]float64{0.1, 2}}},
			{Kind: optab.OpRandomSolarize, P: 1, Args: &optab.SolarizeArgs{Threshold: 128}},
			{Kind: optab.OpGrayscale},
		}},
		{Kind: optab.OpRandomOrder, Ops: []optab.Op{{Kind: optab.OpRandomInvert, P: 0.5}, {Kind: optab.OpRandomVerticalFlip, P: 0.5}}},
		{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-10, 10}, Filling: optab.Filling{Fill: [3]float64{1, 2, 3}}, Resampling: optab.Resampling{Interp: transform.InterpBilinear}}},
		{Kind: transform.OpRandomAffine, Args: &transform.AffineArgs{Degrees: [2]float64{-5, 5}, HasTranslate: true, Translate: [2]float64{0.1, 0.1}, Scale: [2]float64{0.9, 1.1}, HasShear: true, ShearY: true, Shear: [4]float64{-5, 5, -3, 3}, HasCenter: true, Center: [2]float64{3, 4}}},
		{Kind: optab.OpTrivialAugmentWide, Args: &optab.TrivialAugmentWideArgs{Bins: 31}},
		{Kind: optab.OpRandAugment, Args: &optab.RandAugmentArgs{NumOps: 2, Magnitude: 9, Bins: 31}},
		{Kind: optab.OpAutoAugment, Args: &optab.AutoAugmentArgs{Policy: "imagenet"}},
		{Kind: optab.OpAugMix, Args: &optab.AugMixArgs{Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1}},
		{Kind: optab.OpTimmRandAugment, Args: &optab.TimmArgs{Config: "rand-m9-mstd0.5-inc1", RandomInterp: true, Filling: optab.Filling{Fill: [3]float64{124, 116, 104}}}},
		{Kind: optab.OpRandomErasing, P: 0.5, Args: &optab.ErasingArgs{Scale: [2]float64{0.02, 0.33}, Ratio: [2]float64{0.3, 3.3}, RandomValue: true}},
		{Kind: optab.OpTimmAutoAugment, Args: &optab.TimmArgs{Config: "v0r-mstd0.5", Filling: optab.Filling{Fill: [3]float64{124, 116, 104}}, Resampling: optab.Resampling{Interp: transform.InterpBilinear}}},
		{Kind: optab.OpTimmAugMix, Args: &optab.TimmArgs{Config: "augmix-m5-w2-d1", RandomInterp: true, Filling: optab.Filling{Fill: [3]float64{124, 116, 104}}}},
		{Kind: optab.OpTimmAugMix, Args: &optab.TimmArgs{Config: "augmix-m3-w2-d1-b1", Filling: optab.Filling{Fill: [3]float64{124, 116, 104}}, Resampling: optab.Resampling{Interp: transform.InterpBilinear}}},
		{Kind: optab.OpRandomErasing, P: 0.5, Args: &optab.ErasingArgs{Scale: [2]float64{0.02, 0.33}, Ratio: [2]float64{0.3, 3.3}, RandomValue: true, RandomColor: true, MinCount: 1, MaxCount: 3}},
		{Kind: optab.OpRandomPosterize, P: 0.5, Args: &optab.PosterizeArgs{Bits: 3}},
		{Kind: optab.OpRandomEqualize, P: 0.5}, {Kind: optab.OpRandomAutocontrast, P: 0.5},
		{Kind: optab.OpRandomAdjustSharpness, P: 0.5, Args: &optab.SharpnessArgs{Factor: 2}},
		{Kind: transform.OpRandomPerspective, P: 0.5, Args: &transform.PerspectiveArgs{Distortion: 0.5, Filling: optab.Filling{Fill: [3]float64{1, 2, 3}}, Resampling: optab.Resampling{Interp: transform.InterpBilinear}}},
		{Kind: transform.OpYOLORandomHSV, Args: &transform.YOLOHSVArgs{HGain: 0.5, SGain: 0.5, VGain: 0.5}},
		{Kind: transform.OpYOLORandomFlip, P: 0.5, Args: &transform.YOLOFlipArgs{Direction: "horizontal", FlipIdx: []int{1, 0, 2}}},
		{Kind: transform.OpYOLORandomFlip, P: 0.5, Args: &transform.YOLOFlipArgs{Direction: "vertical"}},
		{Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1.5, MinArea: 2}},
		{Kind: optab.OpConvertBoundingBoxFormat, Args: &optab.BoxFormatArgs{Format: targets.BoxCXCYWH}},
		{Kind: optab.OpClampBoundingBoxes}, {Kind: optab.OpClampKeyPoints}, {Kind: optab.OpSanitizeKeyPoints},
		{Kind: optab.OpRandomPhotometricDistort, P: 0.5, Args: &optab.PhotometricDistortArgs{Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}},
		{Kind: optab.OpNormalize, Args: &optab.NormalizeArgs{Mean: fn.ImagenetMean, Std: fn.ImagenetStd}},
	}
}

// TVPolicies are torchvision's policies at their defaults (and the
// reference recipes' settings), after a 224 px RandomResizedCrop.
func TVPolicies() map[string]optab.Op {
	return map[string]optab.Op{
		"AugMix":             {Kind: optab.OpAugMix, Args: &optab.AugMixArgs{Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1}},
		"TrivialAugmentWide": {Kind: optab.OpTrivialAugmentWide, Args: &optab.TrivialAugmentWideArgs{Bins: 31, Resampling: optab.Resampling{Interp: transform.InterpNearest}}},
		"RandAugment":        {Kind: optab.OpRandAugment, Args: &optab.RandAugmentArgs{NumOps: 2, Magnitude: 9, Bins: 31, Resampling: optab.Resampling{Interp: transform.InterpNearest}}},
		"AutoAugment":        {Kind: optab.OpAutoAugment, Args: &optab.AutoAugmentArgs{Policy: "imagenet", Resampling: optab.Resampling{Interp: transform.InterpNearest}}},
	}
}

// LSJ is the large-scale-jitter geometry on a small target (so that
// both the crop and the padding happen), with a flip.
func LSJ(target, crop int, fill [3]float64) []optab.Op {
	return []optab.Op{
		{Kind: transform.OpScaleJitter, Size: [2]int{target, target}, Args: &transform.ScaleJitterArgs{Scale: [2]float64{0.1, 2}}},
		{Kind: transform.OpFixedSizeCrop, Size: [2]int{crop, crop}, Args: &transform.FixedSizeCropArgs{Filling: optab.Filling{Fill: fill}}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
	}
}

// Seg is the segmentation references' geometry (RandomResize of the
// shorter side in [lo, hi), a flip, PadIfSmaller(crop) with the fill for
// the pixels and 255 for the masks, RandomCrop(crop)) on sizes where both
// the crop and the padding happen.
func Seg(lo, hi, crop int, fill [3]float64) []optab.Op {
	return []optab.Op{
		{Kind: transform.OpRandomResize, Args: &transform.RandomResizeArgs{MinSize: lo, MaxSize: hi}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: transform.OpPadIfSmaller, Size: [2]int{crop, crop}, Args: &transform.PadIfSmallerArgs{Filling: optab.Filling{Fill: fill, FillTyped: true, FillMask: 255}}},
		{Kind: transform.OpRandomCrop, Size: [2]int{crop, crop}},
	}
}

// Named is ops given as a client sends them, by name and arguments
// (name, args, name, args, ...: NamedOp, the defaults filled in).
func Named(t testing.TB, specs ...any) []optab.Op {
	t.Helper()
	var ops []optab.Op
	for i := 0; i < len(specs); i += 2 {
		op, err := optab.NamedOp(specs[i].(string), specs[i+1].(map[string]any))
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	return ops
}

// Letterbox is the yolo-letterbox recipe's ops, named as a client sends
// them.
func Letterbox(t testing.TB) []optab.Op {
	return Named(t, "YOLOLoadImage", map[string]any{}, "YOLOLetterBox", map[string]any{"new_shape": 640.0, "scaleup": false},
		"YOLORandomPerspective", map[string]any{"translate": 0.1, "scale": 0.5, "degrees": 3.0, "shear": 2.0},
		"YOLORandomHSV", map[string]any{"hgain": 0.015, "sgain": 0.7, "vgain": 0.4},
		"YOLORandomFlip", map[string]any{"p": 0.5})
}

// MustTransform is NewTransform's Transform, or t's end.
func MustTransform(t testing.TB, layout transform.Layout, ops ...optab.Op) *transform.Transform {
	t.Helper()
	return testkit.Must[*transform.Transform](t)(transform.NewTransform(layout, ops...))
}

// GeomPlan is the geometry Transform.Plan draws for view 0 of the sample
// of key k of a w x h image, its targets not known, with Exact false:
// a test that decodes with it may take the DCT-scaled path.
func GeomPlan(tr *transform.Transform, w, h int, k det.Key) (transform.SamplePlan, error) {
	var p transform.Plan
	if err := tr.Plan(&p, w, h, k, transform.BoxSource{}); err != nil {
		return transform.SamplePlan{}, err
	}
	g := p.Views[0].Geom
	g.Exact = false
	return g, nil
}
