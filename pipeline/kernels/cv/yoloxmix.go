package cv

import (
	"errors"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// YOLOX's MixUp (Megvii-BaseDetection/YOLOX at 6ddff48,
// yolox/data/datasets/mosaicdetection.py, MosaicDetection.mixup): the
// partner, loaded as its COCODataset's load_resized_img loads it, is
// resized again by the mixup's own ratio and pasted at the top left of an
// input_dim canvas of 114, the canvas resized by a drawn jit factor,
// mirrored when drawn so, padded with 0 to at least the sample's size and
// cropped at a drawn offset; the sample and that crop are averaged
// (0.5*a + 0.5*b in float32, truncated to uint8: (a+b)>>1), and the
// partner's boxes, moved the same way and clipped, follow the sample's.
// cv2.resize is ResizeLinear (OpenCV's bytes). In YOLOX input_dim is the
// sample's own size (the mosaic's random_affine output).

// YOLOXMix is one YOLOX MixUp's geometry: the partner's size, each
// resize's ratio and size as the reference computes them (float64, sizes
// truncated by int()), the jit and flip drawn, and the crop's offset.
type YOLOXMix struct {
	W0, H0 int     // the partner as decoded
	R      float64 // load_resized_img's ratio: min(H/h0, W/w0)
	W1, H1 int     // its size after it: (int(w0*r), int(h0*r))
	R2     float64 // mixup's cp_scale_ratio before the jit: min(H/h1, W/w1)
	W2, H2 int     // the size pasted on the canvas
	W, H   int     // input_dim, the sample's size
	Jit    float64 // jit_factor
	JW, JH int     // the canvas after the jit: (int(W*jit), int(H*jit))
	Flip   bool
	XO, YO int // the crop's offset in the padded canvas
}

// YOLOXMixSizes is the geometry of a partner of w0 x h0 mixed into a
// sample of w x h at jit, before its flip and offset are drawn: an error
// where a resize would reach no pixel (a partner far thinner than the
// sample, or a jit that leaves no canvas).
func YOLOXMixSizes(w0, h0, w, h int, jit float64) (YOLOXMix, error) {
	m := YOLOXMix{W0: w0, H0: h0, W: w, H: h, Jit: jit}
	m.R = min(float64(h)/float64(h0), float64(w)/float64(w0))
	m.W1, m.H1 = int(float64(float64(w0)*m.R)), int(float64(float64(h0)*m.R))
	if m.W1 < 1 || m.H1 < 1 {
		return m, fmt.Errorf("yolox mixup: a partner of %dx%d resized by %v into %dx%d has no pixel", w0, h0, m.R, w, h)
	}
	m.R2 = min(float64(h)/float64(m.H1), float64(w)/float64(m.W1))
	m.W2, m.H2 = int(float64(float64(m.W1)*m.R2)), int(float64(float64(m.H1)*m.R2))
	m.JW, m.JH = int(float64(float64(w)*jit)), int(float64(float64(h)*jit))
	if m.W2 < 1 || m.H2 < 1 || m.W2 > w || m.H2 > h || m.JW < 1 || m.JH < 1 {
		return m, fmt.Errorf("yolox mixup: a partner of %dx%d at %dx%d, its canvas %dx%d jittered to %dx%d: no pixel", w0, h0, m.W2, m.H2, w, h, m.JW, m.JH)
	}
	return m, nil
}

// Padded is the padded canvas's size: the jittered canvas's, at least the
// sample's. The offsets are drawn within it (random.randint(0, ph-h-1)
// where ph > h, else 0).
func (m *YOLOXMix) Padded() (pw, ph int) { return max(m.JW, m.W), max(m.JH, m.H) }

// YOLOXMixCanvas makes the jittered canvas into jit (m.JW x m.JH) from
// the partner src (m.W0 x m.H0): resized to W1 x H1 into a, again to W2
// x H2 into b when the mixup's ratio changes its size, pasted on a W x H
// canvas of 114 (c), which is resized into jit. a, b and c are scratch
// (grown as needed, returned for reuse).
func YOLOXMixCanvas(jit, src kernels.Planes, m *YOLOXMix, a, b, c []byte) ([]byte, []byte, []byte) {
	grow := func(buf []byte, w, h int) ([]byte, kernels.Planes) {
		if cap(buf) < 3*w*h {
			buf = make([]byte, 3*w*h)
		}
		return buf, kernels.Planes{Pix: buf[:3*w*h], W: w, H: h}
	}
	a, r1 := grow(a, m.W1, m.H1)
	ResizeLinear(r1, src)
	if m.W2 != m.W1 || m.H2 != m.H1 {
		var r2 kernels.Planes
		b, r2 = grow(b, m.W2, m.H2)
		ResizeLinear(r2, r1)
		r1 = r2
	}
	c, canvas := grow(c, m.W, m.H)
	Paste(canvas, r1, 0, 0, true)
	ResizeLinear(jit, canvas)
	return a, b, c
}

// YOLOXMixImage averages into a (the sample, m.W x m.H) the crop at
// (m.XO, m.YO) of the jittered canvas jit (m.JW x m.JH), mirrored when
// m.Flip, 0 where the crop leaves it: (a+b)>>1, the reference's
// (0.5*a + 0.5*b).astype(uint8), exact in float32.
func YOLOXMixImage(a, jit kernels.Planes, m *YOLOXMix) {
	n, jn := a.W*a.H, jit.W*jit.H
	for c := 0; c < 3; c++ {
		ap, jp := a.Pix[c*n:(c+1)*n], jit.Pix[c*jn:(c+1)*jn]
		for y := 0; y < a.H; y++ {
			row := ap[y*a.W : (y+1)*a.W]
			sy := y + m.YO
			if sy >= jit.H {
				for x, v := range row {
					row[x] = v >> 1
				}
				continue
			}
			src := jp[sy*jit.W : (sy+1)*jit.W]
			for x, v := range row {
				var b byte
				if sx := x + m.XO; sx < jit.W {
					if m.Flip {
						sx = jit.W - 1 - sx
					}
					b = src[sx]
				}
				row[x] = byte((uint16(v) + uint16(b)) >> 1)
			}
		}
	}
}

// YOLOXMixBoxes appends to dst the partner's boxes (XYXY in pixels of its
// decoded size, as float32) moved as the reference moves cp_labels: times
// load_anno's r (float64), adjust_box_anns (times r2*jit, clipped to the
// jittered canvas), mirrored (x becomes JW - x, the ends swapped),
// translated by the offset and clipped to the sample; float32 at the end.
// Boxes left empty by the clip stay (YOLOX's mixup keeps them).
func YOLOXMixBoxes(dst [][4]float32, boxes [][4]float32, m *YOLOXMix) [][4]float32 {
	s := float64(m.R2 * m.Jit)
	jw, jh := float64(m.JW), float64(m.JH)
	clip := func(v, hi float64) float64 { return min(max(v, 0), hi) }
	for _, b := range boxes {
		var o [4]float64
		for i, v := range b {
			hi := jw
			if i%2 == 1 {
				hi = jh
			}
			o[i] = clip(float64(float64(float64(float64(v)*m.R)*s)+0), hi)
		}
		if m.Flip {
			o[0], o[2] = jw-o[2], jw-o[0]
		}
		o[0], o[2] = clip(o[0]-float64(m.XO), float64(m.W)), clip(o[2]-float64(m.XO), float64(m.W))
		o[1], o[3] = clip(o[1]-float64(m.YO), float64(m.H)), clip(o[3]-float64(m.YO), float64(m.H))
		dst = append(dst, [4]float32{float32(o[0]), float32(o[1]), float32(o[2]), float32(o[3])})
	}
	return dst
}

// The parity case "yolox_mixup": images[0] the sample (w x h), images[1]
// the partner as decoded, labels[1] its boxes in its pixels (labels[0]
// the sample's); jit, flip, x_offset and y_offset the draws. Out: the
// mixed sample and the labels concatenated.
func init() {
	addCase("yolox_mixup", 2, func(c *CaseIn) (CaseOut, error) {
		var a struct {
			Jit  float64 `json:"jit"`
			Flip bool    `json:"flip"`
			XO   int     `json:"x_offset"`
			YO   int     `json:"y_offset"`
		}
		if err := c.Args(&a); err != nil {
			return CaseOut{}, err
		}
		ps := c.Images
		if len(c.Labels) != 2 {
			return CaseOut{}, errors.New("yolox_mixup: want the sample, the partner and both's labels")
		}
		if !(a.Jit > 0 && a.Jit <= 4) {
			return CaseOut{}, fmt.Errorf("yolox_mixup: jit %v: want (0, 4]", a.Jit)
		}
		m, err := YOLOXMixSizes(ps[1].W, ps[1].H, ps[0].W, ps[0].H, a.Jit)
		if err != nil {
			return CaseOut{}, err
		}
		m.Flip, m.XO, m.YO = a.Flip, a.XO, a.YO
		if pw, ph := m.Padded(); m.XO < 0 || m.YO < 0 || m.XO+m.W > pw || m.YO+m.H > ph {
			return CaseOut{}, fmt.Errorf("yolox_mixup: offset (%d, %d) outside the padded canvas %dx%d", m.XO, m.YO, pw, ph)
		}
		jit := newPlanes(m.JW, m.JH)
		YOLOXMixCanvas(jit, ps[1], &m, nil, nil, nil)
		YOLOXMixImage(ps[0], jit, &m)
		two := Instances{Boxes: YOLOXMixBoxes(nil, c.Labels[1].Boxes, &m), Cls: c.Labels[1].Cls}
		out := Concat(c.Labels[0], two)
		return CaseOut{Images: ps[:1], Labels: &out}, nil
	})
}
