package kernels

import "encoding/binary"

// The point ops: each output byte a function of its input byte (and, for
// equalize and autocontrast, of its plane's histogram or range), exactly
// torchvision's uint8 results.

// Solarize is solarize(img, threshold): bytes >= threshold inverted. The
// comparison is torch's, in float32 (the threshold rounded to float32);
// a threshold above 255 (which torchvision refuses) inverts nothing.
func Solarize(p Planes, threshold float64) {
	t := float32(threshold)
	k := 0 // the first byte inverted; 256: none
	for k < 256 && !(float32(k) >= t) {
		k++
	}
	solarizeBytes(p.Pix, k)
}

// solarizeBytesGo inverts the bytes from k up.
func solarizeBytesGo(pix []byte, k int) {
	var lut [256]byte
	for v := range lut {
		lut[v] = byte(v)
		if v >= k {
			lut[v] = ^byte(v)
		}
	}
	applyLUT(pix, &lut)
}

// SolarizeAdd is timm's solarize_add(img, addition, threshold) (PIL's
// Image.point with timm's table): bytes below the threshold get
// min(255, v + addition), clipped at 0 as PIL clips a table's values.
func SolarizeAdd(p Planes, addition int, threshold float64) {
	k := 0 // the bytes below k change
	for k < 256 && float64(k) < threshold {
		k++
	}
	addBelow(p.Pix, k, min(max(addition, -255), 255))
}

// addBelowGo adds a (-255..255, saturating) to the bytes below k.
func addBelowGo(pix []byte, k, a int) {
	var lut [256]byte
	for v := range lut {
		lut[v] = byte(v)
		if v < k {
			lut[v] = byte(min(max(v+a, 0), 255))
		}
	}
	applyLUT(pix, &lut)
}

// Posterize is posterize(img, bits): the top bits kept (bits >= 8: all;
// 0: none).
func Posterize(p Planes, bits int) {
	if bits >= 8 {
		return
	}
	mask := byte(0)
	if bits > 0 {
		mask = byte(0xff << (8 - bits))
	}
	andBytes(p.Pix, mask)
}

// Invert is invert(img): 255 - v.
func Invert(p Planes) {
	xorBytes(p.Pix, 0xff)
}

// andBytesGo sets every byte of pix to itself AND m, eight at a time.
func andBytesGo(pix []byte, m byte) {
	m8 := uint64(m) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(pix); i += 8 {
		binary.LittleEndian.PutUint64(pix[i:], binary.LittleEndian.Uint64(pix[i:])&m8)
	}
	for ; i < len(pix); i++ {
		pix[i] &= m
	}
}

// xorBytesGo sets every byte of pix to itself XOR m, eight at a time.
func xorBytesGo(pix []byte, m byte) {
	m8 := uint64(m) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(pix); i += 8 {
		binary.LittleEndian.PutUint64(pix[i:], binary.LittleEndian.Uint64(pix[i:])^m8)
	}
	for ; i < len(pix); i++ {
		pix[i] ^= m
	}
}

// Equalize is equalize(img), plane by plane, with torchvision's table (a
// variant of PIL's): with hist the plane's histogram, cum its running sum
// and step = (pixels not of the plane's largest value) / 255 (floor),
// lut[0] = 0 and lut[k] = min(255, (cum[k-1] + step/2) / step); a plane
// whose step is 0 (at most 255 pixels differ from its largest value, a
// constant plane among them) is left as it is.
func Equalize(p Planes) {
	for c := range 3 {
		pl := p.Plane(c)
		var hist [256]int
		histogram(pl, &hist)
		last := 255 // the largest value present: cum's first maximum
		for hist[last] == 0 {
			last--
		}
		step := (len(pl) - hist[last]) / 255
		if step == 0 {
			continue
		}
		var lut [256]byte
		cum := 0
		for k := 1; k < 256; k++ {
			cum += hist[k-1]
			lut[k] = byte(min((cum+step/2)/step, 255))
		}
		lookup(pl, &lut)
	}
}

// histogram counts pl's bytes into hist, in four sub-histograms so that
// runs of one value do not wait on their own increments.
func histogram(pl []byte, hist *[256]int) {
	var h [4][256]int32
	i := 0
	for ; i+4 <= len(pl); i += 4 {
		h[0][pl[i]]++
		h[1][pl[i+1]]++
		h[2][pl[i+2]]++
		h[3][pl[i+3]]++
	}
	for ; i < len(pl); i++ {
		h[0][pl[i]]++
	}
	for v := range hist {
		hist[v] = int(h[0][v]) + int(h[1][v]) + int(h[2][v]) + int(h[3][v])
	}
}

// Autocontrast is autocontrast(img), plane by plane: (v - min) / ((max -
// min) / 255) in float32, clamped, truncated; a constant plane is left as
// it is.
func Autocontrast(p Planes) {
	for c := range 3 {
		pl := p.Plane(c)
		lo, hi := minMax(pl)
		if lo >= hi {
			continue
		}
		// torch: maximum.sub_(minimum).mul_(1.0 / 255), then
		// float_image.sub_(minimum).div_(inv_scale), all float32.
		inv := float32(float32(hi-lo) * float32(1.0/255))
		var lut [256]byte
		for v := range lut {
			lut[v] = clampTrunc(float32(float32(v)-float32(lo)) / inv)
		}
		lookup(pl, &lut)
	}
}

// minMaxGo is the smallest and the largest byte of pl.
func minMaxGo(pl []byte) (lo, hi byte) {
	lo = 255
	for _, v := range pl {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	return lo, hi
}
