package cv

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline/internal/det"
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
