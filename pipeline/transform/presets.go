package transform

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// Presets by name: each documented op by op, with its source recipe, in
// docs/transforms.md. Ops that torchvision's recipes run after Normalize
// (RandomErasing) erase uint8 pixels here: value 0 after Normalize is the
// mean colour (124, 116, 104) before it.
// A family whose preset runs its own ops registers it in its file
// (addPreset): the YOLO family's "yolo" in op_mosaic.go.
var presets = map[string][]optab.Op{
	"imagenet-train": {
		{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
	},
	"imagenet-eval": {
		{Kind: OpResize, Size: [2]int{256, 0}},
		{Kind: OpCenterCrop, Size: [2]int{224, 224}},
	},
	// torchvision's ResNet-50 "v2" recipe (references/classification,
	// --train-crop-size 176 --auto-augment ta_wide --random-erase 0.1).
	"tv-resnet50-v2": {
		{Kind: OpRandomResizedCrop, Size: [2]int{176, 176}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpTrivialAugmentWide, Args: &optab.TrivialAugmentWideArgs{Bins: 31, Filling: optab.Filling{FillNone: true}, Resampling: optab.Resampling{Interp: InterpBilinear}}},
		{Kind: optab.OpRandomErasing, P: 0.1, Args: &optab.ErasingArgs{Scale: [2]float64{0.02, 0.33}, Ratio: [2]float64{0.3, 3.3}, Value: meanColour}},
	},
	// DeiT (timm's create_transform with --aa rand-m9-mstd0.5-inc1
	// --reprob 0.25 --remode pixel, bicubic).
	"deit": {
		{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}, Args: &RRCArgs{Resampling: optab.Resampling{Interp: InterpBicubic}}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpTimmRandAugment, Args: &optab.TimmArgs{Config: "rand-m9-mstd0.5-inc1", Filling: optab.Filling{Fill: meanColour}, Resampling: optab.Resampling{Interp: InterpBicubic}}},
		{Kind: optab.OpRandomErasing, P: 0.25, Args: &optab.ErasingArgs{Scale: [2]float64{0.02, 1.0 / 3}, Ratio: [2]float64{0.3, 1 / 0.3}, RandomValue: true, Mean: fn.ImagenetMean, Std: fn.ImagenetStd}},
	},
	// SimCLR's ImageNet augmentation (Chen et al. 2020, appendix A), one
	// view: s = 1, blur kernel 10% of the side. The preset "simclr" is two
	// of these views (below).
	"simclr-view": {
		{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpRandomApply, P: 0.8, Ops: []optab.Op{optab.ColorJitterOp(0.8, 0.8, 0.8, 0.2)}},
		{Kind: optab.OpRandomGrayscale, P: 0.2},
		{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{23, 23}, Sigma: [2]float64{0.1, 2.0}}}}},
	},
	// DINO's first global crop (main_dino.py DataAugmentationDINO,
	// global_crops_scale (0.4, 1)): always blurred.
	"dino-global": {
		{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}, Args: &RRCArgs{Scale: [2]float64{0.4, 1}, Resampling: optab.Resampling{Interp: InterpBicubic}}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpRandomApply, P: 0.8, Ops: []optab.Op{optab.ColorJitterOp(0.4, 0.4, 0.2, 0.1)}},
		{Kind: optab.OpRandomGrayscale, P: 0.2},
		{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{23, 23}, Sigma: [2]float64{0.1, 2.0}}},
	},
	// DINO's local crops (local_crops_scale (0.05, 0.4), 96 px).
	"dino-local": {
		{Kind: OpRandomResizedCrop, Size: [2]int{96, 96}, Args: &RRCArgs{Scale: [2]float64{0.05, 0.4}, Resampling: optab.Resampling{Interp: InterpBicubic}}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpRandomApply, P: 0.8, Ops: []optab.Op{optab.ColorJitterOp(0.4, 0.4, 0.2, 0.1)}},
		{Kind: optab.OpRandomGrayscale, P: 0.2},
		{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{9, 9}, Sigma: [2]float64{0.1, 2.0}}}}},
	},
	// open_clip's training transform (image_transform, is_train=True).
	"clip": {
		{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}, Args: &RRCArgs{Scale: [2]float64{0.9, 1}, Resampling: optab.Resampling{Interp: InterpBicubic}}},
	},
	// The DETR family's (RT-DETR v2, D-FINE, DEIM) before its stop_epoch,
	// with torchvision.transforms.v2's defaults: a job with targets only
	// (RandomIoUCrop draws against the boxes). Its stop_epoch is the
	// job's (JobSpec.stop_epoch: WithStopEpoch, D-FINE's three ops off
	// from it on; D-FINE's configs stop at 72, its S and M at 120): the
	// preset alone never stops. RandomIoUCrop with p=0.8, as their
	// dataloader.yml write it (their RandomIoUCrop's own p).
	"detr": {
		{Kind: optab.OpRandomPhotometricDistort, P: 0.5, Args: &optab.PhotometricDistortArgs{Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}},
		{Kind: OpRandomZoomOut, P: 0.5, Args: &ZoomOutArgs{SideRange: [2]float64{1, 4}}},
		{Kind: OpRandomIoUCrop, P: 0.8, Args: &IoUCropArgs{Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.5, 2}, Options: []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1}, Trials: 40}},
		{Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: OpResize, Size: [2]int{640, 640}},
		{Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}},
	},
	// torchvision's detection references' "ssdlite" recipe (SSDlite320's
	// DetectionPresetTrain: RandomIoUCrop, the flip, and the
	// SanitizeBoundingBoxes() their v2 pipeline ends with), then the
	// model's own resize to 320x320 (its GeneralizedRCNNTransform's
	// fixed_size: bilinear, no antialias), made here so that a batch has
	// one size (the model's resize is then of an image of its size already,
	// which leaves it): a job with targets only.
	"ssdlite": {
		{Kind: OpRandomIoUCrop, Args: &IoUCropArgs{Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.5, 2}, Options: []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1}, Trials: 40}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}},
		{Kind: OpResize, Size: [2]int{320, 320}, Args: &ResizeArgs{Resampling: optab.Resampling{NoAntialias: true}}},
	},
	// Large-scale jitter (the Copy-Paste paper's; torchvision's detection
	// references' "lsj", for Mask R-CNN): ScaleJitter to 1024x1024 at
	// scale_range (0.1, 2), antialiased, FixedSizeCrop(1024) padded with
	// their fill, the mean (123, 117, 104), the flip, and the
	// SanitizeBoundingBoxes() their v2 pipeline ends with: a job with
	// targets only.
	"lsj": {
		{Kind: OpScaleJitter, Size: [2]int{1024, 1024}, Args: &ScaleJitterArgs{Scale: [2]float64{0.1, 2}}},
		{Kind: OpFixedSizeCrop, Size: [2]int{1024, 1024}, Args: &FixedSizeCropArgs{optab.Filling{Fill: [3]float64{123, 117, 104}}}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}},
	},
	// torchvision's semantic segmentation references' training recipe
	// (SegmentationPresetTrain(base_size=520, crop_size=480, use_v2=True),
	// their VOC and COCO defaults): RandomResize(260, 1040), the flip,
	// their PadIfSmaller(480) with 0 for the pixels and 255 (the ignore
	// index) for masks, RandomCrop(480); uint8, as the other presets:
	// their ToDtype and Normalize (ImageNet's) are the trainer's, on the
	// GPU (stoker.normalize), as from_torchvision leaves them.
	"segref": {
		{Kind: OpRandomResize, Args: &RandomResizeArgs{MinSize: 260, MaxSize: 1040}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: OpPadIfSmaller, Size: [2]int{480, 480}, Args: &PadIfSmallerArgs{optab.Filling{FillTyped: true, FillMask: 255}}},
		{Kind: OpRandomCrop, Size: [2]int{480, 480}},
	},
	// torchvision's detection references' "multiscale" recipe (Faster
	// R-CNN's and the other R-CNNs' multi-scale training):
	// RandomShortestSize(min_size=(480, 512, ..., 800), max_size=1333),
	// the flip, and the SanitizeBoundingBoxes() their v2 pipeline ends
	// with: per-sample sizes (each batch padded to its largest sample), a
	// job with targets only.
	"frcnn": {
		{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800}, MaxSize: 1333}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}},
	},
	// ultralytics' training transforms of its close_mosaic epochs (its
	// multi-image ops off) as its releases before 8.1 made them, at its
	// default hyperparameters: load_image to 640, LetterBox(640,
	// scaleup=False) (RandomPerspective's pre_transform then), RandomPerspective
	// (translate 0.1, scale 0.5), RandomHSV(0.015, 0.7, 0.4), RandomFlip
	// horizontal 0.5 (op_yolo.go). 8.4.190's warps the loaded image to 640x640
	// instead, without a LetterBox: YOLORandomPerspective(size=640) after
	// YOLOLoadImage (docs/detection.md).
	"yolo-letterbox": {
		{Kind: OpYOLOLoadImage, Args: &YOLOLoadImageArgs{ImgSz: 640}},
		{Kind: OpYOLOLetterBox, Args: &YOLOLetterBoxArgs{NewShape: [2]int{640, 640}, Center: true, Stride: 32}},
		{Kind: OpYOLORandomPerspective, Args: &YOLOPerspectiveArgs{Translate: 0.1, Scale: 0.5}},
		{Kind: OpYOLORandomHSV, Args: &YOLOHSVArgs{HGain: 0.015, SGain: 0.7, VGain: 0.4}},
		{Kind: OpYOLORandomFlip, P: 0.5, Args: &YOLOFlipArgs{Direction: "horizontal"}},
	},
}

// addPreset registers a family's preset name (in its file's init).
func addPreset(name string, ops []optab.Op) {
	if _, dup := presets[name]; dup {
		panic("transform: preset " + name + " defined twice")
	}
	presets[name] = ops
}

// meanColour is ImageNet's mean as uint8 pixels: what torchvision's
// RandomErasing(value=0) after Normalize writes, and timm's img_mean fill.
var meanColour = [3]float64{124, 116, 104}

// PresetNames lists the named presets, sorted: one-view presets and
// presets of several views (ViewPreset).
func PresetNames() []string {
	names := make([]string, 0, len(presets)+len(viewPresets))
	for n := range presets {
		names = append(names, n)
	}
	for n := range viewPresets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns the op list of a named one-view preset.
func Preset(name string) ([]optab.Op, error) {
	ops, ok := presets[name]
	if !ok {
		if _, views := viewPresets[name]; views {
			return nil, fmt.Errorf("%w: transform preset %q makes several views: it is not one op list (ViewPreset)", errs.Unsupported, name)
		}
		return nil, fmt.Errorf("%w: unknown transform preset %q (known: %s)", errs.Unsupported, name, strings.Join(PresetNames(), ", "))
	}
	return cloneOps(ops), nil
}

// cloneOps copies ops deeply (containers' Ops, and each op's typed
// arguments, too).
func cloneOps(ops []optab.Op) []optab.Op {
	out := append([]optab.Op(nil), ops...)
	for i := range out {
		out[i].Args = optab.CloneArgs(out[i].Args)
		out[i].Ops = cloneOps(out[i].Ops)
	}
	return out
}

// ParseTransform returns a preset's transform (of several views for a
// ViewPreset's name).
func ParseTransform(preset string, layout Layout) (*Transform, error) {
	if groups, ok := ViewPreset(preset); ok {
		return NewViews(layout, groups...)
	}
	ops, err := Preset(preset)
	if err != nil {
		return nil, err
	}
	return NewTransform(layout, ops...)
}

// Presets of several views, for self-supervised recipes: each documented
// view by view, with its source, in docs/transforms.md. Their views' op
// lists are the one-view presets' where a recipe's view is one.
var viewPresets = map[string][]ViewGroup{
	// SimCLR (Chen et al. 2020): two views of every image, each its own
	// draw of the one-view recipe.
	"simclr": {{Count: 2, Ops: presets["simclr-view"]}},
	// DINO (Caron et al. 2021, main_dino.py DataAugmentationDINO with its
	// defaults): global crop 1 always blurred; global crop 2 blurred with
	// p 0.1 and solarized with p 0.2; 8 local crops at 96 px, blurred with
	// p 0.5. PIL's blur radius is torchvision's sigma (kernel 23 for the
	// global crops, 9 for the local ones, as dino-global and dino-local).
	"dino": {
		{Name: "global", Count: 1, Ops: presets["dino-global"]},
		{Name: "global", Count: 1, Ops: dinoGlobal2},
		{Name: "local", Count: 8, Ops: presets["dino-local"]},
	},
	// DINOv2 (Oquab et al. 2023, dinov2/data/augmentations.py with
	// ssl_default_config.yaml: global crops scale (0.32, 1) at 224, 8
	// local crops scale (0.05, 0.32) at 96, bicubic). Its blurs are its
	// GaussianBlur(p) subclass of RandomApply, which applies a 9-px
	// torchvision GaussianBlur with probability 1 - p: as released, global
	// crop 1 (p=1.0) is never blurred, global crop 2 (p=0.1) is blurred
	// with p 0.9, and the local crops (p=0.5) with p 0.5. This preset
	// keeps that released behaviour, which DINOv2's checkpoints were
	// trained with (DINOv3 fixed it).
	"dinov2": {
		{Name: "global", Count: 1, Ops: dinov2Crop(224, 0.32, 1, nil)},
		{Name: "global", Count: 1, Ops: dinov2Crop(224, 0.32, 1, []optab.Op{dinov2Blur(0.9), {Kind: optab.OpRandomSolarize, P: 0.2, Args: &optab.SolarizeArgs{Threshold: 128}}})},
		{Name: "local", Count: 8, Ops: dinov2Crop(96, 0.05, 0.32, []optab.Op{dinov2Blur(0.5)})},
	},
}

// dinoGlobal2 is DINO's second global crop: dino-global with its blur
// applied with p 0.1, then RandomSolarize(128, p 0.2).
var dinoGlobal2 = append(cloneOps(presets["dino-global"][:4]),
	optab.Op{Kind: optab.OpRandomApply, P: 0.1, Ops: []optab.Op{{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{23, 23}, Sigma: [2]float64{0.1, 2.0}}}}},
	optab.Op{Kind: optab.OpRandomSolarize, P: 0.2, Args: &optab.SolarizeArgs{Threshold: 128}},
)

// dinov2Crop is one of DINOv2's crops: RandomResizedCrop(size, scale,
// bicubic), flip, its colour jittering, then extra.
func dinov2Crop(size int, lo, hi float64, extra []optab.Op) []optab.Op {
	return append([]optab.Op{
		{Kind: OpRandomResizedCrop, Size: [2]int{size, size}, Args: &RRCArgs{Scale: [2]float64{lo, hi}, Resampling: optab.Resampling{Interp: InterpBicubic}}},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpRandomApply, P: 0.8, Ops: []optab.Op{optab.ColorJitterOp(0.4, 0.4, 0.2, 0.1)}},
		{Kind: optab.OpRandomGrayscale, P: 0.2},
	}, extra...)
}

// dinov2Blur is DINOv2's GaussianBlur as it runs: a 9-px blur, sigma 0.1
// to 2, applied with probability p (its argument's 1 - p).
func dinov2Blur(p float64) optab.Op {
	return optab.Op{Kind: optab.OpRandomApply, P: p, Ops: []optab.Op{{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{9, 9}, Sigma: [2]float64{0.1, 2.0}}}}}
}

// ViewPreset returns the view groups of a named preset of several views,
// and whether there is one.
func ViewPreset(name string) ([]ViewGroup, bool) {
	groups, ok := viewPresets[name]
	if !ok {
		return nil, false
	}
	out := make([]ViewGroup, len(groups))
	for i, g := range groups {
		out[i] = ViewGroup{Name: g.Name, Count: g.Count, Ops: cloneOps(g.Ops)}
	}
	return out, true
}
