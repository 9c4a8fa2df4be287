package pipeline

// The flips: torchvision.transforms.v2's RandomHorizontalFlip and
// RandomVerticalFlip, horizontal_flip and vertical_flip. A
// RandomHorizontalFlip right after the geometry is fused into the decode
// (NewTransform: the resampler's coefficients run backwards); anywhere
// else it is a step.

import "github.com/stoker-dev/stoker/pipeline/kernels"

const (
	OpRandomHorizontalFlip OpKind = "RandomHorizontalFlip"
	OpRandomVerticalFlip   OpKind = "RandomVerticalFlip"
)

var (
	FnHorizontalFlip = defineFn(fnDef{name: "horizontal_flip", ns: 0.062,
		kernel:  func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.HorizontalFlip(p) },
		targets: targetsMove, boxes: flipBoxesX, points: flipPointsX,
		masks: func(t *Targets, _ *Step) error { t.FlipMasksX(); return nil }})
	FnVerticalFlip = defineFn(fnDef{name: "vertical_flip", ns: 0.069,
		kernel:  func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.VerticalFlip(p) },
		targets: targetsMove, boxes: flipBoxesY, points: flipPointsY,
		masks: func(t *Targets, _ *Step) error { t.FlipMasksY(); return nil }})
)

func init() {
	defineOp(opDef{kind: OpRandomHorizontalFlip, doc: "mirrors the image left to right with probability p",
		params: []param{pParam(0.5)}, targets: targetsMove,
		compile: compileP, step: func(*Op) Step { return Step{Fn: FnHorizontalFlip} }, draw: drawApplied})
	defineOp(opDef{kind: OpRandomVerticalFlip, doc: "mirrors the image top to bottom with probability p",
		params: []param{pParam(0.5)}, targets: targetsMove,
		compile: compileP, step: func(*Op) Step { return Step{Fn: FnVerticalFlip} }, draw: drawApplied})
}

// flipBoxesX is horizontal_flip_bounding_boxes (XYXY): x' = -(x - W).
func flipBoxesX(boxes [][4]float32, w, h int, _ *Step) (int, int, error) {
	fw := float32(w)
	for k := range boxes {
		bx := &boxes[k]
		bx[0], bx[2] = -(bx[2] - fw), -(bx[0] - fw)
	}
	return w, h, nil
}

// flipBoxesY is vertical_flip_bounding_boxes (XYXY): y' = -(y - H).
func flipBoxesY(boxes [][4]float32, w, h int, _ *Step) (int, int, error) {
	fh := float32(h)
	for k := range boxes {
		bx := &boxes[k]
		bx[1], bx[3] = -(bx[3] - fh), -(bx[1] - fh)
	}
	return w, h, nil
}

// flipPointsX is horizontal_flip_keypoints: about the last pixel,
// x' = -(x - (W - 1)).
func flipPointsX(pts [][2]float32, w, h int, _ *Step) (int, int, error) {
	fw := float32(w - 1)
	for k := range pts {
		pts[k][0] = -(pts[k][0] - fw)
	}
	return w, h, nil
}

// flipPointsY is vertical_flip_keypoints: y' = -(y - (H - 1)).
func flipPointsY(pts [][2]float32, w, h int, _ *Step) (int, int, error) {
	fh := float32(h - 1)
	for k := range pts {
		pts[k][1] = -(pts[k][1] - fh)
	}
	return w, h, nil
}
