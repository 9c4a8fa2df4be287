package cv

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
)

// The masks ultralytics' Format(return_mask=True, mask_overlap=True) makes
// of a sample's segments (ultralytics.data.utils.polygons2masks_overlap):
// each segment's points truncated to int32, filled by cv2.fillPoly (color
// 1, LINE_8, shift 0) on the h x w image, resized by cv2.resize
// (INTER_LINEAR) to h/r x w/r; the instances ordered by that mask's area,
// largest first (np.argsort(-areas) of unsigned areas: an empty mask's 0
// sorts first); one map of the index (from 1) of the last, smallest,
// instance covering each pixel, 0 where none does.

// OpenCV's fixed point of its polygon fill: x in 1/65536 of a pixel.
const (
	xyShift = 16
	xyOne   = 1 << xyShift
)

// polyEdge is one edge of CollectPolyEdges: rows [y0, y1), x at y0 and its
// step a row, fixed point.
type polyEdge struct {
	y0, y1 int
	x, dx  int64
}

// clipLine is cv::clipLine(Size2l(w, h), p1, p2): the segment clipped to
// the image (Cohen-Sutherland with OpenCV's integer steps), and whether
// anything of it is inside.
func clipLine(w, h int64, p1, p2 *[2]int64) bool {
	right, bottom := w-1, h-1
	if w <= 0 || h <= 0 {
		return false
	}
	code := func(p *[2]int64) int {
		c := 0
		if p[0] < 0 {
			c |= 1
		}
		if p[0] > right {
			c |= 2
		}
		if p[1] < 0 {
			c |= 4
		}
		if p[1] > bottom {
			c |= 8
		}
		return c
	}
	c1, c2 := code(p1), code(p2)
	xcode := func(x int64) int {
		c := 0
		if x < 0 {
			c |= 1
		}
		if x > right {
			c |= 2
		}
		return c
	}
	if c1&c2 == 0 && c1|c2 != 0 {
		if c1&12 != 0 {
			a := bottom
			if c1 < 8 {
				a = 0
			}
			p1[0] += int64(float64(float64(a-p1[1])*float64(p2[0]-p1[0])) / float64(p2[1]-p1[1]))
			p1[1] = a
			c1 = xcode(p1[0])
		}
		if c2&12 != 0 {
			a := bottom
			if c2 < 8 {
				a = 0
			}
			p2[0] += int64(float64(float64(a-p2[1])*float64(p2[0]-p1[0])) / float64(p2[1]-p1[1]))
			p2[1] = a
			c2 = xcode(p2[0])
		}
		if c1&c2 == 0 && c1|c2 != 0 {
			if c1 != 0 {
				a := right
				if c1 == 1 {
					a = 0
				}
				p1[1] += int64(float64(float64(a-p1[0])*float64(p2[1]-p1[1])) / float64(p2[0]-p1[0]))
				p1[0] = a
				c1 = 0
			}
			if c2 != 0 {
				a := right
				if c2 == 1 {
					a = 0
				}
				p2[1] += int64(float64(float64(a-p2[0])*float64(p2[1]-p1[1])) / float64(p2[0]-p1[0]))
				p2[0] = a
				c2 = 0
			}
		}
	}
	return c1|c2 == 0
}

// line8 is cv::line's Line with 8-connectivity (LineIterator, left to
// right): Bresenham's pixels from p1 to p2, clipped to the image, set to 1.
func line8(m []byte, w, h int, p1, p2 [2]int64) {
	if p1[0] < 0 || p1[0] >= int64(w) || p2[0] < 0 || p2[0] >= int64(w) || p1[1] < 0 || p1[1] >= int64(h) || p2[1] < 0 || p2[1] >= int64(h) {
		if !clipLine(int64(w), int64(h), &p1, &p2) {
			return
		}
	}
	dx, dy := p2[0]-p1[0], p2[1]-p1[1]
	if dx < 0 { // left to right
		dx, dy = -dx, -dy
		p1 = p2
	}
	xstep, ystep := int64(1), int64(1) // along x, along y
	if dy < 0 {
		dy, ystep = -dy, -1
	}
	// The major axis moves every step (minus), the minor when err < 0 (plus).
	major, minor := [2]int64{xstep, 0}, [2]int64{0, ystep}
	if dy > dx {
		dx, dy = dy, dx
		major, minor = minor, major
	}
	err := dx - 2*dy
	x, y := p1[0], p1[1]
	for i := int64(0); i <= dx; i++ {
		m[int(y)*w+int(x)] = 1
		if err < 0 {
			err += 2*dx - 2*dy
			x, y = x+major[0]+minor[0], y+major[1]+minor[1]
		} else {
			err -= 2 * dy
			x, y = x+major[0], y+major[1]
		}
	}
}

// FillPoly is cv2.fillPoly(mask, [pts], 1) (LINE_8, shift 0) on a w x h
// mask of one byte a pixel: the polygon's outline drawn by cv::line, then
// its inside filled by OpenCV's scanline fill (CollectPolyEdges,
// FillEdgeCollection), both clipped to the mask.
func FillPoly(m []byte, w, h int, pts [][2]int32) {
	n := len(pts)
	if n == 0 {
		return
	}
	edges := make([]polyEdge, 0, n)
	prev := pts[n-1]
	for _, cur := range pts {
		p0, p1 := prev, cur
		prev = cur
		t0, t1 := [2]int64{int64(p0[0]), int64(p0[1])}, [2]int64{int64(p1[0]), int64(p1[1])}
		line8(m, w, h, t0, t1)
		y0c, y1c := t0[1], t1[1]
		if uint64(t0[0]) >= uint64(w) || uint64(t1[0]) >= uint64(w) || uint64(t0[1]) >= uint64(h) || uint64(t1[1]) >= uint64(h) {
			clipLine(int64(w), int64(h), &t0, &t1)
			if t0[1] != t1[1] {
				y0c, y1c = t0[1], t1[1]
			}
		}
		x0c, x1c := t0[0]<<xyShift, t1[0]<<xyShift
		if p0[1] == p1[1] {
			continue
		}
		e := polyEdge{dx: (x1c - x0c) / (y1c - y0c)}
		if p0[1] < p1[1] {
			e.y0, e.y1 = int(p0[1]), int(p1[1])
			e.x = x0c + (int64(p0[1])-y0c)*e.dx
		} else {
			e.y0, e.y1 = int(p1[1]), int(p0[1])
			e.x = x1c + (int64(p1[1])-y1c)*e.dx
		}
		edges = append(edges, e)
	}
	fillEdges(m, w, h, edges)
}

// fillEdges is FillEdgeCollection: row by row, the active edges in order
// of x (a new edge before an active one of the same x), each pair's span
// [ceil(x1), floor(x2)] set, then every edge steps, then the list is
// bubble-sorted by x (stable).
func fillEdges(m []byte, w, h int, edges []polyEdge) {
	if len(edges) < 2 {
		return
	}
	ymin, ymax := edges[0].y0, edges[0].y1
	xmin, xmax := edges[0].x, edges[0].x
	for _, e := range edges {
		x1 := e.x + int64(e.y1-e.y0)*e.dx
		ymin, ymax = min(ymin, e.y0), max(ymax, e.y1)
		xmin, xmax = min(xmin, e.x, x1), max(xmax, e.x, x1)
	}
	if ymax < 0 || ymin >= h || xmax < 0 || xmin >= int64(w)<<xyShift {
		return
	}
	slices.SortStableFunc(edges, func(ea, eb polyEdge) int { // generic: no reflection's swaps
		if c := cmp.Compare(ea.y0, eb.y0); c != 0 {
			return c
		}
		if c := cmp.Compare(ea.x, eb.x); c != 0 {
			return c
		}
		return cmp.Compare(ea.dx, eb.dx)
	})
	ymax = min(ymax, h)
	ones := bytes.Repeat([]byte{1}, w)
	var active, next []*polyEdge
	i := 0
	for y := edges[0].y0; y < ymax; y++ {
		// Drop the edges that end here; merge in those that start here.
		next = next[:0]
		k := 0
		for _, a := range active {
			if a.y1 == y {
				continue
			}
			for k < len(edges)-i && edges[i+k].y0 == y && !(a.x < edges[i+k].x) {
				next = append(next, &edges[i+k])
				k++
			}
			next = append(next, a)
		}
		for ; i+k < len(edges) && edges[i+k].y0 == y; k++ {
			next = append(next, &edges[i+k])
		}
		i += k
		active, next = next, active
		for j := 0; j+1 < len(active); j += 2 {
			a, b := active[j], active[j+1]
			if y >= 0 {
				var x1, x2 int
				if a.x > b.x {
					x1, x2 = int((b.x+xyOne-1)>>xyShift), int(a.x>>xyShift)
				} else {
					x1, x2 = int((a.x+xyOne-1)>>xyShift), int(b.x>>xyShift)
				}
				if x1 < w && x2 >= 0 {
					x1, x2 = max(x1, 0), min(x2, w-1)
					copy(m[y*w+x1:y*w+x2+1], ones) // the span set to 1
				}
			}
			a.x += a.dx
			b.x += b.dx
		}
		for end := len(active); end > 1; { // bubble sort by x
			last := 0
			for j := 0; j+1 < end; j++ {
				if active[j].x > active[j+1].x {
					active[j], active[j+1] = active[j+1], active[j]
					last = j + 1
				}
			}
			end = last
		}
	}
}

// resizeMask is cv2.resize(mask, (dw, dh)) (INTER_LINEAR) of a one-byte
// mask: ResizeLinear's arithmetic on one plane.
func resizeMask(dst []byte, dw, dh int, src []byte, sw, sh int) {
	switch {
	case sw == dw && sh == dh:
		copy(dst, src)
		return
	case sw == 2*dw && sh == 2*dh:
		halve(dst, src, dw, dh)
		return
	}
	tx, ty := resizeTaps(dw, sw, true), resizeTaps(dh, sh, false)
	rows := [2][]int32{make([]int32, dw), make([]int32, dw)}
	have := [2]int{-1, -1}
	for dy := 0; dy < dh; dy++ {
		sy := min(max(int(ty.ofs[dy]), 0), sh-1)
		sy1 := min(max(int(ty.ofs[dy])+1, 0), sh-1)
		r0 := hrow(&rows, &have, sy, src, sw, tx)
		r1 := hrow(&rows, &have, sy1, src, sw, tx)
		if sy1 == sy {
			r1 = r0
		}
		b0, b1 := int32(ty.w0[dy]), int32(ty.w1[dy])
		out := dst[dy*dw : (dy+1)*dw]
		for x := range out {
			out[x] = uint8((((b0 * (r0[x] >> 4)) >> 16) + ((b1 * (r1[x] >> 4)) >> 16) + 2) >> 2)
		}
	}
}

// PolygonsToMasksOverlap is polygons2masks_overlap((h, w), segments,
// downsample_ratio=r): the index map (h/r x w/r, 0 or an instance's
// position in order plus 1; values past 255 need K above 255, which
// ultralytics holds in int32) and order, the instances by area, largest
// first (ties in index order, as numpy's argsort keeps them for up to 16;
// its unstable sort may order more ties otherwise).
func PolygonsToMasksOverlap(segs [][][2]float32, w, h, r int) (masks []int32, order []int) {
	regs, areas := instanceMasks(segs, w, h, r)
	return overlapOf(regs, areas, w/r, h/r)
}

// overlapOf is the index map of the instances' masks (regs, of mw x mh)
// and their order, by area (areas) largest first.
func overlapOf(regs []region, areas []uint64, mw, mh int) (masks []int32, order []int) {
	order = make([]int, len(regs))
	for k := range order {
		order[k] = k
	}
	sortByArea(order, areas)
	masks = make([]int32, mw*mh)
	for i, k := range order {
		rg := &regs[k]
		rw := rg.x1 - rg.x0
		for j, v := range rg.px {
			if v != 0 {
				masks[(rg.y0+j/rw)*mw+rg.x0+j%rw] = int32(i + 1) // np.maximum with (i+1): later (smaller) wins
			}
		}
	}
	return masks, order
}

// region is one instance's mask at the output size: its columns [x0,
// x1) and rows [y0, y1), 0 elsewhere.
type region struct {
	x0, x1, y0, y1 int
	px             []byte
}

// instanceMasks is each segment's polygon2mask((h, w), [segment],
// downsample_ratio=r) (its points truncated to int32, cv2.fillPoly, then
// cv2.resize to w/r x h/r) as a region, and its area (the mask's sum).
func instanceMasks(segs [][][2]float32, w, h, r int) ([]region, []uint64) {
	mw, mh := w/r, h/r
	switch {
	case r == 1:
		return fillRegions(segs, w, h)
	case mw > 0 && mh > 0 && !(mw == w && mh == h) && !(w == 2*mw && h == 2*mh):
		return overlapRegions(segs, w, h, mw, mh)
	}
	return instanceMasksFull(segs, w, h, r)
}

// polygonsToMasksOverlapFull is PolygonsToMasksOverlap the plain way: each
// instance filled on the whole image, the whole image resized.
func polygonsToMasksOverlapFull(segs [][][2]float32, w, h, r int) (masks []int32, order []int) {
	regs, areas := instanceMasksFull(segs, w, h, r)
	return overlapOf(regs, areas, w/r, h/r)
}

// instanceMasksFull is instanceMasks the plain way: each instance filled
// on the whole image, the whole image resized (its region the whole map).
func instanceMasksFull(segs [][][2]float32, w, h, r int) ([]region, []uint64) {
	mw, mh := w/r, h/r
	full := make([]byte, w*h)
	regs := make([]region, len(segs))
	areas := make([]uint64, len(segs))
	pts := make([][2]int32, 0, 1000)
	for k, s := range segs {
		clear(full)
		pts = pts[:0]
		for _, p := range s {
			pts = append(pts, [2]int32{int32(p[0]), int32(p[1])}) // np.asarray(..., dtype=np.int32): truncated
		}
		FillPoly(full, w, h, pts)
		regs[k] = region{x1: mw, y1: mh, px: make([]byte, mw*mh)}
		resizeMask(regs[k].px, mw, mh, full, w, h)
		for _, v := range regs[k].px {
			areas[k] += uint64(v)
		}
	}
	return regs, areas
}

// sortByArea orders order by areas, largest first, ties in index order:
// np.argsort(-areas) of uint64 (-a wraps, so 0 is the least).
func sortByArea(order []int, areas []uint64) {
	sort.SliceStable(order, func(a, b int) bool { return -areas[order[a]] < -areas[order[b]] })
}

// overlapRegions is instanceMasks through cv2.resize's linear path (mw x
// mh neither the image nor its half), each instance's work kept to its
// polygon's extent: the fill writes only the rows between its points'
// least and greatest y and the columns between their least and greatest x
// (clipped to the image), so the downsampled mask is 0 wherever its taps
// read nothing of those (the taps of an all-zero neighbourhood sum to 0,
// rounded down), and only the output rows and columns whose taps do are
// computed, with the same arithmetic (resizeMask's). The image is cleared
// back after each instance, its rows only.
func overlapRegions(segs [][][2]float32, w, h, mw, mh int) ([]region, []uint64) {
	tx, ty := resizeTaps(mw, w, true), resizeTaps(mh, h, false)
	full := make([]byte, w*h)
	regs := make([]region, len(segs))
	areas := make([]uint64, len(segs))
	pts := make([][2]int32, 0, 1000)
	r0, r1 := make([]int32, mw), make([]int32, mw)
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
		sx0, sx1 := max(int(minX)-1, 0), min(int(maxX)+1, w-1)
		sy0, sy1 := max(int(minY)-1, 0), min(int(maxY)+1, h-1)
		reads := func(a, b, lo, hi int) bool { return a >= lo && a <= hi || b >= lo && b <= hi }
		rg := region{x0: mw, y0: mh}
		for x := 0; x < mw; x++ {
			a, b := int(tx.ofs[x]), int(tx.ofs[x])
			if x < tx.edge {
				b++
			}
			if reads(a, b, sx0, sx1) {
				rg.x0, rg.x1 = min(rg.x0, x), x+1
			}
		}
		for y := 0; y < mh; y++ {
			a := min(max(int(ty.ofs[y]), 0), h-1)
			b := min(max(int(ty.ofs[y])+1, 0), h-1)
			if reads(a, b, sy0, sy1) {
				rg.y0, rg.y1 = min(rg.y0, y), y+1
			}
		}
		if rg.x1 > rg.x0 && rg.y1 > rg.y0 {
			rw := rg.x1 - rg.x0
			rg.px = make([]byte, rw*(rg.y1-rg.y0))
			for y := rg.y0; y < rg.y1; y++ {
				sy := min(max(int(ty.ofs[y]), 0), h-1)
				sy1 := min(max(int(ty.ofs[y])+1, 0), h-1)
				hrowSpan(r0, full[sy*w:(sy+1)*w], tx, rg.x0, rg.x1)
				hrowSpan(r1, full[sy1*w:(sy1+1)*w], tx, rg.x0, rg.x1)
				b0, b1 := int32(ty.w0[y]), int32(ty.w1[y])
				out := rg.px[(y-rg.y0)*rw : (y-rg.y0+1)*rw]
				for i := range out {
					x := rg.x0 + i
					v := uint8((((b0 * (r0[x] >> 4)) >> 16) + ((b1 * (r1[x] >> 4)) >> 16) + 2) >> 2)
					out[i] = v
					areas[k] += uint64(v)
				}
			}
		}
		regs[k] = rg
		clear(full[sy0*w : (sy1+1)*w])
	}
	return regs, areas
}

// hrowSpan is hrow's horizontal pass of one source row for the outputs
// [x0, x1) alone, into row[x0:x1].
func hrowSpan(row []int32, src []byte, tx linearTaps, x0, x1 int) {
	for x := x0; x < min(x1, tx.edge); x++ {
		s := tx.ofs[x]
		row[x] = int32(src[s])*int32(tx.w0[x]) + int32(src[s+1])*int32(tx.w1[x])
	}
	for x := max(x0, tx.edge); x < x1; x++ {
		row[x] = int32(src[tx.ofs[x]]) * resizeCoefScale
	}
}

// polyPoints appends polygon s's vertices to pts as cv2.fillPoly takes
// them (np.asarray(..., dtype=np.int32): truncated), with their least and
// greatest x and y; on is false when the polygon lies wholly off the w x h
// image (nothing is drawn).
func polyPoints(pts [][2]int32, s [][2]float32, w, h int) (_ [][2]int32, minX, minY, maxX, maxY int32, on bool) {
	minX, minY, maxX, maxY = int32(math.MaxInt32), int32(math.MaxInt32), int32(math.MinInt32), int32(math.MinInt32)
	for _, p := range s {
		q := [2]int32{int32(p[0]), int32(p[1])}
		pts = append(pts, q)
		minX, maxX, minY, maxY = min(minX, q[0]), max(maxX, q[0]), min(minY, q[1]), max(maxY, q[1])
	}
	return pts, minX, minY, maxX, maxY, !(maxX < 0 || maxY < 0 || int(minX) >= w || int(minY) >= h)
}

// maskArgs are a polygon-mask case's: the image's size (dw x dh) and the
// ratio its masks are downsampled by.
type maskArgs struct {
	sizeArgs
	Ratio int `json:"ratio"`
}

// masksCase reads a polygon-mask case's arguments, refusing what the
// masks cannot have.
func masksCase(c *CaseIn, name string) (maskArgs, error) {
	var a maskArgs
	if err := c.Args(&a); err != nil {
		return a, err
	}
	if len(c.Labels) != 1 || a.DW < 1 || a.DH < 1 || a.DW > 1<<14 || a.DH > 1<<14 || a.Ratio < 1 || a.Ratio > min(a.DW, a.DH) {
		return a, fmt.Errorf("%s: want one labels, dw and dh 1..16384, ratio 1..min(dw, dh)", name)
	}
	return a, nil
}

// The parity case "polygons2masks_overlap": labels[0]'s segments on a
// dw x dh image at ratio: the mask (dh/ratio x dw/ratio) and, as its
// ints, the order.
func init() {
	addCase("polygons2masks_overlap", 0, func(c *CaseIn) (CaseOut, error) {
		a, err := masksCase(c, "polygons2masks_overlap")
		if err != nil {
			return CaseOut{}, err
		}
		m, order := PolygonsToMasksOverlap(c.Labels[0].Segments, a.DW, a.DH, a.Ratio)
		return CaseOut{Mask: m, Ints: order}, nil
	})
}
