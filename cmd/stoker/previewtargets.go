package main

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"math"
)

// What stoker preview draws of an annotated dataset's samples: each
// sample's targets as the trainer gets them (the field "targets", its
// layout in pipeline/targets' AppendTargets and AppendMasks), on its
// pixels.

// sampleTargets is one sample's decoded targets, boxes XYXY in pixels.
type sampleTargets struct {
	h, w   int
	boxes  [][4]float32
	labels []int64
	points [][][2]float32 // per instance, its P keypoints
	vis    [][]uint8
	masks  [][]uint32 // per instance, its runs over the canvas, from a run of 0
}

// parseTargets decodes a sample's targets field, refusing what does not
// add up (a server's bug, not the user's data).
func parseTargets(b []byte) (sampleTargets, error) {
	le := binary.LittleEndian
	var t sampleTargets
	bad := func(what string) (sampleTargets, error) {
		return t, fmt.Errorf("preview: a sample's targets (%d bytes): %s", len(b), what)
	}
	if len(b) < 24 {
		return bad("shorter than their header")
	}
	t.h, t.w = int(le.Uint32(b)), int(le.Uint32(b[4:]))
	k, word := int(le.Uint32(b[16:])), le.Uint32(b[20:])
	format, p := word&0xff, int(word>>8&0x3fffff)
	masks := word&(1<<31) != 0
	need := 24 + k*(16+8+p*8+1+p)
	if k < 0 || need > len(b) {
		return bad(fmt.Sprintf("%d instances of %d keypoints do not fit", k, p))
	}
	at := 24
	for range k {
		var bx [4]float32
		for j := range bx {
			bx[j] = math.Float32frombits(le.Uint32(b[at+4*j:]))
		}
		switch format {
		case 1: // XYWH
			bx[2], bx[3] = bx[0]+bx[2], bx[1]+bx[3]
		case 2: // CXCYWH
			bx = [4]float32{bx[0] - bx[2]/2, bx[1] - bx[3]/2, bx[0] + bx[2]/2, bx[1] + bx[3]/2}
		}
		t.boxes = append(t.boxes, bx)
		at += 16
	}
	for range k {
		t.labels = append(t.labels, int64(le.Uint64(b[at:])))
		at += 8
	}
	for range k {
		pts := make([][2]float32, p)
		for j := range pts {
			pts[j] = [2]float32{math.Float32frombits(le.Uint32(b[at:])), math.Float32frombits(le.Uint32(b[at+4:]))}
			at += 8
		}
		t.points = append(t.points, pts)
	}
	at += k // crowd flags
	for range k {
		t.vis = append(t.vis, b[at:at+p])
		at += p
	}
	if !masks {
		return t, nil
	}
	for at%4 != 0 {
		at++
	}
	if at+4*k > len(b) {
		return bad("its masks' run counts do not fit")
	}
	counts := make([]int, k)
	for i := range counts {
		counts[i] = int(le.Uint32(b[at:]))
		at += 4
	}
	for i := range k {
		if counts[i] < 0 || at+4*counts[i] > len(b) {
			return bad(fmt.Sprintf("instance %d's mask runs do not fit", i))
		}
		runs := make([]uint32, counts[i])
		for j := range runs {
			runs[j] = le.Uint32(b[at:])
			at += 4
		}
		t.masks = append(t.masks, runs)
	}
	return t, nil
}

// labelColor is a class's colour: well apart for neighbouring labels.
func labelColor(label int64) color.RGBA {
	palette := []color.RGBA{{255, 56, 56, 255}, {50, 205, 50, 255}, {30, 144, 255, 255}, {255, 215, 0, 255},
		{255, 0, 255, 255}, {0, 255, 255, 255}, {255, 140, 0, 255}, {148, 103, 189, 255}}
	return palette[uint64(label)%uint64(len(palette))]
}

// drawTargets draws t on img, the sample's pixels at (x0, y0): each
// instance's mask blended half over its pixels, then its box (2 pixels
// wide, inside it) and its visible keypoints (3x3 dots), in its label's
// colour.
func drawTargets(img *image.RGBA, x0, y0 int, t sampleTargets) {
	for i, runs := range t.masks {
		c := labelColor(t.labels[i])
		pos, on := 0, false
		for _, r := range runs {
			if on {
				for q := pos; q < pos+int(r) && q < t.w*t.h; q++ {
					x, y := x0+q%t.w, y0+q/t.w
					o := img.RGBAAt(x, y)
					img.SetRGBA(x, y, color.RGBA{uint8((int(o.R) + int(c.R)) / 2), uint8((int(o.G) + int(c.G)) / 2), uint8((int(o.B) + int(c.B)) / 2), 255})
				}
			}
			pos += int(r)
			on = !on
		}
	}
	for i, bx := range t.boxes {
		c := labelColor(t.labels[i])
		x1, y1 := clampInt(int(math.Floor(float64(bx[0]))), 0, t.w-1), clampInt(int(math.Floor(float64(bx[1]))), 0, t.h-1)
		x2, y2 := clampInt(int(math.Ceil(float64(bx[2])))-1, 0, t.w-1), clampInt(int(math.Ceil(float64(bx[3])))-1, 0, t.h-1)
		if x2 < x1 || y2 < y1 {
			continue // a box of no area (kept as torchvision keeps it)
		}
		for d := range 2 {
			for x := x1; x <= x2; x++ {
				img.SetRGBA(x0+x, y0+min(y1+d, y2), c)
				img.SetRGBA(x0+x, y0+max(y2-d, y1), c)
			}
			for y := y1; y <= y2; y++ {
				img.SetRGBA(x0+min(x1+d, x2), y0+y, c)
				img.SetRGBA(x0+max(x2-d, x1), y0+y, c)
			}
		}
	}
	for i, pts := range t.points {
		c := labelColor(t.labels[i])
		for j, pt := range pts {
			if j < len(t.vis[i]) && t.vis[i][j] == 0 {
				continue
			}
			px, py := int(pt[0]), int(pt[1])
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					if x, y := px+dx, py+dy; x >= 0 && y >= 0 && x < t.w && y < t.h {
						img.SetRGBA(x0+x, y0+y, c)
					}
				}
			}
		}
	}
}

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }
