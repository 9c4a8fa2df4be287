package targets

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
)

// Targets are one sample's instances: Boxes XYXY in pixels of a canvas of
// W x H, Labels the contiguous labels, Crowd 1 for a COCO crowd
// annotation (kept, as torchvision's CocoDetection wrapper keeps it),
// and the instances' keypoints when the dataset has them (P, Points, Vis).
type Targets struct {
	dataset.Instances
	W, H int
	// Format is the boxes' format: XYXY but after a
	// ConvertBoundingBoxFormat (the pipeline's Targets.Move).
	Format BoxFormat
	// mm are the masks' maps, with WantMasks (masks.go).
	mm maskMaps
	// WantOverlap: the overlap mask follows the instances, which are in
	// its order (AppendOverlap); never with WantMasks.
	WantOverlap bool
}

// BoxFormat is a box format of torchvision's tv_tensors.BoundingBoxFormat:
// its value is the targets' header field (AppendTargets).
type BoxFormat uint8

// The formats: corners; corner and size; centre and size.
const (
	BoxXYXY BoxFormat = iota
	BoxXYWH
	BoxCXCYWH
)

var boxFormatNames = [...]string{BoxXYXY: "XYXY", BoxXYWH: "XYWH", BoxCXCYWH: "CXCYWH"}

// String is the format's torchvision name.
func (f BoxFormat) String() string {
	if int(f) < len(boxFormatNames) {
		return boxFormatNames[f]
	}
	return fmt.Sprintf("BoxFormat(%d)", uint8(f))
}

// ParseBoxFormat parses "XYXY", "XYWH" or "CXCYWH" (any case, as
// torchvision's BoundingBoxFormat[name.upper()]).
func ParseBoxFormat(s string) (BoxFormat, error) {
	for i, n := range boxFormatNames {
		if strings.EqualFold(s, n) {
			return BoxFormat(i), nil
		}
	}
	return 0, fmt.Errorf("%w: box format %q: want XYXY, XYWH or CXCYWH (the rotated formats are not supported)", errs.Unsupported, truncate(s, 32))
}

// truncate is s cut to n bytes, with an ellipsis when it was longer (the
// pipeline's truncateString: a byte cut, as its errors word it).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ConvertBoxes is torchvision's convert_bounding_box_format from XYXY to
// f, in float32: XYWH (x1, y1, x2 - x1, y2 - y1); CXCYWH (w = x2 - x1,
// then cx = (x1 * 2 + w) / 2), as _xyxy_to_cxcywh computes it in place.
func ConvertBoxes(boxes [][4]float32, f BoxFormat) {
	for k := range boxes {
		b := &boxes[k]
		w, h := b[2]-b[0], b[3]-b[1]
		switch f {
		case BoxXYWH:
			b[2], b[3] = w, h
		case BoxCXCYWH:
			b[0], b[1], b[2], b[3] = (float32(b[0]*2)+w)/2, (float32(b[1]*2)+h)/2, w, h
		}
	}
}

// Reset empties t for the next sample, its buffers kept: XYXY, no canvas,
// no instances.
func (t *Targets) Reset() {
	t.Format = BoxXYXY
	t.W, t.H = 0, 0
	t.Instances.Reset()
}

// Sanitize keeps the instances torchvision's SanitizeBoundingBoxes keeps
// on a canvas of w x h (its _get_sanitize_bounding_boxes_mask for XYXY, in
// float32 as torch computes on a float32 tensor, the bounds rounded to
// float32 as torch rounds a Python float against one): width and height
// at least minSize, their product at least minArea, every coordinate at
// least 0, x1 and x2 at most w, y1 and y2 at most h. A NaN fails them all.
func (t *Targets) Sanitize(w, h int, minSize, minArea float64) {
	ms, ma, fw, fh := float32(minSize), float32(minArea), float32(w), float32(h)
	n := 0
	for k, b := range t.Boxes {
		bw, bh := b[2]-b[0], b[3]-b[1]
		ok := bw >= ms && bh >= ms && float32(bw*bh) >= ma &&
			b[0] >= 0 && b[1] >= 0 && b[2] >= 0 && b[3] >= 0 &&
			b[0] <= fw && b[2] <= fw && b[1] <= fh && b[3] <= fh
		if ok {
			t.Boxes[n], t.Labels[n], t.Crowd[n] = b, t.Labels[k], t.Crowd[k]
			t.KeepPoints(n, k)
			n++
		}
	}
	t.Boxes, t.Labels, t.Crowd = t.Boxes[:n], t.Labels[:n], t.Crowd[:n]
	t.CutPoints(n)
}

// CropBoxes is torchvision's crop_bounding_boxes: the boxes less (left,
// top), clamped to the height x width canvas it returns (as w, h).
func CropBoxes(boxes [][4]float32, top, left, height, width int) (int, int) {
	fl, ft := float32(left), float32(top)
	for k := range boxes {
		bx := &boxes[k]
		bx[0], bx[1], bx[2], bx[3] = bx[0]-fl, bx[1]-ft, bx[2]-fl, bx[3]-ft
		ClampBox(bx, width, height)
	}
	return width, height
}

// IoUCropBoxes is RandomIoUCrop.transform on boxes: torchvision's crop
// (CropBoxes), then every box whose centre, before the crop, was not
// strictly inside it set to (0, 0, 0, 0), which a SanitizeBoundingBoxes
// after it drops (make_params' is_within_crop_area, in float32).
func IoUCropBoxes(boxes [][4]float32, top, left, height, width int) (int, int) {
	for k := range boxes {
		bx := &boxes[k]
		in := BoxWithin(bx, top, left, height, width)
		CropBoxes(boxes[k:k+1], top, left, height, width)
		if !in {
			*bx = [4]float32{}
		}
	}
	return width, height
}

// BoxWithin is make_params' is_within_crop_area for one XYXY box:
// its centre 0.5 * (x1 + x2), 0.5 * (y1 + y2) strictly inside the crop.
func BoxWithin(bx *[4]float32, top, left, height, width int) bool {
	cx, cy := float32(0.5)*float32(bx[0]+bx[2]), float32(0.5)*float32(bx[1]+bx[3])
	return float32(left) < cx && cx < float32(left+width) && float32(top) < cy && cy < float32(top+height)
}

// ResizeBoxes is torchvision's resize_bounding_boxes from w x h to nw x
// nh: unchanged when the size is, else each coordinate times the ratio
// rounded to float32 (torch.tensor of Python floats), not clamped.
func ResizeBoxes(boxes [][4]float32, w, h, nw, nh int) (int, int) {
	if nw == w && nh == h {
		return w, h
	}
	rx, ry := float32(float64(nw)/float64(w)), float32(float64(nh)/float64(h))
	for k := range boxes {
		bx := &boxes[k]
		bx[0], bx[1], bx[2], bx[3] = float32(bx[0]*rx), float32(bx[1]*ry), float32(bx[2]*rx), float32(bx[3]*ry)
	}
	return nw, nh
}

// ClampBox is torchvision's _clamp_bounding_boxes for XYXY (soft and hard
// are the same for unrotated boxes): x within [0, w], y within [0, h]
// (torch.clamp: a NaN stays NaN).
func ClampBox(bx *[4]float32, w, h int) {
	fw, fh := float32(w), float32(h)
	for k := range bx {
		m := fw
		if k%2 == 1 {
			m = fh
		}
		if bx[k] < 0 {
			bx[k] = 0
		} else if bx[k] > m {
			bx[k] = m
		}
	}
}

// ClampBoxesAs is torchvision's _clamp_bounding_boxes (clamping_mode
// "soft" or "hard": the same for these boxes) for boxes in format f on a
// w x h canvas, in float32 as it computes in place: converted to XYXY
// (XYWH: x2 = w + x1; CXCYWH: x1 = cx - w / 2, then x2 = w + x1),
// clamped (ClampBox), converted back (ConvertBoxes).
func ClampBoxesAs(boxes [][4]float32, f BoxFormat, w, h int) {
	for k := range boxes {
		b := &boxes[k]
		switch f {
		case BoxXYWH:
			b[2], b[3] = b[2]+b[0], b[3]+b[1]
		case BoxCXCYWH:
			b[0], b[1] = b[0]-float32(b[2]/2), b[1]-float32(b[3]/2) // rounded: not fused
			b[2], b[3] = b[2]+b[0], b[3]+b[1]
		}
		ClampBox(b, w, h)
	}
	ConvertBoxes(boxes, f)
}
