package pipeline

// Keypoints through the geometry, as torchvision.transforms.v2 moves a
// tv_tensors.KeyPoints (float32, [K, P, 2]) with the image: its
// *_keypoints kernels, in float32 as they compute, to the bit. Unlike
// boxes, keypoints are never clamped (torchvision clamps them only in
// ClampKeyPoints) and a flip mirrors about the last pixel (W - 1 - x).
// Floating point as in ops_compile.go: every product that is added is
// rounded first, or fused explicitly (boxFMA32).

import (
	"fmt"
)

// moveAll is MoveBoxes of t's boxes and MoveKeypoints of its keypoints
// through the same steps (the canvas the same after them).
func (t *Targets) moveAll(w, h int, steps []Step) (int, int, error) {
	bw, bh, err := MoveBoxes(t.Boxes, w, h, steps)
	if err == nil {
		err = t.moveMasks(steps) // with WantMasks (targets_wire.go)
	}
	if err != nil || t.P == 0 {
		return bw, bh, err
	}
	if len(t.Points) != len(t.Boxes)*t.P || len(t.Vis) != len(t.Points) {
		return bw, bh, fmt.Errorf("targets: %d boxes with %d keypoints and %d visibilities: want %d points an instance", len(t.Boxes), len(t.Points), len(t.Vis), t.P)
	}
	kw, kh, err := MoveKeypoints(t.Points, w, h, steps)
	if err != nil {
		return kw, kh, err
	}
	if kw != bw || kh != bh {
		return bw, bh, fmt.Errorf("targets: the boxes' canvas %dx%d and the keypoints' %dx%d differ after %d steps", bw, bh, kw, kh, len(steps))
	}
	return bw, bh, nil
}

// MoveKeypoints applies steps to points on a canvas of w x h, as
// torchvision's keypoint kernels do, and returns the canvas after them:
// crop (and center_crop, resized_crop's first half, RandomIoUCrop's crop)
// subtracts the offset, in float32, without clamping; pad adds the left
// and top padding; resize multiplies by the float32 ratio of the sizes
// (and leaves the points when the size does not change); the flips mirror
// about the last pixel (x' = -(x - (W - 1))); rotate and affine take each
// point through the float32 forward matrix (affinePoints). Ops on pixels
// alone leave the points. Any other step is an error: the keypoints do not
// support it (a geometric op added for boxes alone fails here rather than
// leave the points behind).
func MoveKeypoints(pts [][2]float32, w, h int, steps []Step) (int, int, error) {
	for i := range steps {
		st := &steps[i]
		d := st.Fn.def()
		switch {
		case d.targets == targetsPixels:
			// Pixels alone: torchvision passes a KeyPoints through (erase warns).
		case d.targets != targetsMove || d.points == nil:
			return w, h, fmt.Errorf("%w: targets' keypoints do not support %s yet", ErrUnsupported, st.Fn)
		default:
			var err error
			if w, h, err = d.points(pts, w, h, st); err != nil {
				return w, h, err
			}
		}
	}
	return w, h, nil
}

// shiftPoints adds (dx, dy) to every point, in float32: crop_keypoints'
// keypoints - tensor([left, top]) and pad_keypoints' keypoints +
// tensor([left, top]) (float32 tensors of the ints; x - l is x + (-l)
// in IEEE arithmetic, and float32(-l) is -float32(l)).
func shiftPoints(pts [][2]float32, dx, dy int) {
	fx, fy := float32(dx), float32(dy)
	for k := range pts {
		pts[k][0], pts[k][1] = pts[k][0]+fx, pts[k][1]+fy
	}
}

// resizePoints is resize_keypoints from w x h to nw x nh: unchanged when
// the size is, else each coordinate times the ratio rounded to float32
// (torch.tensor of the Python floats new/old), not clamped.
func resizePoints(pts [][2]float32, w, h, nw, nh int) (int, int) {
	if nw == w && nh == h {
		return w, h
	}
	rx, ry := float32(float64(nw)/float64(w)), float32(float64(nh)/float64(h))
	for k := range pts {
		pts[k][0], pts[k][1] = float32(pts[k][0]*rx), float32(pts[k][1]*ry)
	}
	return nw, nh
}

// affinePoints is torchvision's _affine_keypoints_with_expand (expand
// False: the canvas stays) for float32 points on a w x h canvas: the
// forward matrix of _get_inverse_affine_matrix(..., inverted=False)
// (forwardAffine, the canvas' centre unless a center is given) rounded to
// float32, and each point through it with torch.matmul of the N x 3 points
// ([x, y, 1]) by its transpose, whose float32 sums torch orders by N (on
// x86-64): one point x*a + (y*b + c); fewer than 16 as affinePoint's small
// path; more as MKL's (affinePoint). Not clamped.
func affinePoints(pts [][2]float32, w, h int, angle float64, translate [2]float64, scale float64, shear [2]float64, center [2]float64, hasCenter bool) {
	if len(pts) == 0 {
		return // torchvision returns an empty KeyPoints as it is
	}
	m := forwardAffine32(w, h, angle, translate, scale, shear, center, hasCenter)
	if len(pts) == 1 {
		x, y := pts[0][0], pts[0][1]
		pts[0] = [2]float32{float32(x*m[0]) + float32(float32(y*m[1])+m[2]), float32(x*m[3]) + float32(float32(y*m[4])+m[5])}
		return
	}
	small := len(pts) < 16
	for k := range pts {
		x, y := pts[k][0], pts[k][1]
		pts[k] = [2]float32{affinePoint(x, y, m[0], m[1], m[2], small), affinePoint(x, y, m[3], m[4], m[5], small)}
	}
}

// clampBoxesStep is ClampBoundingBoxes' step on t on a canvas of w x h:
// the boxes clamped in their format (clampBoxesAs).
func clampBoxesStep(t *Targets, w, h int, _ *Step) (int, int, error) {
	clampBoxesAs(t.Boxes, t.Format, w, h)
	return w, h, nil
}

// clampPointsStep is ClampKeyPoints': the keypoints clamped (clampPoints);
// a dataset without keypoints is left, as torchvision passes it through.
func clampPointsStep(t *Targets, w, h int, _ *Step) (int, int, error) {
	clampPoints(t.Points, w, h)
	return w, h, nil
}

// sanitizePointsStep is SanitizeKeyPoints': every instance with a point
// off the canvas (keptByPoints) dropped whole: its keypoints, box, label,
// crowd flag and visibilities, as torchvision's with a labels_getter that
// returns every per-instance field. A dataset without keypoints fails it,
// as torchvision's fails on a sample without a KeyPoints.
func sanitizePointsStep(t *Targets, w, h int, _ *Step) (int, int, error) {
	if t.P == 0 {
		return w, h, fmt.Errorf("%w: SanitizeKeyPoints: the dataset's instances have no keypoints", ErrUnsupported)
	}
	if len(t.Points) != len(t.Boxes)*t.P || len(t.Vis) != len(t.Points) {
		return w, h, fmt.Errorf("targets: %d boxes with %d keypoints and %d visibilities: want %d points an instance", len(t.Boxes), len(t.Points), len(t.Vis), t.P)
	}
	n := 0
	for k := range t.Boxes {
		if keptByPoints(t.Points[k*t.P:(k+1)*t.P], w, h) {
			t.Boxes[n], t.Labels[n], t.Crowd[n] = t.Boxes[k], t.Labels[k], t.Crowd[k]
			t.KeepPoints(n, k)
			n++
		}
	}
	t.Boxes, t.Labels, t.Crowd = t.Boxes[:n], t.Labels[:n], t.Crowd[:n]
	t.CutPoints(n)
	return w, h, nil
}

// keptByPoints is torchvision's _get_sanitize_keypoints_mask for one
// instance's points on a w x h canvas: every x in [0, w) and y in [0, h)
// (float32 comparisons; a NaN fails them).
func keptByPoints(pts [][2]float32, w, h int) bool {
	fw, fh := float32(w), float32(h)
	for _, p := range pts {
		if !(p[0] >= 0 && p[0] < fw && p[1] >= 0 && p[1] < fh) {
			return false
		}
	}
	return true
}

// clampPoints is torchvision's _clamp_keypoints on a w x h canvas: x
// clamped to [0, w - 1], y to [0, h - 1] (torch's clamp_: a NaN stays).
func clampPoints(pts [][2]float32, w, h int) {
	mx := [2]float32{float32(w - 1), float32(h - 1)}
	for k := range pts {
		for i, v := range pts[k] {
			if v < 0 {
				pts[k][i] = 0
			} else if v > mx[i] {
				pts[k][i] = mx[i]
			}
		}
	}
}

// clampBoxesAs is torchvision's _clamp_bounding_boxes (clamping_mode
// "soft" or "hard": the same for these boxes) for boxes in format f on a
// w x h canvas, in float32 as it computes in place: converted to XYXY
// (XYWH: x2 = w + x1; CXCYWH: x1 = cx - w / 2, then x2 = w + x1),
// clamped (clampBox), converted back (convertBoxes).
func clampBoxesAs(boxes [][4]float32, f BoxFormat, w, h int) {
	for k := range boxes {
		b := &boxes[k]
		switch f {
		case BoxXYWH:
			b[2], b[3] = b[2]+b[0], b[3]+b[1]
		case BoxCXCYWH:
			b[0], b[1] = b[0]-float32(b[2]/2), b[1]-float32(b[3]/2) // rounded: not fused
			b[2], b[3] = b[2]+b[0], b[3]+b[1]
		}
		clampBox(b, w, h)
	}
	convertBoxes(boxes, f)
}
