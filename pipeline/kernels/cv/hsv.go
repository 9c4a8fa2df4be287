package cv

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// hsvShift is the fixed point of OpenCV's RGB2HSV_b (color_hsv.simd.hpp).
const hsvShift = 12

// The division tables of RGB2HSV_b for a hue range of 180:
// sdiv[v] = round((255 << 12) / v), hdiv[d] = round((180 << 12) / (6 d)),
// both 0 at 0 (saturate_cast<int> of a double: nearest, ties to even).
var sdivTable, hdivTable = func() (s, h [256]int32) {
	for i := 1; i < 256; i++ {
		s[i] = int32(math.RoundToEven(float64(255<<hsvShift) / float64(i)))
		h[i] = int32(math.RoundToEven(float64(180<<hsvShift) / float64(6*i)))
	}
	return
}()

// hsvFromRGB is cv2.cvtColor(COLOR_BGR2HSV) of one pixel on uint8: H in
// 0..179, S and V in 0..255.
func hsvFromRGB(r, g, b int32) (h, s, v int32) {
	v = max(r, g, b)
	vmin := min(r, g, b)
	diff := v - vmin
	s = (diff*sdivTable[v] + 1<<(hsvShift-1)) >> hsvShift
	switch {
	case v == r:
		h = g - b
	case v == g:
		h = b - r + 2*diff
	default:
		h = r - g + 4*diff
	}
	h = (h*hdivTable[diff] + 1<<(hsvShift-1)) >> hsvShift
	if h < 0 {
		h += 180
	}
	return h, s, v
}

// hsvSector is HSV2RGB_native's table: for each sector, which of
// (v, v(1-s), v(1-sh), v(1-s(1-h))) is b, g and r.
var hsvSector = [6][3]int{{1, 3, 0}, {1, 0, 2}, {3, 0, 1}, {0, 2, 1}, {0, 1, 3}, {2, 1, 0}}

// rgbFromHSV is cv2.cvtColor(COLOR_HSV2BGR) of one pixel on uint8 (hue
// range 180): in float, s and v over 255, the hue times 6/180 split into
// its sector and fraction, each channel times 255 rounded to nearest even.
func rgbFromHSV(h, s, v uint8) (r, g, b uint8) {
	fs, fv := float32(float32(s)*(1.0/255)), float32(float32(v)*(1.0/255))
	var fb, fg, fr float32
	if fs == 0 {
		fb, fg, fr = fv, fv, fv
	} else {
		fh := float32(float32(h) * (6.0 / 180))
		fh = float32(math.Mod(float64(fh), 6))
		sector := int(math.Floor(float64(fh)))
		fh -= float32(sector)
		if uint(sector) >= 6 {
			sector, fh = 0, 0
		}
		tab := [4]float32{fv, float32(fv * (1 - fs)), float32(fv * (1 - float32(fs*fh))), float32(fv * (1 - float32(fs*(1-fh))))}
		fb, fg, fr = tab[hsvSector[sector][0]], tab[hsvSector[sector][1]], tab[hsvSector[sector][2]]
	}
	return roundSat(float32(fr * 255)), roundSat(float32(fg * 255)), roundSat(float32(fb * 255))
}

// HSVLUTs are RandomHSV's three tables for the drawn gains r (ultralytics'
// r = uniform(-1, 1, 3) * [hgain, sgain, vgain]), as numpy computes them
// in float64 and casts them to uint8: hue (x + r[0]*180) mod 180,
// saturation and value x*(r+1) clipped to 0..255, saturation 0 kept 0.
func HSVLUTs(r [3]float64) (hue, sat, val [256]uint8) {
	for i := 0; i < 256; i++ {
		x := float64(i)
		m := math.Mod(x+float64(r[0]*180), 180)
		if m < 0 {
			m += 180
		}
		hue[i] = uint8(m)
		sat[i] = uint8(min(max(float64(x*(r[1]+1)), 0), 255))
		val[i] = uint8(min(max(float64(x*(r[2]+1)), 0), 255))
	}
	sat[0] = 0
	return
}

// RandomHSV is ultralytics' RandomHSV.apply_image with the drawn gains r,
// in place: cv2.cvtColor(BGR2HSV), cv2.LUT with HSVLUTs, cv2.cvtColor(
// HSV2BGR), on the planes' R, G and B.
func RandomHSV(p kernels.Planes, r [3]float64) {
	hue, sat, val := HSVLUTs(r)
	hsvPixels(p, &hue, &sat, &val)
}

// hsvPixelsGo is RandomHSV's loop with the tables made: hsvPixels' Go
// version, the pure-Go build's and the reference of the C (cv.c) in the
// tests.
func hsvPixelsGo(p kernels.Planes, hue, sat, val *[256]uint8) {
	n := p.W * p.H
	rp, gp, bp := p.Pix[:n], p.Pix[n:2*n], p.Pix[2*n:3*n]
	for i := 0; i < n; i++ {
		h, s, v := hsvFromRGB(int32(rp[i]), int32(gp[i]), int32(bp[i]))
		rp[i], gp[i], bp[i] = rgbFromHSV(hue[h], sat[s], val[v])
	}
}

// hsvBack is what rgbFromHSV computes from each value of a byte alone, for
// the C: the hue's fraction and sector (0..5), and the byte over 255 (for
// the saturation and the value), each as rgbFromHSV rounds it.
type hsvBack struct {
	frac   [256]float32
	sector [256]uint8
	over   [256]float32
}

// hsvBackTables are the hsvBack of every byte.
var hsvBackTables = func() (t hsvBack) {
	for i := 0; i < 256; i++ {
		fh := float32(float32(uint8(i)) * (6.0 / 180))
		fh = float32(math.Mod(float64(fh), 6))
		sector := int(math.Floor(float64(fh)))
		fh -= float32(sector)
		if uint(sector) >= 6 {
			sector, fh = 0, 0
		}
		t.frac[i], t.sector[i] = fh, uint8(sector)
		t.over[i] = float32(float32(uint8(i)) * (1.0 / 255))
	}
	return
}()

// The parity case "hsv": images[0] with gains (RandomHSV), in place.
func init() {
	addCase("hsv", 1, func(c *CaseIn) (CaseOut, error) {
		var a struct {
			Gains [3]float64 `json:"gains"`
		}
		if err := c.Args(&a); err != nil {
			return CaseOut{}, err
		}
		RandomHSV(c.Images[0], a.Gains)
		return CaseOut{Images: c.Images[:1]}, nil
	})
}
