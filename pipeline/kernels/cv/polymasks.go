package cv

// Format(mask_overlap=False)'s masks: polygons2masks' one mask an
// instance, of the regions instanceMasks makes for the overlap mask
// (polymask.go), as bits; and those regions at ratio 1.

// PolygonMaskBits is the bytes AppendPolygonMasks appends for k masks of
// a w x h image at ratio r: their bits, padded to a multiple of 4 bytes.
func PolygonMaskBits(w, h, k, r int) int64 {
	n := int64(k) * int64(w/r) * int64(h/r)
	return ((n+7)/8 + 3) / 4 * 4
}

// AppendPolygonMasks appends polygons2masks((h, w), segments, color=1,
// downsample_ratio=r) (Format(mask_overlap=False)'s masks: one h/r x w/r
// mask an instance, in the instances' order, each its polygon filled as
// PolygonsToMasksOverlap fills it, 0 or 1) as bits: the K masks
// row-major one after the other, pixel n the bit n%8 of byte n/8 (numpy's
// packbits(bitorder="little")), then zeros to a multiple of 4 bytes.
func AppendPolygonMasks(b []byte, segs [][][2]float32, w, h, r int) []byte {
	regs, _ := instanceMasks(segs, w, h, r)
	return appendMaskBits(b, regs, w/r, h/r)
}

// appendMaskBits appends the regions' masks (of mw x mh) as
// AppendPolygonMasks lays them out.
func appendMaskBits(b []byte, regs []region, mw, mh int) []byte {
	base := len(b)
	n := int64(len(regs)) * int64(mw) * int64(mh)
	b = append(b, make([]byte, ((n+7)/8+3)/4*4)...)
	bits := b[base:]
	for k := range regs {
		rg := &regs[k]
		rw := rg.x1 - rg.x0
		at := k * mw * mh
		for j, v := range rg.px {
			if v != 0 {
				n := at + (rg.y0+j/rw)*mw + rg.x0 + j%rw
				bits[n>>3] |= 1 << (n & 7)
			}
		}
	}
	return b
}

// fillRegions is instanceMasks at ratio 1 (cv2.resize to the same size: a
// copy), each instance's mask kept to its polygon's extent (its points'
// least and greatest x and y, clipped to the image: all the fill writes),
// the image cleared back after each, its rows only.
func fillRegions(segs [][][2]float32, w, h int) ([]region, []uint64) {
	full := make([]byte, w*h)
	regs := make([]region, len(segs))
	areas := make([]uint64, len(segs))
	pts := make([][2]int32, 0, 1000)
	for k, s := range segs {
		if len(s) == 0 {
			continue
		}
		var minX, minY, maxX, maxY int32
		var on bool
		if pts, minX, minY, maxX, maxY, on = polyPoints(pts[:0], s, w, h); !on {
			continue // wholly off the image: nothing drawn
		}
		FillPoly(full, w, h, pts)
		rg := region{x0: max(int(minX), 0), x1: min(int(maxX), w-1) + 1, y0: max(int(minY), 0), y1: min(int(maxY), h-1) + 1}
		rw := rg.x1 - rg.x0
		rg.px = make([]byte, rw*(rg.y1-rg.y0))
		for y := rg.y0; y < rg.y1; y++ {
			row := rg.px[(y-rg.y0)*rw : (y-rg.y0+1)*rw]
			copy(row, full[y*w+rg.x0:y*w+rg.x1])
			for _, v := range row {
				areas[k] += uint64(v)
			}
		}
		regs[k] = rg
		clear(full[rg.y0*w : rg.y1*w])
	}
	return regs, areas
}

// The parity case "polygons2masks": labels[0]'s segments on a dw x dh
// image at ratio: the masks (K x dh/ratio x dw/ratio, 0 or 1: the bits
// AppendPolygonMasks packs).
func init() {
	addCase("polygons2masks", 0, func(c *CaseIn) (CaseOut, error) {
		a, err := masksCase(c, "polygons2masks")
		if err != nil {
			return CaseOut{}, err
		}
		segs := c.Labels[0].Segments
		bits := AppendPolygonMasks(nil, segs, a.DW, a.DH, a.Ratio)
		m := make([]int32, len(segs)*(a.DW/a.Ratio)*(a.DH/a.Ratio))
		for n := range m {
			m[n] = int32(bits[n>>3] >> (n & 7) & 1)
		}
		return CaseOut{Mask: m}, nil
	})
}
