package targets

// Keypoints through the geometry, as torchvision.transforms.v2 moves a
// tv_tensors.KeyPoints (float32, [K, P, 2]) with the image: its
// *_keypoints kernels, in float32 as they compute, to the bit. Unlike
// boxes, keypoints are never clamped (torchvision clamps them only in
// ClampKeyPoints) and a flip mirrors about the last pixel (W - 1 - x).

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// ShiftPoints adds (dx, dy) to every point, in float32: crop_keypoints'
// keypoints - tensor([left, top]) and pad_keypoints' keypoints +
// tensor([left, top]) (float32 tensors of the ints; x - l is x + (-l)
// in IEEE arithmetic, and float32(-l) is -float32(l)).
func ShiftPoints(pts [][2]float32, dx, dy int) {
	fx, fy := float32(dx), float32(dy)
	for k := range pts {
		pts[k][0], pts[k][1] = pts[k][0]+fx, pts[k][1]+fy
	}
}

// ResizePoints is resize_keypoints from w x h to nw x nh: unchanged when
// the size is, else each coordinate times the ratio rounded to float32
// (torch.tensor of the Python floats new/old), not clamped.
func ResizePoints(pts [][2]float32, w, h, nw, nh int) (int, int) {
	if nw == w && nh == h {
		return w, h
	}
	rx, ry := float32(float64(nw)/float64(w)), float32(float64(nh)/float64(h))
	for k := range pts {
		pts[k][0], pts[k][1] = float32(pts[k][0]*rx), float32(pts[k][1]*ry)
	}
	return nw, nh
}

// AffinePoints is torchvision's _affine_keypoints_with_expand (expand
// False: the canvas stays) for float32 points on a w x h canvas: the
// forward matrix of _get_inverse_affine_matrix(..., inverted=False)
// (forwardAffine, the canvas' centre unless a center is given) rounded to
// float32, and each point through it with torch.matmul of the N x 3 points
// ([x, y, 1]) by its transpose, whose float32 sums torch orders by N (on
// x86-64): one point x*a + (y*b + c); fewer than 16 as affinePoint's small
// path; more as MKL's (affinePoint). Not clamped.
func AffinePoints(pts [][2]float32, w, h int, angle float64, translate [2]float64, scale float64, shear [2]float64, center [2]float64, hasCenter bool) {
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

// SanitizePoints is SanitizeKeyPoints on a w x h canvas: every instance
// with a point off the canvas (keptByPoints) dropped whole: its
// keypoints, box, label, crowd flag and visibilities, as torchvision's
// with a labels_getter that returns every per-instance field. A dataset
// without keypoints fails it, as torchvision's fails on a sample without a
// KeyPoints.
func (t *Targets) SanitizePoints(w, h int) error {
	if t.P == 0 {
		return fmt.Errorf("%w: SanitizeKeyPoints: the dataset's instances have no keypoints", errs.Unsupported)
	}
	if len(t.Points) != len(t.Boxes)*t.P || len(t.Vis) != len(t.Points) {
		return fmt.Errorf("targets: %d boxes with %d keypoints and %d visibilities: want %d points an instance", len(t.Boxes), len(t.Points), len(t.Vis), t.P)
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
	return nil
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

// ClampPoints is torchvision's _clamp_keypoints on a w x h canvas: x
// clamped to [0, w - 1], y to [0, h - 1] (torch's clamp_: a NaN stays).
func ClampPoints(pts [][2]float32, w, h int) {
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
