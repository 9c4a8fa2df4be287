package cv

import (
	"errors"
	"math"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// PerspectiveParams are what ultralytics' RandomPerspective draws, in its
// order: the perspective terms, the rotation (degrees) and scale, the two
// shear angles (degrees; the matrix holds their tangents), and the
// translation as the drawn fractions of the output size (uniform in
// 0.5 -+ translate).
type PerspectiveParams struct {
	PX     float64 `json:"px"`
	PY     float64 `json:"py"`
	Angle  float64 `json:"angle"`
	Scale  float64 `json:"scale"`
	ShearX float64 `json:"shear_x"`
	ShearY float64 `json:"shear_y"`
	TX     float64 `json:"tx"`
	TY     float64 `json:"ty"`
}

// matmul3 is a float32 3x3 product as numpy's matmul computes it through
// OpenBLAS's sgemm: each entry a chain of fused multiply-adds over k in
// order, from the first product.
func matmul3(a, b [9]float32) [9]float32 {
	var c [9]float32
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			acc := float32(a[3*i] * b[j])
			acc = fma32(a[3*i+1], b[3+j], acc)
			c[3*i+j] = fma32(a[3*i+2], b[6+j], acc)
		}
	}
	return c
}

// PerspectiveMatrix is RandomPerspective's M = T @ S @ R @ P @ C in
// float32 for a srcW x srcH image and an output of dstW x dstH: C centres
// the source, P its perspective terms, R cv2.getRotationMatrix2D(angle,
// (0, 0), scale) (in double, then float), S the shears' tangents, T the
// translation in output pixels. Row-major.
func PerspectiveMatrix(p PerspectiveParams, srcW, srcH, dstW, dstH int) [9]float32 {
	id := [9]float32{1, 0, 0, 0, 1, 0, 0, 0, 1}
	c, pm, r, s, t := id, id, id, id, id
	c[2], c[5] = float32(-float64(srcW)/2), float32(-float64(srcH)/2)
	pm[6], pm[7] = float32(p.PX), float32(p.PY)
	a := float64(p.Angle * (math.Pi / 180))
	alpha, beta := float64(det.Cos(a)*p.Scale), float64(det.Sin(a)*p.Scale)
	r[0], r[1], r[3], r[4] = float32(alpha), float32(beta), float32(-beta), float32(alpha)
	s[1] = float32(det.Tan(float64(p.ShearX*math.Pi) / 180))
	s[3] = float32(det.Tan(float64(p.ShearY*math.Pi) / 180))
	t[2], t[5] = float32(p.TX*float64(dstW)), float32(p.TY*float64(dstH))
	return matmul3(matmul3(matmul3(matmul3(t, s), r), pm), c)
}

// project is one point through M as ultralytics does it: the row (x, y, 1)
// times M.T (numpy's sgemm: fused multiply-adds over the row in order),
// then x and y over the third (perspective, or always with divide).
func project(m [9]float32, x, y float32, divide bool) (float32, float32) {
	px := fma32(1, m[2], fma32(y, m[1], float32(x*m[0])))
	py := fma32(1, m[5], fma32(y, m[4], float32(x*m[3])))
	if divide {
		pw := fma32(1, m[8], fma32(y, m[7], float32(x*m[6])))
		px, py = px/pw, py/pw
	}
	return px, py
}

// PerspectiveImage is RandomPerspective.apply_image: cv2.warpPerspective
// with M when perspective is on, else cv2.warpAffine with its first two
// rows, into dst (the output size), border 114.
func PerspectiveImage(dst, src kernels.Planes, m [9]float32, perspective bool) {
	var md [9]float64
	for i := range m {
		md[i] = float64(m[i])
	}
	if perspective {
		WarpPerspective(dst, src, md, 114)
		return
	}
	WarpAffine(dst, src, [6]float64(md[:6]), 114)
}

// PerspectiveInstances is RandomPerspective.apply_instances: in's boxes
// (XYXY pixels of the srcW x srcH image) through M (the extent of their
// corners; with segments, each segment's clipped extent, segment2box, and
// the segment clipped to it), keypoints through M with those that leave
// the dstW x dstH output made invisible, all clipped to the output, then
// only the instances that box_candidates keeps (their box against the
// source box times scale: wider and higher than 2 px, an area ratio above
// 0.1, 0.01 with segments, an aspect ratio below 100).
func PerspectiveInstances(in Instances, m [9]float32, scale float64, perspective bool, dstW, dstH int) Instances {
	out := Instances{Boxes: make([][4]float32, len(in.Boxes)), Cls: append([]int64{}, in.Cls...)}
	for i, b := range in.Boxes {
		xs, ys := [4]float32{}, [4]float32{}
		for k, c := range [4][2]int{{0, 1}, {2, 3}, {0, 3}, {2, 1}} {
			xs[k], ys[k] = project(m, b[c[0]], b[c[1]], perspective)
		}
		out.Boxes[i] = [4]float32{min(xs[0], xs[1], xs[2], xs[3]), min(ys[0], ys[1], ys[2], ys[3]),
			max(xs[0], xs[1], xs[2], xs[3]), max(ys[0], ys[1], ys[2], ys[3])}
	}
	segs := len(in.Segments) > 0
	if segs {
		out.Segments = make([][][2]float32, len(in.Segments))
		for i, s := range in.Segments {
			if b := out.Boxes[i]; !perspective && (b[2] < -1 || b[3] < -1 || b[0] > float32(dstW+1) || b[1] > float32(dstH+1)) {
				// The segment lies within its box (up to the float
				// roundings, far below the pixel of margin), and an
				// affine M takes it within the warped box, here wholly
				// off the output: segment2box gives zeros, which
				// box_candidates drops. Not warped.
				out.Boxes[i], out.Segments[i] = [4]float32{}, nil
				continue
			}
			t := make([][2]float32, len(s))
			for j, p := range s {
				t[j][0], t[j][1] = project(m, p[0], p[1], true)
			}
			b := segment2box(t, dstW, dstH)
			for j := range t {
				t[j][0], t[j][1] = clamp32(t[j][0], b[0], b[2]), clamp32(t[j][1], b[1], b[3])
			}
			out.Boxes[i], out.Segments[i] = b, t
		}
	} else if in.Segments != nil {
		out.Segments = [][][2]float32{}
	}
	if in.Keypoints != nil {
		out.Keypoints = make([][][3]float32, len(in.Keypoints))
		fw, fh := float32(dstW), float32(dstH)
		for i, k := range in.Keypoints {
			t := make([][3]float32, len(k))
			for j, p := range k {
				x, y := project(m, p[0], p[1], true)
				v := p[2]
				if x < 0 || y < 0 || x > fw || y > fh {
					v = 0
				}
				t[j] = [3]float32{x, y, v}
			}
			out.Keypoints[i] = t
		}
	}
	out.Clip(dstW, dstH)
	areaThr := float32(0.1)
	if segs {
		areaThr = 0.01
	}
	keep := make([]bool, len(out.Boxes))
	s := float32(scale)
	for i, b := range in.Boxes {
		keep[i] = BoxCandidate([4]float32{b[0] * s, b[1] * s, b[2] * s, b[3] * s}, out.Boxes[i], areaThr)
	}
	out.Keep(keep)
	return out
}

// BoxCandidate is RandomPerspective.box_candidates for one box (wh_thr 2,
// ar_thr 100, eps 1e-16), in float32 as numpy computes it: b1 before (times
// the drawn scale), b2 after.
func BoxCandidate(b1, b2 [4]float32, areaThr float32) bool {
	const eps = float32(1e-16)
	w1, h1 := b1[2]-b1[0], b1[3]-b1[1]
	w2, h2 := b2[2]-b2[0], b2[3]-b2[1]
	ar := max(w2/(h2+eps), h2/(w2+eps))
	return w2 > 2 && h2 > 2 && float32(w2*h2)/(float32(w1*h1)+eps) > areaThr && ar < 100
}

// PerspectiveFootprint is the part of a srcW x srcH source that
// PerspectiveImage with m into a dstW x dstH output can read: every source
// pixel that a bilinear tap of an output pixel lands on, within the
// source (those outside are the border value, not read), with a margin
// for the float rounding of the warp's coordinates. The warp's inverse
// matrix (the float one it computes) maps the output's pixel grid into
// the image of the rectangle of its corners: a convex quadrilateral, for
// a perspective too where its third coordinate is positive at the four
// corners (it is affine in the output's coordinates). ok is false where
// it cannot bound the taps so (that coordinate near zero or of another
// sign, or coordinates so large that the float32 rounding nears the
// margin): then the warp may read all of the source.
func PerspectiveFootprint(m [9]float32, perspective bool, srcW, srcH, dstW, dstH int) (r Rect, ok bool) {
	var md [9]float64
	for i := range m {
		md[i] = float64(m[i])
	}
	var f [9]float64 // the warp's inverse, its float32 values
	if perspective {
		inv := InvertPerspective(md)
		for i := range inv {
			f[i] = float64(float32(inv[i]))
		}
	} else {
		inv := InvertAffine([6]float64(md[:6]))
		for i := range inv {
			f[i] = float64(float32(inv[i]))
		}
		f[8] = 1
	}
	xm, ym := float64(dstW-1), float64(dstH-1)
	bound := func(a, b, c float64) float64 { return float64(math.Abs(a)*xm) + float64(math.Abs(b)*ym) + math.Abs(c) }
	bx, by, bw := bound(f[0], f[1], f[2]), bound(f[3], f[4], f[5]), bound(f[6], f[7], f[8])
	lox, loy, hix, hiy := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	wmin := math.Inf(1)
	for _, c := range [4][2]float64{{0, 0}, {xm, 0}, {0, ym}, {xm, ym}} {
		x, y := c[0], c[1]
		sx, sy, w := float64(f[0]*x)+float64(f[1]*y)+f[2], float64(f[3]*x)+float64(f[4]*y)+f[5], 1.0
		if perspective {
			w = float64(f[6]*x) + float64(f[7]*y) + f[8]
			sx, sy = sx/w, sy/w
		}
		wmin = min(wmin, w)
		lox, hix = min(lox, sx), max(hix, sx)
		loy, hiy = min(loy, sy), max(hiy, sy)
	}
	// The float32 coordinate: a few roundings of sums no larger than bx
	// (by, bw), each within 2^-24 of it; 1e-6 of them bounds their sum.
	ex, ey, ew := float64(1e-6*bx), float64(1e-6*by), float64(1e-6*bw)
	if perspective {
		if !(wmin > 1e-3 && ew < wmin/2) {
			return Rect{}, false
		}
		sx, sy := max(math.Abs(lox), math.Abs(hix)), max(math.Abs(loy), math.Abs(hiy))
		ex = (ex+float64(sx*ew))/(wmin-ew) + float64(1e-6*sx)
		ey = (ey+float64(sy*ew))/(wmin-ew) + float64(1e-6*sy)
	}
	if !(ex < 0.25 && ey < 0.25) || math.IsNaN(lox+hix+loy+hiy) {
		return Rect{}, false
	}
	// Taps at floor(s) and floor(s)+1; one pixel more each side for margin.
	clampTo := func(v float64, n int) int { return int(min(max(v, -1), float64(n+1))) }
	r = Rect{X0: clampTo(math.Floor(lox-ex)-1, srcW), Y0: clampTo(math.Floor(loy-ey)-1, srcH),
		X1: clampTo(math.Floor(hix+ex)+3, srcW), Y1: clampTo(math.Floor(hiy+ey)+3, srcH)}
	r.X0, r.Y0 = min(max(r.X0, 0), srcW), min(max(r.Y0, 0), srcH)
	r.X1, r.Y1 = max(min(r.X1, srcW), r.X0), max(min(r.Y1, srcH), r.Y0)
	return r, true
}

// The parity cases "perspective_matrix" (perspective's matrix for
// images[0] into dw x dh, float32) and "perspective" (images[0] and
// labels[0] warped: PerspectiveImage, PerspectiveInstances, a perspective
// when px or py is not 0).
func init() {
	persp := func(matrixOnly bool) func(c *CaseIn) (CaseOut, error) {
		return func(c *CaseIn) (CaseOut, error) {
			var a struct {
				sizeArgs
				Persp *PerspectiveParams `json:"perspective"`
			}
			if err := c.Args(&a); err != nil {
				return CaseOut{}, err
			}
			if a.Persp == nil {
				return CaseOut{}, errors.New("perspective: no parameters")
			}
			m := PerspectiveMatrix(*a.Persp, c.Images[0].W, c.Images[0].H, a.DW, a.DH)
			if matrixOnly {
				return CaseOut{Matrix: m[:]}, nil
			}
			if err := a.checkSize(); err != nil {
				return CaseOut{}, err
			}
			on := a.Persp.PX != 0 || a.Persp.PY != 0
			dst := newPlanes(a.DW, a.DH)
			PerspectiveImage(dst, c.Images[0], m, on)
			out := CaseOut{Images: []kernels.Planes{dst}, Matrix: m[:]}
			if len(c.Labels) > 0 {
				in := PerspectiveInstances(c.Labels[0], m, a.Persp.Scale, on, a.DW, a.DH)
				out.Labels = &in
			}
			return out, nil
		}
	}
	addCase("perspective_matrix", 1, persp(true))
	addCase("perspective", 1, persp(false))
}
