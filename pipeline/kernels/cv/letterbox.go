package cv

import (
	"errors"
	"math"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// LetterBoxArgs are ultralytics' LetterBox's: the target (height, width),
// auto (pad to a multiple of Stride only), scale_fill (stretch, no
// padding), scaleup (allow r > 1), center (pad both sides, else right and
// bottom only). Padding is 114 and the resize INTER_LINEAR (its defaults).
type LetterBoxArgs struct {
	H         int  `json:"h"`
	W         int  `json:"w"`
	Auto      bool `json:"auto"`
	ScaleFill bool `json:"scale_fill"`
	ScaleUp   bool `json:"scaleup"`
	Center    bool `json:"center"`
	Stride    int  `json:"stride"`
}

// LetterBoxGeom is what LetterBox.get_params computes: the ratios (w, h),
// the unpadded size, and the padding on each side.
type LetterBoxGeom struct {
	RatioW, RatioH           float64
	UnpadW, UnpadH           int
	Top, Bottom, Left, Right int
}

// Size is the letterboxed image's size.
func (g LetterBoxGeom) Size() (int, int) {
	return g.UnpadW + g.Left + g.Right, g.UnpadH + g.Top + g.Bottom
}

// LetterBoxParams is LetterBox.get_params for a w x h image, with Python's
// rounding (half to even) of the unpadded size and of the padding split
// (round(d - 0.1), round(d + 0.1)).
func LetterBoxParams(a LetterBoxArgs, w, h int) LetterBoxGeom {
	r := min(float64(a.H)/float64(h), float64(a.W)/float64(w))
	if !a.ScaleUp {
		r = min(r, 1)
	}
	g := LetterBoxGeom{RatioW: r, RatioH: r}
	g.UnpadW = max(int(math.RoundToEven(float64(w)*r)), 1)
	g.UnpadH = max(int(math.RoundToEven(float64(h)*r)), 1)
	dw, dh := float64(a.W-g.UnpadW), float64(a.H-g.UnpadH)
	switch {
	case a.Auto:
		dw, dh = float64(pyMod(a.W-g.UnpadW, a.Stride)), float64(pyMod(a.H-g.UnpadH, a.Stride))
	case a.ScaleFill:
		dw, dh = 0, 0
		g.UnpadW, g.UnpadH = a.W, a.H
		g.RatioW, g.RatioH = float64(a.W)/float64(w), float64(a.H)/float64(h)
	}
	if a.Center {
		dw, dh = float64(dw/2), float64(dh/2)
		g.Top, g.Left = int(math.RoundToEven(dh-0.1)), int(math.RoundToEven(dw-0.1))
	}
	g.Bottom, g.Right = int(math.RoundToEven(dh+0.1)), int(math.RoundToEven(dw+0.1))
	return g
}

// pyMod is Python's (and np.mod's) integer modulo: the sign of the divisor.
func pyMod(a, b int) int {
	m := a % b
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return m
}

// LetterBoxImage is LetterBox.apply_image: src resized to the unpadded size
// (ResizeLinear, unless it is that size) and padded with 114
// (cv2.copyMakeBorder) into dst, which must be g.Size(). scratch holds the
// resized image (3*UnpadW*UnpadH bytes; nil allocates).
func LetterBoxImage(dst, src kernels.Planes, g LetterBoxGeom, scratch []byte) {
	rs := src
	if src.W != g.UnpadW || src.H != g.UnpadH {
		if cap(scratch) < 3*g.UnpadW*g.UnpadH {
			scratch = make([]byte, 3*g.UnpadW*g.UnpadH)
		}
		rs = kernels.Planes{Pix: scratch[:3*g.UnpadW*g.UnpadH], W: g.UnpadW, H: g.UnpadH}
		ResizeLinear(rs, src)
	}
	Paste(dst, rs, g.Left, g.Top, true)
}

// Paste writes src into dst at (x, y), the part of it that falls inside;
// with fill, every other pixel of dst is 114.
func Paste(dst, src kernels.Planes, x, y int, fill bool) {
	n, dn := src.W*src.H, dst.W*dst.H
	for c := 0; c < 3; c++ {
		dp, sp := dst.Pix[c*dn:(c+1)*dn], src.Pix[c*n:(c+1)*n]
		for dy := 0; dy < dst.H; dy++ {
			row := dp[dy*dst.W : (dy+1)*dst.W]
			sy := dy - y
			if sy < 0 || sy >= src.H {
				if fill {
					fill114(row)
				}
				continue
			}
			x0, x1 := max(x, 0), min(x+src.W, dst.W)
			if x1 <= x0 {
				if fill {
					fill114(row)
				}
				continue
			}
			if fill {
				fill114(row[:x0])
				fill114(row[x1:])
			}
			copy(row[x0:x1], sp[sy*src.W+x0-x:sy*src.W+x1-x])
		}
	}
}

// fill114 sets every byte of b to 114: copies of slab114 (memmove's
// speed: a 2s canvas a mosaic took 1.2 ms a sample in the byte loop, which
// Go does not make a memset; a mosaic fills it a row at a time).
func fill114(b []byte) {
	for n := 0; n < len(b); {
		n += copy(b[n:], slab114[:])
	}
}

// slab114 is 4 KiB of 114, what fill114 copies.
var slab114 = func() (s [4096]byte) {
	for i := range s {
		s[i] = 114
	}
	return s
}()

// LetterBoxInstances is LetterBox._update_labels: coordinates times the
// ratios, plus the left and top padding, in float32.
func LetterBoxInstances(in *Instances, g LetterBoxGeom) {
	in.Scale(float32(g.RatioW), float32(g.RatioH), false)
	in.AddPadding(float32(g.Left), float32(g.Top))
}

// The parity case "letterbox": images[0] and labels[0] letterboxed
// (LetterBoxParams, LetterBoxImage, LetterBoxInstances); its ints the
// padding top, bottom, left, right and the unpadded w, h.
func init() {
	addCase("letterbox", 1, func(c *CaseIn) (CaseOut, error) {
		var a struct {
			LetterBox *LetterBoxArgs `json:"letterbox"`
		}
		if err := c.Args(&a); err != nil {
			return CaseOut{}, err
		}
		if a.LetterBox == nil {
			return CaseOut{}, errors.New("letterbox: no arguments")
		}
		g := LetterBoxParams(*a.LetterBox, c.Images[0].W, c.Images[0].H)
		dst := newPlanes(g.Size())
		LetterBoxImage(dst, c.Images[0], g, nil)
		out := CaseOut{Images: []kernels.Planes{dst}, Ints: []int{g.Top, g.Bottom, g.Left, g.Right, g.UnpadW, g.UnpadH}}
		if len(c.Labels) > 0 {
			in := c.Labels[0]
			LetterBoxInstances(&in, g)
			out.Labels = &in
		}
		return out, nil
	})
}
