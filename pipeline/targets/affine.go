package targets

// Boxes and keypoints through rotate, affine and perspective, as
// torchvision.transforms.v2's _affine_bounding_boxes_with_expand,
// perspective_bounding_boxes and their keypoint kernels move them: the
// drawn parameters as plain arguments (angle, translate, scale, shear,
// center; a perspective's corners). Every product that is added is
// rounded first, or fused explicitly (boxFMA32), so the boxes are the same
// bits on every machine.

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// AffineBoxes is torchvision's affine_bounding_boxes for XYXY float32
// boxes on a w x h canvas: the forward matrix (forwardAffine) rounded to
// float32, each box's four corners (x1, y1), (x2, y1), (x2, y2), (x1, y2)
// through it (affinePoint), the box their extent (aminmax), clamped to the
// canvas (clamping_mode "soft", the same as "hard" for these boxes).
func AffineBoxes(boxes [][4]float32, w, h int, angle float64, translate [2]float64, scale float64, shear [2]float64, center [2]float64, hasCenter bool) {
	m := forwardAffine32(w, h, angle, translate, scale, shear, center, hasCenter)
	// torch.matmul of the N*4 points by the matrix sums each coordinate in
	// an order of its own: fewer than 16 points (4 boxes) in torch's own
	// gemm, more in MKL's sgemm (x86-64 builds); affinePoint follows both.
	small := len(boxes) < 4
	for k := range boxes {
		b := &boxes[k]
		*b = affineCorners(b, &m, small)
		ClampBox(b, w, h)
	}
}

// affineCorners is the extent of box b's four corners (x1, y1), (x2, y1),
// (x2, y2), (x1, y2) through the float32 matrix m (affinePoint, small as
// there): torch.aminmax, where a NaN wins, as it does for Go's min and max.
func affineCorners(b *[4]float32, m *[6]float32, small bool) [4]float32 {
	xs := [4]float32{b[0], b[2], b[2], b[0]}
	ys := [4]float32{b[1], b[1], b[3], b[3]}
	var ox, oy [4]float32
	for i := range 4 {
		ox[i] = affinePoint(xs[i], ys[i], m[0], m[1], m[2], small)
		oy[i] = affinePoint(xs[i], ys[i], m[3], m[4], m[5], small)
	}
	return [4]float32{min(ox[0], ox[1], ox[2], ox[3]), min(oy[0], oy[1], oy[2], oy[3]),
		max(ox[0], ox[1], ox[2], ox[3]), max(oy[0], oy[1], oy[2], oy[3])}
}

// affinePoint is one output coordinate of torch.matmul([x, y, 1], [a, b,
// c]) in float32, as torch 2.15's CPU matmul orders the sum: with small
// (fewer than 16 points) x*a + c, then + y*b, each rounded; otherwise x*a
// rounded, then y*b added to it in one rounding (MKL's fused multiply-add),
// then c.
func affinePoint(x, y, a, b, c float32, small bool) float32 {
	if small {
		return float32(float32(x*a)+c) + float32(y*b)
	}
	return boxFMA32(y, b, float32(x*a)) + c
}

// boxFMA32 is a*b + c in float32 with one rounding, as a float32 FMA
// instruction computes it: the product is exact in float64, the sum
// rounded to odd in float64 (which then rounds to float32 as the exact sum
// would: 53 bits are more than 24 + 2), with the sum's error from TwoSum.
// (The pixel kernels have their own, kernels_affine.go's fma32.)
func boxFMA32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	s := p + float64(c)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	if e != 0 && math.Float64bits(s)&1 == 0 {
		// Inexact and even: the odd neighbour towards the exact sum.
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return float32(s)
}

// forwardAffine32 is forwardAffine about center (the w x h canvas'
// center unless hasCenter, in pixels from the top left), rounded to
// float32 as torchvision's box and keypoint kernels use it.
func forwardAffine32(w, h int, angle float64, translate [2]float64, scale float64, shear [2]float64, center [2]float64, hasCenter bool) [6]float32 {
	if !hasCenter {
		center = [2]float64{float64(float64(w) * 0.5), float64(float64(h) * 0.5)}
	}
	var m [6]float32
	for i, v := range forwardAffine(center, angle, translate, scale, shear) {
		m[i] = float32(v)
	}
	return m
}

// forwardAffine is torchvision's _get_inverse_affine_matrix(center, angle,
// translate, scale, shear, inverted=False): the matrix taking a point of
// the image (pixels from its top left) to where the affine puts it, in
// float64 as it computes it (the kernels' RotationShear, then the scale
// and the centre; every product rounded).
func forwardAffine(center [2]float64, angle float64, translate [2]float64, scale float64, shear [2]float64) [6]float64 {
	a, b, c, d := kernels.RotationShear(angle, shear)
	cx, cy := center[0], center[1]
	cxt, cyt := cx+translate[0], cy+translate[1]
	m := [6]float64{float64(a * scale), float64(b * scale), 0, float64(c * scale), float64(d * scale), 0}
	m[2] += (cxt - float64(m[0]*cx)) - float64(m[1]*cy)
	m[5] += (cyt - float64(m[3]*cx)) - float64(m[4]*cy)
	return m
}

// perspectiveThetas is torchvision's _compute_perspective_thetas for a
// perspective step: its coefficients (kernels.PerspectiveCoeffs, float32)
// inverted in float64 as Python computes them (every product rounded),
// rounded to float32: the rows (a, b, c), (d, e, f) of the numerator and
// (g, h, 1) of the denominator taking a point of the image to where the
// perspective puts it. An error where torchvision raises (a zero
// denominator) or the corners are singular. start and end are the
// step's startpoints and endpoints.
func perspectiveThetas(start, end [4][2]int) ([9]float32, error) {
	k, err := kernels.PerspectiveCoeffs(&start, &end)
	if err != nil {
		return [9]float32{}, fmt.Errorf("%w: perspective: endpoints %v: %v", errs.Unsupported, end, err)
	}
	var c [8]float64
	for i, v := range k {
		c[i] = float64(v)
	}
	den := float64(c[0]*c[4]) - float64(c[1]*c[3])
	if den == 0 {
		return [9]float32{}, fmt.Errorf("%w: perspective: coefficients %v cannot be inverted to move boxes or keypoints (torchvision raises too)", errs.Unsupported, k)
	}
	inv := [8]float64{
		(c[4] - float64(c[5]*c[7])) / den,
		(-c[1] + float64(c[2]*c[7])) / den,
		(float64(c[1]*c[5]) - float64(c[2]*c[4])) / den,
		(-c[3] + float64(c[5]*c[6])) / den,
		(c[0] - float64(c[2]*c[6])) / den,
		(float64(-c[0]*c[5]) + float64(c[2]*c[3])) / den,
		(float64(-c[4]*c[6]) + float64(c[3]*c[7])) / den,
		(float64(-c[0]*c[7]) + float64(c[1]*c[6])) / den,
	}
	var t [9]float32
	for i, v := range inv {
		t[i] = float32(v)
	}
	t[8] = 1
	return t, nil
}

// perspectivePoint is one point through the thetas, as torchvision's
// perspective_bounding_boxes and perspective_keypoints compute it: the
// numerator's and the denominator's torch.matmul (affinePoint's orders;
// one, a lone point's), then their float32 quotient.
func perspectivePoint(x, y float32, t *[9]float32, small, one bool) (float32, float32) {
	if one {
		nx := float32(x*t[0]) + float32(float32(y*t[1])+t[2])
		ny := float32(x*t[3]) + float32(float32(y*t[4])+t[5])
		d := float32(x*t[6]) + float32(float32(y*t[7])+t[8])
		return nx / d, ny / d
	}
	d := affinePoint(x, y, t[6], t[7], t[8], small)
	return affinePoint(x, y, t[0], t[1], t[2], small) / d, affinePoint(x, y, t[3], t[4], t[5], small) / d
}

// PerspectiveBoxes is torchvision's perspective_bounding_boxes for XYXY
// float32 boxes on a w x h canvas: each box's four corners through the
// perspective (perspectivePoint; torch.matmul of the 4N points, so fewer
// than 4 boxes sum in torch's own order), the box their extent, clamped.
// start and end are the perspective's startpoints and endpoints.
func PerspectiveBoxes(boxes [][4]float32, w, h int, start, end [4][2]int) error {
	if len(boxes) == 0 {
		return nil
	}
	t, err := perspectiveThetas(start, end)
	if err != nil {
		return err
	}
	small := len(boxes) < 4
	for k := range boxes {
		b := &boxes[k]
		xs := [4]float32{b[0], b[2], b[2], b[0]}
		ys := [4]float32{b[1], b[1], b[3], b[3]}
		var ox, oy [4]float32
		for i := range 4 {
			ox[i], oy[i] = perspectivePoint(xs[i], ys[i], &t, small, false)
		}
		*b = [4]float32{min(ox[0], ox[1], ox[2], ox[3]), min(oy[0], oy[1], oy[2], oy[3]),
			max(ox[0], ox[1], ox[2], ox[3]), max(oy[0], oy[1], oy[2], oy[3])}
		ClampBox(b, w, h)
	}
	return nil
}

// PerspectivePoints is torchvision's perspective_keypoints: every point
// through the perspective (perspectivePoint), not clamped.
func PerspectivePoints(pts [][2]float32, start, end [4][2]int) error {
	if len(pts) == 0 {
		return nil // torchvision returns an empty KeyPoints as it is
	}
	t, err := perspectiveThetas(start, end)
	if err != nil {
		return err
	}
	small, one := len(pts) < 16, len(pts) == 1
	for k := range pts {
		pts[k][0], pts[k][1] = perspectivePoint(pts[k][0], pts[k][1], &t, small, one)
	}
	return nil
}

// RotateExpandBoxes is torchvision's rotate_bounding_boxes with
// expand=True for XYXY float32 boxes on a w x h canvas: each box's
// corners through the forward matrix (as AffineBoxes), their extent less
// the shift of the canvas' corners' minimum (ExpandShift), clamped to the
// canvas torchvision computes for the boxes (_compute_affine_output_size
// of the inverse matrix about the canvas' centre in pixels, which differs
// from the image's by a pixel on a side for about half the angles and
// sizes). It returns the image's canvas (kernels.RotatedSize): the
// pixels' and the masks' size, which the ops after it move the boxes on.
// angle, center and hasCenter are the rotate step's.
func RotateExpandBoxes(boxes [][4]float32, w, h int, angle float64, center [2]float64, hasCenter bool) (int, int) {
	ow, oh := kernels.RotatedSize(w, h, angle, center, hasCenter)
	if len(boxes) == 0 {
		return ow, oh
	}
	m := forwardAffine32(w, h, -angle, [2]float64{}, 1, [2]float64{}, center, hasCenter)
	tr := ExpandShift(w, h, angle, center, hasCenter)
	inv := inverseAbout(w, h, -angle, center, hasCenter)
	bw, bh := kernels.AffineOutputSize(&inv, w, h)
	small := len(boxes) < 4
	for k := range boxes {
		b := &boxes[k]
		e := affineCorners(b, &m, small)
		*b = [4]float32{e[0] - tr[0], e[1] - tr[1], e[2] - tr[0], e[3] - tr[1]}
		ClampBox(b, bw, bh)
	}
	return ow, oh
}

// ExpandShift is the shift torchvision's box and keypoint kernels take
// off with expand=True: the minimum x and y of the w x h canvas' corners
// (0, 0), (0, h), (w, h), (w, 0) through the forward matrix of the
// rotate step of angle about center (the canvas' unless hasCenter)
// (torch.matmul of four points: affinePoint's small sum).
func ExpandShift(w, h int, angle float64, center [2]float64, hasCenter bool) [2]float32 {
	m := forwardAffine32(w, h, -angle, [2]float64{}, 1, [2]float64{}, center, hasCenter)
	fw, fh := float32(w), float32(h)
	pts := [4][2]float32{{0, 0}, {0, fh}, {fw, fh}, {fw, 0}}
	var tr [2]float32
	for i, p := range pts {
		x := affinePoint(p[0], p[1], m[0], m[1], m[2], true)
		y := affinePoint(p[0], p[1], m[3], m[4], m[5], true)
		if i == 0 {
			tr = [2]float32{x, y}
		}
		tr = [2]float32{min(tr[0], x), min(tr[1], y)}
	}
	return tr
}

// inverseAbout is torchvision's _get_inverse_affine_matrix(center, angle,
// [0, 0], 1, [0, 0]) (inverted) about center in pixels from the top left
// (the w x h canvas' centre unless hasCenter), in its float64 order: what
// its box and keypoint kernels size an expanded canvas by.
func inverseAbout(w, h int, angle float64, center [2]float64, hasCenter bool) [6]float64 {
	cx, cy := float64(float64(w)*0.5), float64(float64(h)*0.5)
	if hasCenter {
		cx, cy = center[0], center[1]
	}
	a, b, c, d := kernels.RotationShear(angle, [2]float64{})
	m := [6]float64{d, -b, 0, -c, a, 0}
	m[2] = (float64(m[0]*-cx) + float64(m[1]*-cy)) + cx
	m[5] = (float64(m[3]*-cx) + float64(m[4]*-cy)) + cy
	return m
}
