package fn

// The geometry's functional ops: resized_crop, resize, center_crop,
// pad, crop, the IoU crop and the fixed-size crop, their targets' moves and
// their kernels after the decode (the classes are pipeline's
// op_geometry.go; the decode fuses them where it can).

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// The geometry's functional ops: a trace's, never a step run after the
// decode (Check refuses them there).
var (
	ResizedCrop = define(Def{name: "resized_crop", args: []arg{{"top", argInt, 0, 1}, {"left", argInt, 1, 1}, {"height", argInt, 2, 1}, {"width", argInt, 3, 1},
		{"size", argInt, 4, 2}, {"interpolation", argInterp, 0, 1}, {"antialias", argAntialias, 0, 1}},
		Geometry: true, check: noKernel, Role: TargetsMove,
		Boxes: func(boxes [][4]float32, _, _ int, st *Step) (int, int, error) {
			targets.CropBoxes(boxes, st.I[0], st.I[1], st.I[2], st.I[3])
			w, h := targets.ResizeBoxes(boxes, st.I[3], st.I[2], st.I[5], st.I[4])
			return w, h, nil
		},
		Points: func(pts [][2]float32, _, _ int, st *Step) (int, int, error) {
			targets.ShiftPoints(pts, -st.I[1], -st.I[0])
			w, h := targets.ResizePoints(pts, st.I[3], st.I[2], st.I[5], st.I[4])
			return w, h, nil
		},
		Masks: func(t *targets.Targets, st *Step) error {
			t.CropMasks(st.I[0], st.I[1], st.I[2], st.I[3], 0)
			t.ResizeMasks(st.I[4], st.I[5])
			return nil
		}})
	Resize = define(Def{name: "resize", args: []arg{{"size", argInt, 4, 2}, {"interpolation", argInterp, 0, 1}, {"antialias", argAntialias, 0, 1}},
		Geometry: true, check: noKernel, Role: TargetsMove,
		size: func(st *Step, _, _ int) (int, int) { return st.I[5], st.I[4] },
		grow: func(p kernels.Planes, st *Step, s *kernels.Scratch) kernels.Planes { return resizePlanes(p, st, s) },
		Boxes: func(boxes [][4]float32, w, h int, st *Step) (int, int, error) {
			w, h = targets.ResizeBoxes(boxes, w, h, st.I[5], st.I[4])
			return w, h, nil
		},
		Points: func(pts [][2]float32, w, h int, st *Step) (int, int, error) {
			w, h = targets.ResizePoints(pts, w, h, st.I[5], st.I[4])
			return w, h, nil
		},
		Masks: func(t *targets.Targets, st *Step) error { t.ResizeMasks(st.I[4], st.I[5]); return nil }})
	CenterCrop = define(Def{name: "center_crop", args: []arg{{"output_size", argInt, 4, 2}},
		Geometry: true, check: noKernel, Role: TargetsMove,
		size: func(st *Step, _, _ int) (int, int) { return st.I[5], st.I[4] },
		grow: func(p kernels.Planes, st *Step, s *kernels.Scratch) kernels.Planes { return centerCropPlanes(p, st, s) },
		Boxes: func(boxes [][4]float32, w, h int, st *Step) (int, int, error) {
			top, left := centerCropAnchor(w, h, st)
			w, h = targets.CropBoxes(boxes, top, left, st.I[4], st.I[5])
			return w, h, nil
		},
		Points: func(pts [][2]float32, w, h int, st *Step) (int, int, error) {
			top, left := centerCropAnchor(w, h, st)
			targets.ShiftPoints(pts, -left, -top)
			return st.I[5], st.I[4], nil
		},
		Masks: func(t *targets.Targets, st *Step) error {
			mw, mh := t.MaskCanvas()
			t.CropMasks(targets.CenterCropStart(mh, st.I[4]), targets.CenterCropStart(mw, st.I[5]), st.I[4], st.I[5], 0)
			return nil
		}})
	// Pad and Crop are RandomCrop's and Pad's geometry (torchvision's
	// pad, with a constant fill, then crop).
	Pad = define(Def{name: "pad", args: []arg{{"padding", argInt, 0, 4}, {"fill", argFill, 0, 1}},
		Geometry: true, check: noKernel, Role: TargetsMove,
		Boxes: func(boxes [][4]float32, w, h int, st *Step) (int, int, error) {
			l, t, r, b := st.I[0], st.I[1], st.I[2], st.I[3]
			w, h = w+l+r, h+t+b
			fl, ft := float32(l), float32(t)
			for k := range boxes {
				bx := &boxes[k]
				bx[0], bx[1], bx[2], bx[3] = bx[0]+fl, bx[1]+ft, bx[2]+fl, bx[3]+ft
				targets.ClampBox(bx, w, h)
			}
			return w, h, nil
		},
		Points: func(pts [][2]float32, w, h int, st *Step) (int, int, error) {
			targets.ShiftPoints(pts, st.I[0], st.I[1])
			return w + st.I[0] + st.I[2], h + st.I[1] + st.I[3], nil
		},
		Masks: func(t *targets.Targets, st *Step) error {
			// With the Mask's fill: the step's Fill is the pixels'.
			l, tp := st.I[0], st.I[1]
			mw, mh := t.MaskCanvas()
			t.CropMasks(-tp, -l, mh+tp+st.I[3], mw+l+st.I[2], st.MaskFill)
			return nil
		}})
	Crop = define(Def{name: "crop", args: []arg{{"top", argInt, 0, 1}, {"left", argInt, 1, 1}, {"height", argInt, 2, 1}, {"width", argInt, 3, 1}},
		Geometry: true, check: noKernel, Role: TargetsMove,
		Boxes: func(boxes [][4]float32, _, _ int, st *Step) (int, int, error) {
			w, h := targets.CropBoxes(boxes, st.I[0], st.I[1], st.I[2], st.I[3])
			return w, h, nil
		},
		Points: cropPoints, Masks: cropStepMasks})
	// IoUCrop is RandomIoUCrop's crop: torchvision's crop, then the
	// boxes whose centre was outside it set to 0 (RandomIoUCrop.transform);
	// its keypoints and masks are cropped.
	IoUCrop = define(Def{name: "iou_crop", args: []arg{{"top", argInt, 0, 1}, {"left", argInt, 1, 1}, {"height", argInt, 2, 1}, {"width", argInt, 3, 1}},
		Geometry: true, check: noKernel, Role: TargetsMove,
		Boxes: func(boxes [][4]float32, _, _ int, st *Step) (int, int, error) {
			w, h := targets.IoUCropBoxes(boxes, st.I[0], st.I[1], st.I[2], st.I[3])
			return w, h, nil
		},
		Points: cropPoints, Masks: cropStepMasks})
	// FixedSizeCrop is FixedSizeCrop's: torchvision's crop of (top,
	// left, height, width) (I[0:4]) when that is not the whole image, the
	// instances it leaves empty dropped (fixedSizeCropTargets), then pad
	// on the right and bottom with Fill to size (I[4:6]).
	FixedSizeCrop = define(Def{name: "fixed_size_crop", args: []arg{{"top", argInt, 0, 1}, {"left", argInt, 1, 1}, {"height", argInt, 2, 1}, {"width", argInt, 3, 1},
		{"size", argInt, 4, 2}, {"fill", argFill, 0, 1}},
		Geometry: true, check: noKernel, Role: TargetsInstances,
		Instances: func(t *targets.Targets, w, h int, st *Step) (int, int, error) {
			w, h = fixedSizeCropTargets(t, w, h, st)
			return w, h, nil
		}})
)

// centerCropAnchor is center_crop's (top, left) on a w x h canvas.
func centerCropAnchor(w, h int, st *Step) (top, left int) {
	top = int(math.RoundToEven(float64(h-st.I[4]) / 2))
	left = int(math.RoundToEven(float64(w-st.I[5]) / 2))
	return top, left
}

// cropPoints is crop_keypoints: the offset subtracted, in float32, not
// clamped.
func cropPoints(pts [][2]float32, _, _ int, st *Step) (int, int, error) {
	targets.ShiftPoints(pts, -st.I[1], -st.I[0])
	return st.I[3], st.I[2], nil
}

func cropStepMasks(t *targets.Targets, st *Step) error {
	t.CropMasks(st.I[0], st.I[1], st.I[2], st.I[3], 0) // crop_mask pads with 0
	return nil
}

// noKernel refuses a geometry step (or Normalize) among the steps run
// after the decode.
func noKernel(st *Step, _, _ int) error {
	return StepError(st, "a geometry op or Normalize is no kernel after the decode")
}

// resizePlanes is torchvision's resize of p to st's size (I[4], I[5]), in
// its room: torch's uint8 kernels (TorchAxis: the horizontal pass first,
// rounded to 8 bits, then the vertical), as the decode's reference path
// resamples. Its rows resampled across are the worker's scratch's (s's
// Spare: counted in the memory budget, transform's GrowBytes).
func resizePlanes(p kernels.Planes, st *Step, s *kernels.Scratch) kernels.Planes {
	oh, ow := st.I[4], st.I[5]
	ax := NewTorchAxis(Span{0, p.W, ow, 0, ow}, st.Interp, st.Antialias)
	ay := NewTorchAxis(Span{0, p.H, oh, 0, oh}, st.Interp, st.Antialias)
	mid := s.Spare(3 * p.H * ow)
	for c := range 3 {
		in, m := p.Plane(c), mid[c*p.H*ow:]
		for y := range p.H {
			row := in[y*p.W:]
			for x := range ow {
				m[y*ow+x] = ax.Sum(x, func(j int) byte { return row[j] })
			}
		}
	}
	o := kernels.Planes{Pix: p.Pix[:3*ow*oh], W: ow, H: oh}
	for c := range 3 {
		m, out := mid[c*p.H*ow:], o.Plane(c)
		for y := range oh {
			for x := range ow {
				out[y*ow+x] = ay.Sum(y, func(j int) byte { return m[j*ow+x] })
			}
		}
	}
	return o
}

// centerCropPlanes is torchvision's center_crop of p to st's size, in its
// room: zeros where the crop passes the image (its pad's (crop - size)
// // 2 before), else the pixels from round((size - crop) / 2). The image
// is copied first to s's Spare (counted, as resizePlanes's rows).
func centerCropPlanes(p kernels.Planes, st *Step, s *kernels.Scratch) kernels.Planes {
	oh, ow := st.I[4], st.I[5]
	top, left := targets.CenterCropStart(p.H, oh), targets.CenterCropStart(p.W, ow)
	src := s.Spare(len(p.Pix))
	copy(src, p.Pix)
	o := kernels.Planes{Pix: p.Pix[:3*ow*oh], W: ow, H: oh}
	clear(o.Pix)
	for c := range 3 {
		in, out := src[c*p.W*p.H:], o.Plane(c)
		for y := max(0, -top); y < oh && y+top < p.H; y++ {
			x0, x1 := max(0, -left), min(ow, p.W-left)
			if x0 < x1 {
				copy(out[y*ow+x0:y*ow+x1], in[(y+top)*p.W+x0+left:])
			}
		}
	}
	return o
}

// fixedSizeCropTargets is FixedSizeCrop on t's instances on a w x h canvas, with
// st's crop (top, left, height, width) and size: when the crop is not the
// whole canvas (its needs_crop), torchvision's crop_bounding_boxes (the
// offset subtracted, clamped to the crop), then the instances whose
// width or height (XYWH's, x2 - x1 and y2 - y1 in float32) is not above 0
// dropped with their labels and crowd flags (its is_valid); then pad on
// the right and bottom, which moves no box. Keypoints are cropped as
// crop_keypoints does (the offset subtracted, not clamped) and dropped
// with their instance, as SanitizeBoundingBoxes drops them; masks are
// cropped and dropped so, and padded with 0 (the detection references'
// FixedSizeCrop pads target["masks"] with 0 whatever its fill). It
// returns the canvas, the size.
func fixedSizeCropTargets(t *targets.Targets, w, h int, st *Step) (int, int) {
	top, left, ch, cw := st.I[0], st.I[1], st.I[2], st.I[3]
	if ch != h || cw != w {
		if t.WantMasks {
			t.CropMasks(top, left, ch, cw, 0)
		}
		targets.CropBoxes(t.Boxes, top, left, ch, cw)
		targets.ShiftPoints(t.Points, -left, -top)
		n := 0
		for k, b := range t.Boxes {
			if b[2]-b[0] > 0 && b[3]-b[1] > 0 {
				t.Boxes[n], t.Labels[n], t.Crowd[n] = b, t.Labels[k], t.Crowd[k]
				t.KeepPoints(n, k)
				n++
			}
		}
		t.Boxes, t.Labels, t.Crowd = t.Boxes[:n], t.Labels[:n], t.Crowd[:n]
		t.CutPoints(n)
	}
	if t.WantMasks { // the references' pad of the Masks: 0, right and bottom
		t.CropMasks(0, 0, st.I[4], st.I[5], 0)
	}
	return st.I[5], st.I[4]
}
