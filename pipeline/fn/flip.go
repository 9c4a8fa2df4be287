package fn

// horizontal_flip and vertical_flip, with their boxes' and keypoints'
// moves (the classes, RandomHorizontalFlip and RandomVerticalFlip, are
// pipeline/ops' flip.go).

import (
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

var (
	HorizontalFlip = define(Def{name: "horizontal_flip", Ns: 0.062,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.HorizontalFlip(p) },
		Role:   TargetsMove, Boxes: flipBoxesX, Points: flipPointsX,
		Masks: func(t *targets.Targets, _ *Step) error { t.FlipMasksX(); return nil }})
	VerticalFlip = define(Def{name: "vertical_flip", Ns: 0.069,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.VerticalFlip(p) },
		Role:   TargetsMove, Boxes: flipBoxesY, Points: flipPointsY,
		Masks: func(t *targets.Targets, _ *Step) error { t.FlipMasksY(); return nil }})
)

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
