package cv

import (
	"errors"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Tile is where one image of a mosaic goes: its part [X1b, X1b+W) x
// [Y1b, Y1b+H) lands at (X1a, Y1a) of the canvas, and its labels move by
// (PadW, PadH).
type Tile struct {
	X1a, Y1a, X1b, Y1b, W, H int
	PadW, PadH               int
}

// MosaicLayout is Mosaic.get_params' layout for n = 4 or 9 images of the
// given sizes (each (w, h) as load_image resized it; the first is the
// sample's own) on the canvas of imgsz s: for 4, the 2s x 2s canvas split
// at the drawn centre (xc, yc), each image against its corner of it; for
// 9, the 3s x 3s canvas (its centre tile at (s, s), the others around it
// clockwise from the top), cropped to its middle 2s x 2s (the offset by
// -s/2 folded into the tiles here), xc and yc unused.
func MosaicLayout(n, s, xc, yc int, sizes [][2]int) ([]Tile, error) {
	if (n != 4 && n != 9) || len(sizes) != n || s < 1 {
		return nil, fmt.Errorf("cv: mosaic of %d images with %d sizes, imgsz %d: want 4 or 9 of each", n, len(sizes), s)
	}
	tiles := make([]Tile, n)
	if n == 4 {
		for i, sz := range sizes {
			w, h := sz[0], sz[1]
			var x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b int
			switch i {
			case 0: // top left
				x1a, y1a, x2a, y2a = max(xc-w, 0), max(yc-h, 0), xc, yc
				x1b, y1b, x2b, y2b = w-(x2a-x1a), h-(y2a-y1a), w, h
			case 1: // top right
				x1a, y1a, x2a, y2a = xc, max(yc-h, 0), min(xc+w, s*2), yc
				x1b, y1b, x2b, y2b = 0, h-(y2a-y1a), min(w, x2a-x1a), h
			case 2: // bottom left
				x1a, y1a, x2a, y2a = max(xc-w, 0), yc, xc, min(s*2, yc+h)
				x1b, y1b, x2b, y2b = w-(x2a-x1a), 0, w, min(y2a-y1a, h)
			case 3: // bottom right
				x1a, y1a, x2a, y2a = xc, yc, min(xc+w, s*2), min(s*2, yc+h)
				x1b, y1b, x2b, y2b = 0, 0, min(w, x2a-x1a), min(y2a-y1a, h)
			}
			// numpy's slices: a negative bound counts from the end, an
			// empty or reversed one copies nothing.
			tiles[i] = tileOf(x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b, 2*s, 2*s, w, h)
			tiles[i].PadW, tiles[i].PadH = x1a-x1b, y1a-y1b
		}
		return tiles, nil
	}
	var hp, wp, h0, w0 int = -1, -1, 0, 0
	for i, sz := range sizes {
		w, h := sz[0], sz[1]
		var c [4]int
		switch i {
		case 0:
			c, h0, w0 = [4]int{s, s, s + w, s + h}, h, w
		case 1:
			c = [4]int{s, s - h, s + w, s}
		case 2:
			c = [4]int{s + wp, s - h, s + wp + w, s}
		case 3:
			c = [4]int{s + w0, s, s + w0 + w, s + h}
		case 4:
			c = [4]int{s + w0, s + hp, s + w0 + w, s + hp + h}
		case 5:
			c = [4]int{s + w0 - w, s + h0, s + w0, s + h0 + h}
		case 6:
			c = [4]int{s + w0 - wp - w, s + h0, s + w0 - wp, s + h0 + h}
		case 7:
			c = [4]int{s - w, s + h0 - h, s, s + h0}
		case 8:
			c = [4]int{s - w, s + h0 - hp - h, s, s + h0 - hp}
		}
		padw, padh := c[0], c[1]
		x1, y1, x2, y2 := max(c[0], 0), max(c[1], 0), max(c[2], 0), max(c[3], 0)
		x1b, y1b := x1-padw, y1-padh
		t := tileOf(x1, y1, x2, y2, x1b, y1b, x1b+(x2-x1), y1b+(y2-y1), 3*s, 3*s, w, h)
		// The 3s canvas is cropped at s/2 (numpy's -(-s//2)).
		off := -floorDiv(-s, 2)
		t.X1a -= off
		t.Y1a -= off
		t.PadW, t.PadH = padw-off, padh-off
		tiles[i] = t
		hp, wp = h, w
	}
	return tiles, nil
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// pySlice is numpy's slice [a:b] of a length-n axis: its start and length.
func pySlice(a, b, n int) (int, int) {
	norm := func(v int) int {
		if v < 0 {
			v += n
		}
		return min(max(v, 0), n)
	}
	a, b = norm(a), norm(b)
	return a, max(b-a, 0)
}

// tileOf is the assignment canvas[y1a:y2a, x1a:x2a] = img[y1b:y2b,
// x1b:x2b] with numpy's slicing (the two shapes agree in ultralytics'
// layouts, which this does not check beyond taking the smaller).
func tileOf(x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b, cw, ch, w, h int) Tile {
	xa, wa := pySlice(x1a, x2a, cw)
	ya, ha := pySlice(y1a, y2a, ch)
	xb, wb := pySlice(x1b, x2b, w)
	yb, hb := pySlice(y1b, y2b, h)
	return Tile{X1a: xa, Y1a: ya, X1b: xb, Y1b: yb, W: min(wa, wb), H: min(ha, hb)}
}

// MosaicSize is the side of a mosaic's canvas: 2s.
func MosaicSize(s int) int { return 2 * s }

// MosaicImage is Mosaic.apply_image: the 2s x 2s canvas (dst) of 114 with
// each image's tile copied in, in order.
func MosaicImage(dst kernels.Planes, imgs []kernels.Planes, tiles []Tile) {
	MosaicImageIn(dst, imgs, tiles, Rect{0, 0, dst.W, dst.H})
}

// Rect is the pixels [X0, X1) x [Y0, Y1) of an image.
type Rect struct{ X0, Y0, X1, Y1 int }

// MosaicImageIn is MosaicImage within r only (clamped to dst): the pixels
// of dst in r are MosaicImage's, those outside are left as they were. It
// goes row by row, each row's 114 and then its tiles' bytes while the row
// is in the cache, the tiles in order (a later one over an earlier).
func MosaicImageIn(dst kernels.Planes, imgs []kernels.Planes, tiles []Tile, r Rect) {
	r.X0, r.Y0 = max(r.X0, 0), max(r.Y0, 0)
	r.X1, r.Y1 = min(r.X1, dst.W), min(r.Y1, dst.H)
	if r.X0 >= r.X1 || r.Y0 >= r.Y1 {
		return
	}
	// Each tile's part in r: its rows [y0, y0+th) and columns [x0, x0+tw)
	// of dst, from (xb, yb) of its image.
	type part struct{ x0, y0, xb, yb, tw, th int }
	var buf [9]part
	parts := buf[:0]
	for _, t := range tiles {
		x0, y0 := t.X1a, t.Y1a
		// A tile of the 3s canvas may start left of or above the crop.
		xb, yb, tw, th := t.X1b, t.Y1b, t.W, t.H
		if x0 < r.X0 {
			xb, tw, x0 = xb+r.X0-x0, tw-(r.X0-x0), r.X0
		}
		if y0 < r.Y0 {
			yb, th, y0 = yb+r.Y0-y0, th-(r.Y0-y0), r.Y0
		}
		tw, th = min(tw, r.X1-x0), min(th, r.Y1-y0)
		if tw <= 0 || th <= 0 {
			parts = append(parts, part{})
			continue
		}
		parts = append(parts, part{x0, y0, xb, yb, tw, th})
	}
	dn := dst.W * dst.H
	for c := 0; c < 3; c++ {
		dp := dst.Pix[c*dn : (c+1)*dn]
		for y := r.Y0; y < r.Y1; y++ {
			row := dp[y*dst.W : (y+1)*dst.W]
			fill114(row[r.X0:r.X1])
			for i, p := range parts {
				if p.th <= 0 || y < p.y0 || y >= p.y0+p.th {
					continue
				}
				src := imgs[i]
				n := src.W * src.H
				o := c*n + (p.yb+y-p.y0)*src.W + p.xb
				copy(row[p.x0:p.x0+p.tw], src.Pix[o:o+p.tw])
			}
		}
	}
}

// MosaicInstances is Mosaic.apply_instances: each image's instances
// (pixels of its resized image) moved by its tile's padding, concatenated
// in order, clipped to the 2s canvas, the boxes of no area dropped.
func MosaicInstances(ins []Instances, tiles []Tile, s int) Instances {
	moved := make([]Instances, len(ins))
	for i := range ins {
		moved[i] = ins[i].Clone()
		moved[i].AddPadding(float32(tiles[i].PadW), float32(tiles[i].PadH))
	}
	out := Concat(moved...)
	out.Clip(2*s, 2*s)
	out.RemoveZeroArea()
	return out
}

// MosaicArgs are a parity case's mosaic: its n (4 or 9), imgsz and drawn
// centre.
type MosaicArgs struct {
	N     int `json:"n"`
	Imgsz int `json:"imgsz"`
	XC    int `json:"xc"`
	YC    int `json:"yc"`
}

// The parity case "mosaic": images (the sample's first) and their labels,
// one each, laid out by mosaic: the canvas and its instances.
func init() {
	addCase("mosaic", 4, func(c *CaseIn) (CaseOut, error) {
		var a struct {
			Mosaic *MosaicArgs `json:"mosaic"`
		}
		if err := c.Args(&a); err != nil {
			return CaseOut{}, err
		}
		if a.Mosaic == nil || len(c.Labels) != len(c.Images) {
			return CaseOut{}, errors.New("mosaic: want its arguments and one labels a image")
		}
		m := a.Mosaic
		sizes := make([][2]int, len(c.Images))
		for i, p := range c.Images {
			sizes[i] = [2]int{p.W, p.H}
		}
		tiles, err := MosaicLayout(m.N, m.Imgsz, m.XC, m.YC, sizes)
		if err != nil {
			return CaseOut{}, err
		}
		dst := newPlanes(MosaicSize(m.Imgsz), MosaicSize(m.Imgsz))
		MosaicImage(dst, c.Images, tiles)
		in := MosaicInstances(c.Labels, tiles, m.Imgsz)
		return CaseOut{Images: []kernels.Planes{dst}, Labels: &in}, nil
	})
}
