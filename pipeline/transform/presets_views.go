package transform

import optab "github.com/stoker-dev/stoker/pipeline/ops"

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
		{Name: "global", Count: 1, Ops: dinov2Crop(224, 0.32, 1, []optab.Op{dinov2Blur(0.9), {Kind: optab.OpRandomSolarize, Threshold: 128, P: 0.2}})},
		{Name: "local", Count: 8, Ops: dinov2Crop(96, 0.05, 0.32, []optab.Op{dinov2Blur(0.5)})},
	},
}

// dinoGlobal2 is DINO's second global crop: dino-global with its blur
// applied with p 0.1, then RandomSolarize(128, p 0.2).
var dinoGlobal2 = append(cloneOps(presets["dino-global"][:4]),
	optab.Op{Kind: optab.OpRandomApply, P: 0.1, Ops: []optab.Op{{Kind: optab.OpGaussianBlur, KernelSize: [2]int{23, 23}, Sigma: [2]float64{0.1, 2.0}}}},
	optab.Op{Kind: optab.OpRandomSolarize, Threshold: 128, P: 0.2},
)

// dinov2Crop is one of DINOv2's crops: RandomResizedCrop(size, scale,
// bicubic), flip, its colour jittering, then extra.
func dinov2Crop(size int, lo, hi float64, extra []optab.Op) []optab.Op {
	return append([]optab.Op{
		{Kind: OpRandomResizedCrop, Size: [2]int{size, size}, Scale: [2]float64{lo, hi}, Interp: InterpBicubic},
		{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		{Kind: optab.OpRandomApply, P: 0.8, Ops: []optab.Op{optab.ColorJitterOp(0.4, 0.4, 0.2, 0.1)}},
		{Kind: optab.OpRandomGrayscale, P: 0.2},
	}, extra...)
}

// dinov2Blur is DINOv2's GaussianBlur as it runs: a 9-px blur, sigma 0.1
// to 2, applied with probability p (its argument's 1 - p).
func dinov2Blur(p float64) optab.Op {
	return optab.Op{Kind: optab.OpRandomApply, P: p, Ops: []optab.Op{{Kind: optab.OpGaussianBlur, KernelSize: [2]int{9, 9}, Sigma: [2]float64{0.1, 2.0}}}}
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
