package cvcase

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// Run runs c. The ops, with the fields each reads:
//
//	resize            images[0] to dw x dh (cv.ResizeLinear)
//	warp_affine       images[0] by m (6) into dw x dh, border
//	warp_perspective  images[0] by m (9) into dw x dh, border
//	hsv               images[0] with gains (cv.RandomHSV)
//	perspective_matrix  perspective for images[0] into dw x dh: ints none, m the float32 matrix
//	perspective       images[0] and labels[0]: the image and instances (cv.PerspectiveImage, PerspectiveInstances), perspective on when px or py is not 0
//	letterbox         images[0] and labels[0] (cv.LetterBoxParams, LetterBoxImage, LetterBoxInstances); ints: top, bottom, left, right, unpad w, h
//	mosaic            images (the sample's first) and their labels: the canvas and instances
//	mixup             images[0..1], labels[0..1], r
//	copypaste         images[0], labels[0], p: the mask given as images[1]'s first plane, or without images[1]
//	                  rasterized from the selected segments (cv.CopyPasteMask); ints: the selected
//	polygons2masks_overlap  labels[0]'s segments on a dw x dh image, ratio: mask (dh/ratio x dw/ratio), ints: the order
//	polygons2masks    labels[0]'s segments on a dw x dh image, ratio: mask (K x dh/ratio x dw/ratio, 0 or 1: cv.AppendPolygonMasks' bits)
func Run(c *Case) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = Result{Error: fmt.Sprint("panic: ", r)}
		}
	}()
	var ps []kernels.Planes
	for _, im := range c.Images {
		p, err := im.planes()
		if err != nil {
			return Result{Error: err.Error()}
		}
		ps = append(ps, p)
	}
	var ins []cv.Instances
	for i := range c.Labels {
		in := c.Labels[i].instances()
		if err := in.Check(); err != nil {
			return Result{Error: err.Error()}
		}
		ins = append(ins, in)
	}
	need := map[string]int{"resize": 1, "warp_affine": 1, "warp_perspective": 1, "hsv": 1, "perspective_matrix": 1,
		"perspective": 1, "letterbox": 1, "mosaic": 4, "mixup": 2, "copypaste": 1, "polygons2masks_overlap": 0, "polygons2masks": 0}
	k, ok := need[c.Op]
	if !ok {
		return Result{Error: fmt.Sprintf("unknown op %q", c.Op)}
	}
	if len(ps) < k {
		return Result{Error: fmt.Sprintf("%s wants %d images, got %d", c.Op, k, len(ps))}
	}
	border := uint8(114)
	if c.Border != nil {
		border = uint8(*c.Border)
	}
	switch c.Op {
	case "resize":
		im, dp := newImage(c.DW, c.DH)
		cv.ResizeLinear(dp, ps[0])
		return Result{Images: []Image{im}}
	case "warp_affine", "warp_perspective":
		im, dp := newImage(c.DW, c.DH)
		if c.Op == "warp_affine" && len(c.Matrix) == 6 {
			cv.WarpAffine(dp, ps[0], [6]float64(c.Matrix), border)
		} else if c.Op == "warp_perspective" && len(c.Matrix) == 9 {
			cv.WarpPerspective(dp, ps[0], [9]float64(c.Matrix), border)
		} else {
			return Result{Error: "m: want 6 numbers for an affine, 9 for a perspective"}
		}
		return Result{Images: []Image{im}}
	case "hsv":
		cv.RandomHSV(ps[0], c.Gains)
		return Result{Images: []Image{c.Images[0]}}
	case "perspective_matrix", "perspective":
		if c.Persp == nil {
			return Result{Error: "perspective: no parameters"}
		}
		m := cv.PerspectiveMatrix(*c.Persp, ps[0].W, ps[0].H, c.DW, c.DH)
		if c.Op == "perspective_matrix" {
			return Result{Matrix: m[:]}
		}
		persp := c.Persp.PX != 0 || c.Persp.PY != 0
		im, dp := newImage(c.DW, c.DH)
		cv.PerspectiveImage(dp, ps[0], m, persp)
		r := Result{Images: []Image{im}, Matrix: m[:]}
		if len(ins) > 0 {
			r.Labels = labelsOf(cv.PerspectiveInstances(ins[0], m, c.Persp.Scale, persp, c.DW, c.DH))
		}
		return r
	case "letterbox":
		if c.LetterBox == nil {
			return Result{Error: "letterbox: no arguments"}
		}
		g := cv.LetterBoxParams(*c.LetterBox, ps[0].W, ps[0].H)
		im, dp := newImage(g.Size())
		cv.LetterBoxImage(dp, ps[0], g, nil)
		r := Result{Images: []Image{im}, Ints: []int{g.Top, g.Bottom, g.Left, g.Right, g.UnpadW, g.UnpadH}}
		if len(ins) > 0 {
			cv.LetterBoxInstances(&ins[0], g)
			r.Labels = labelsOf(ins[0])
		}
		return r
	case "mosaic":
		a := c.Mosaic
		if a == nil || len(ins) != len(ps) {
			return Result{Error: "mosaic: want its arguments and one labels a image"}
		}
		sizes := make([][2]int, len(ps))
		for i, p := range ps {
			sizes[i] = [2]int{p.W, p.H}
		}
		tiles, err := cv.MosaicLayout(a.N, a.Imgsz, a.XC, a.YC, sizes)
		if err != nil {
			return Result{Error: err.Error()}
		}
		im, dp := newImage(cv.MosaicSize(a.Imgsz), cv.MosaicSize(a.Imgsz))
		cv.MosaicImage(dp, ps, tiles)
		return Result{Images: []Image{im}, Labels: labelsOf(cv.MosaicInstances(ins, tiles, a.Imgsz))}
	case "mixup":
		if len(ins) != 2 || ps[0].W != ps[1].W || ps[0].H != ps[1].H {
			return Result{Error: "mixup: want two images of one size and their labels"}
		}
		out := cv.MixUp(ps[0], ps[1], c.R, ins[0], ins[1])
		return Result{Images: []Image{c.Images[0]}, Labels: labelsOf(out)}
	case "copypaste":
		if len(ins) != 1 || len(ps) > 2 || len(ps) == 2 && (ps[1].W != ps[0].W || ps[1].H != ps[0].H) {
			return Result{Error: "copypaste: want the image, a mask of its size or none, and its labels"}
		}
		flipped, sel := cv.CopyPasteSelect(ins[0], ps[0].W, c.P)
		var mask []byte
		if len(ps) == 2 {
			mask = ps[1].Pix[:ps[1].W*ps[1].H]
		} else {
			if len(sel) > 0 && len(flipped.Segments) != len(flipped.Boxes) {
				return Result{Error: "copypaste: labels without segments"}
			}
			mask = make([]byte, ps[0].W*ps[0].H)
			cv.CopyPasteMask(mask, ps[0].W, ps[0].H, flipped, sel, nil)
		}
		cv.CopyPasteImage(ps[0], mask)
		return Result{Images: []Image{c.Images[0]}, Labels: labelsOf(cv.CopyPasteInstances(ins[0], flipped, sel)), Ints: sel}
	case "polygons2masks_overlap":
		if len(ins) != 1 || c.DW < 1 || c.DH < 1 || c.DW > 1<<14 || c.DH > 1<<14 || c.Ratio < 1 || c.Ratio > min(c.DW, c.DH) {
			return Result{Error: "polygons2masks_overlap: want one labels, dw and dh 1..16384, ratio 1..min(dw, dh)"}
		}
		m, order := cv.PolygonsToMasksOverlap(ins[0].Segments, c.DW, c.DH, c.Ratio)
		return Result{Mask: m, Ints: order}
	case "polygons2masks":
		if len(ins) != 1 || c.DW < 1 || c.DH < 1 || c.DW > 1<<14 || c.DH > 1<<14 || c.Ratio < 1 || c.Ratio > min(c.DW, c.DH) {
			return Result{Error: "polygons2masks: want one labels, dw and dh 1..16384, ratio 1..min(dw, dh)"}
		}
		bits := cv.AppendPolygonMasks(nil, ins[0].Segments, c.DW, c.DH, c.Ratio)
		m := make([]int32, len(ins[0].Segments)*(c.DW/c.Ratio)*(c.DH/c.Ratio))
		for n := range m {
			m[n] = int32(bits[n>>3] >> (n & 7) & 1)
		}
		return Result{Mask: m}
	}
	return Result{Error: "unreachable"}
}
