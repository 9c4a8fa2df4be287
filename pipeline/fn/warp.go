package fn

// rotate, affine and perspective, with their targets' moves (the
// classes are pipeline's op_warp.go).

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// warpCost is a resampling step's Cost: its interpolation scales it.
func warpCost(st *Step, ns, px float64) float64 { return ns * px * InterpCost(st.Interp) }

var (
	// Rotate is torchvision's rotate; expand (I[0] 1) makes the output
	// large enough to hold the whole rotated image (rotateExpand: its
	// size is kernels.RotatedSize's).
	Rotate = define(Def{name: "rotate", args: []arg{{"angle", argFloat, 0, 1}, {"interpolation", argInterp, 0, 1}, {"expand", argBool, 0, 1},
		{"center", argCenter, 0, 1}, {"fill", argFill, 0, 1}},
		Ns: 4.09, Cost: warpCost, // bilinear; nearest and bicubic scale by InterpNs
		size: func(st *Step, w, h int) (int, int) {
			if st.I[0] == 0 {
				return w, h
			}
			return kernels.RotatedSize(w, h, st.F[0], st.Center, st.HasCenter)
		},
		grow: func(p kernels.Planes, st *Step, ks *kernels.Scratch) kernels.Planes {
			if st.I[0] == 0 {
				kernels.Rotate(p, st.F[0], st.Interp, st.Center, st.HasCenter, st.Fill, st.FillNone, ks)
				return p
			}
			return kernels.RotateExpand(p, p.Pix[:cap(p.Pix)], st.F[0], st.Interp, st.Center, st.HasCenter, st.Fill, st.FillNone, ks)
		},
		check: func(st *Step, w, h int) error {
			if st.I[0] != 0 && st.Interp != kernels.Nearest && st.Interp != kernels.Bilinear {
				return StepError(st, "interpolation %s with expand: torchvision rotates tensors with nearest or bilinear", st.Interp)
			}
			return checkWarp(st, w, h)
		},
		Role: TargetsMove,
		Boxes: func(boxes [][4]float32, w, h int, st *Step) (int, int, error) {
			if st.I[0] != 0 {
				w, h = targets.RotateExpandBoxes(boxes, w, h, st.F[0], st.Center, st.HasCenter)
				return w, h, nil
			}
			targets.AffineBoxes(boxes, w, h, -st.F[0], [2]float64{}, 1, [2]float64{}, st.Center, st.HasCenter)
			return w, h, nil
		},
		Points: func(pts [][2]float32, w, h int, st *Step) (int, int, error) {
			targets.AffinePoints(pts, w, h, -st.F[0], [2]float64{}, 1, [2]float64{}, st.Center, st.HasCenter)
			if st.I[0] != 0 {
				tr := targets.ExpandShift(w, h, st.F[0], st.Center, st.HasCenter)
				for k := range pts {
					pts[k][0], pts[k][1] = pts[k][0]-tr[0], pts[k][1]-tr[1]
				}
				w, h = kernels.RotatedSize(w, h, st.F[0], st.Center, st.HasCenter)
			}
			return w, h, nil
		},
		Masks: func(t *targets.Targets, st *Step) error { return turnMasks(t, st, true) }})
	Affine = define(Def{name: "affine", args: []arg{{"angle", argFloat, 0, 1}, {"translate", argFloat, 1, 2}, {"scale", argFloat, 3, 1}, {"shear", argFloat, 4, 2},
		{"interpolation", argInterp, 0, 1}, {"fill", argFill, 0, 1}, {"center", argCenter, 0, 1}},
		Ns: 3.78, Cost: warpCost,
		kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) {
			a := kernels.AffineParams{Angle: st.F[0], TX: st.F[1], TY: st.F[2], Scale: st.F[3], ShearX: st.F[4], ShearY: st.F[5],
				Interp: st.Interp, Fill: st.Fill, Center: st.Center, HasCenter: st.HasCenter, NoFill: st.FillNone}
			kernels.Affine(p, &a, ks)
		},
		check: func(st *Step, w, h int) error {
			if !(st.F[3] > 0) {
				return StepError(st, "scale %v: want positive", st.F[3])
			}
			return checkWarp(st, w, h)
		},
		Role: TargetsMove,
		Boxes: func(boxes [][4]float32, w, h int, st *Step) (int, int, error) {
			targets.AffineBoxes(boxes, w, h, st.F[0], [2]float64{st.F[1], st.F[2]}, st.F[3], [2]float64{st.F[4], st.F[5]}, st.Center, st.HasCenter)
			return w, h, nil
		},
		Points: func(pts [][2]float32, w, h int, st *Step) (int, int, error) {
			targets.AffinePoints(pts, w, h, st.F[0], [2]float64{st.F[1], st.F[2]}, st.F[3], [2]float64{st.F[4], st.F[5]}, st.Center, st.HasCenter)
			return w, h, nil
		},
		Masks: func(t *targets.Targets, st *Step) error { return turnMasks(t, st, false) }})
	// Perspective is torchvision's perspective: startpoints the canvas'
	// corners ((0, 0) to (I[4], I[5])), endpoints I[0:4] (one corner each,
	// packed: PackPoint), Interp, Fill. Bilinear, Go only (no C kernel):
	// about 8x Affine's C, timed against it on 224 px. Its masks move as
	// perspective_mask moves them (nearest, the Mask's fill, MaskFill).
	Perspective = define(Def{name: "perspective", args: []arg{{"startpoints", argStartCorners, 4, 1}, {"endpoints", argCorners, 0, 1},
		{"interpolation", argInterp, 0, 1}, {"fill", argFill, 0, 1}},
		Ns: 30, Cost: warpCost,
		kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) {
			start, end := st.corners()
			c, _ := kernels.PerspectiveCoeffs(&start, &end) // drawn or checked (Check): not singular
			kernels.Perspective(p, &c, st.Interp, st.Fill, st.FillNone, ks)
		},
		check: func(st *Step, w, h int) error {
			if st.I[4] != w-1 || st.I[5] != h-1 {
				return StepError(st, "startpoints with the corner (%d, %d) on a %dx%d image: want its corners", st.I[4], st.I[5], w, h)
			}
			if st.Interp != kernels.Nearest && st.Interp != kernels.Bilinear {
				return StepError(st, "interpolation %s: torchvision's perspective of a tensor is nearest or bilinear", st.Interp)
			}
			if err := perspectiveError(st); err != nil {
				return err
			}
			return checkWarp(st, w, h)
		},
		fails: func(st *Step, _, _ int) error { return perspectiveError(st) }, Role: TargetsMove,
		Boxes: func(boxes [][4]float32, w, h int, st *Step) (int, int, error) {
			start, end := st.corners()
			return w, h, targets.PerspectiveBoxes(boxes, w, h, start, end)
		},
		Points: func(pts [][2]float32, w, h int, st *Step) (int, int, error) {
			start, end := st.corners()
			return w, h, targets.PerspectivePoints(pts, start, end)
		},
		Masks: func(t *targets.Targets, st *Step) error {
			start, end := st.corners()
			c, err := kernels.PerspectiveCoeffs(&start, &end)
			if err != nil { // Check refused it: the pixels' kernel fails alike
				return perspectiveError(st)
			}
			t.PerspectiveMasks(&c, st.MaskFill)
			return nil
		}})
)

// checkWarp checks a parsed rotate's, affine's or perspective's step as
// torchvision's kernels would (a scale that is not positive) and refuses
// fills outside 0..255, which torch would wrap around on uint8. Bicubic
// rotate and affine, which torchvision refuses for tensors, are
// kernels/bicubic.go's.
func checkWarp(st *Step, _, _ int) error {
	for _, c := range st.Center {
		if !(math.Abs(c) <= 1e9) {
			return StepError(st, "center %v out of range", st.Center)
		}
	}
	return checkStepFill(st)
}

// checkStepFill refuses a step's fill outside 0..255.
func checkStepFill(st *Step) error {
	for _, v := range st.Fill {
		if !(v >= 0 && v <= 255) {
			return StepError(st, "fill %v: want values in 0..255 on uint8 images", st.Fill)
		}
	}
	return nil
}

// perspectiveError is a perspective step's error when its corners give no
// perspective (a singular system: three corners in a line). A drawn one
// (endpoints that land in a line, which the overlapping bands of a
// distortion_scale near 1 allow) fails its sample, as torchvision's raises
// (its least squares finds no full rank).
func perspectiveError(st *Step) error {
	start, end := st.corners()
	if _, err := kernels.PerspectiveCoeffs(&start, &end); err != nil {
		return fmt.Errorf("%w: perspective: endpoints %v: %v", errs.Unsupported, end, err)
	}
	return nil
}

// turnMasks moves t's masks through a rotate or affine step (nearest,
// with the Mask's fill, st.MaskFill, as rotate_mask and affine_mask): the
// step's Fill is the pixels'.
func turnMasks(t *targets.Targets, st *Step, rotate bool) error {
	if rotate {
		t.RotateMasks(st.F[0], st.Center, st.HasCenter, st.I[0] != 0, st.MaskFill)
		return nil
	}
	a := kernels.AffineParams{Angle: st.F[0], TX: st.F[1], TY: st.F[2], Scale: st.F[3], ShearX: st.F[4], ShearY: st.F[5],
		Center: st.Center, HasCenter: st.HasCenter}
	t.AffineMasks(&a, st.MaskFill)
	return nil
}
