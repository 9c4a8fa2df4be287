package pipeline

// The targets' encoding on the wire (docs/detection.md gives the layout);
// their sources are pipeline/dataset's (COCO's annotations, YOLO's label
// files: Instances).

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// targetsMasks is the bit of the targets' header word (its format and P)
// that says the masks follow: set only for a job that asks for them.
const targetsMasks = 1 << 31

// targetsOverlap is the bit of the header word that says the overlap mask
// follows (appendOverlap): set only for a job that asks for it.
const targetsOverlap = 1 << 30

// OverlapRatio is the overlap mask's downsample: ultralytics' Format's
// mask_ratio default (4).
const OverlapRatio = 4

// AppendTargets appends t's encoding, little-endian: u32 H, u32 W (the
// canvas), i64 image id, u32 K, u32 the boxes' format (its low byte) and
// P, the keypoints an instance (the bits above: P << 8); then K x 4
// float32 boxes, K int64 labels, K x P x 2 float32 keypoints (x, y), K
// uint8 crowd flags, K x P uint8 visibilities. The header is 24 bytes, so
// the boxes, labels and keypoints are aligned within it. A sample of a
// dataset without keypoints (P = 0) is 24 + 25K bytes, as before them.
func AppendTargets(b []byte, t *Targets) []byte {
	le := binary.LittleEndian
	k := len(t.Boxes)
	b = le.AppendUint32(b, uint32(t.H))
	b = le.AppendUint32(b, uint32(t.W))
	b = le.AppendUint64(b, uint64(t.ImageID))
	b = le.AppendUint32(b, uint32(k))
	word := uint32(t.Format) | uint32(t.P)<<8
	if t.WantMasks {
		word |= targetsMasks
	}
	if t.WantOverlap {
		word |= targetsOverlap
	}
	b = le.AppendUint32(b, word)
	for _, bx := range t.Boxes {
		for _, v := range bx {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	for _, l := range t.Labels {
		b = le.AppendUint64(b, uint64(l))
	}
	if t.P > 0 {
		for _, p := range t.Points {
			b = le.AppendUint32(b, math.Float32bits(p[0]))
			b = le.AppendUint32(b, math.Float32bits(p[1]))
		}
	}
	b = append(b, t.Crowd...)
	if t.P > 0 {
		b = append(b, t.Vis...)
	}
	return b
}

// maskMaps are a sample's masks' geometry so far: the canvas' rows (ys)
// and columns (xs) each as the source image's row (column) it comes from,
// -1 for the fill (0). Crops, pads, flips and nearest resizes are each
// such a map an axis, so any chain of them is one (kernels.AxisCrop).
type maskMaps struct {
	ys, xs, tmp []int32
	// base, after a rotate or an affine (not separable), is the canvas it
	// left (bw columns), an index a pixel into the source
	// (kernels.CanvasIndex): ys and xs then map into base. srcW and srcH
	// are the source's size.
	base, spare []int32
	bw          int
	srcW, srcH  int
	src         []byte   // an instance's source mask, row-major
	rows        []bool   // which of its rows have a pixel set
	runs        []uint32 // an instance's runs on the canvas
	lens        []uint32 // the runs of each instance
}

// startMasks sets t's maps to the w x h source image's.
func (t *Targets) startMasks(w, h int) {
	m := &t.mm
	m.ys, m.xs = kernels.AxisIdentity(m.ys, h), kernels.AxisIdentity(m.xs, w)
	m.base, m.bw, m.srcW, m.srcH = m.base[:0], 0, w, h // empty: no base
}

// turnMasks moves t's masks through a rotate or affine step (nearest,
// fill 0, as rotate_mask and affine_mask): the step's Fill is the
// pixels', and CheckMasks refused an op whose masks' fill is not 0.
func turnMasks(t *Targets, st *Step, rotate bool) error {
	t.turn(st, rotate)
	return nil
}

// turn moves the masks through a rotate or affine step: the maps so far
// made into a canvas index, moved by the step as a plane, the base of
// identity maps.
func (t *Targets) turn(st *Step, rotate bool) {
	m := &t.mm
	w, h := len(m.xs), len(m.ys)
	idx := kernels.CanvasIndex(m.spare, m.base, m.bw, m.srcW, m.ys, m.xs)
	if rotate && st.I[0] != 0 { // expand: the canvas grows
		idx, w, h, m.tmp = kernels.RotateExpandIndex(idx, w, h, st.F[0], st.Center, st.HasCenter, m.tmp)
	} else if rotate {
		idx, m.tmp = kernels.RotateIndex(idx, w, h, st.F[0], st.Center, st.HasCenter, m.tmp)
	} else {
		a := kernels.AffineParams{Angle: st.F[0], TX: st.F[1], TY: st.F[2], Scale: st.F[3], ShearX: st.F[4], ShearY: st.F[5],
			Center: st.Center, HasCenter: st.HasCenter}
		idx, m.tmp = kernels.AffineIndex(idx, w, h, &a, m.tmp)
	}
	m.spare, m.base, m.bw = m.base, idx, w
	m.ys, m.xs = kernels.AxisIdentity(m.ys, h), kernels.AxisIdentity(m.xs, w)
}

// cropMasks crops the maps to the height x width canvas from (top,
// left), either of which may be negative (a pad's): what falls outside
// the canvas before is the fill, as torchvision's crop_mask and pad_mask
// (fill 0) make it.
func (t *Targets) cropMasks(top, left, height, width int) {
	m := &t.mm
	m.tmp = kernels.AxisCrop(m.tmp, m.ys, top, height)
	m.ys, m.tmp = m.tmp, m.ys
	m.tmp = kernels.AxisCrop(m.tmp, m.xs, left, width)
	m.xs, m.tmp = m.tmp, m.xs
}

// resizeMasks is resize_mask (InterpolationMode.NEAREST) to height x width.
func (t *Targets) resizeMasks(height, width int) {
	m := &t.mm
	m.tmp = kernels.AxisResize(m.tmp, m.ys, height)
	m.ys, m.tmp = m.tmp, m.ys
	m.tmp = kernels.AxisResize(m.tmp, m.xs, width)
	m.xs, m.tmp = m.tmp, m.xs
}

// centerCropStart is where center_crop_mask's crop of c pixels starts on
// an axis of n (as center_crop_image, which pads first when c > n: the
// pad's (c - n) // 2 before; else its anchor round((n - c) / 2)).
func centerCropStart(n, c int) int {
	if c > n {
		return -((c - n) / 2)
	}
	return int(math.RoundToEven(float64(n-c) / 2))
}

// moveMasks moves t's mask maps through steps, as torchvision's Mask
// kernels move a tv_tensors.Mask: resized_crop (crop, then resize_mask's
// nearest), resize, center_crop, crop (RandomCrop's, RandomIoUCrop's),
// pad (fill 0: an op whose masks' fill is another is refused, CheckMasks),
// the flips, rotate and affine (nearest, fill 0: turnMasks). Ops on
// pixels alone leave them; any other step is an error.
func (t *Targets) moveMasks(steps []Step) error {
	if !t.WantMasks {
		return nil
	}
	for i := range steps {
		st := &steps[i]
		d := st.Fn.def()
		switch {
		case d.targets == targetsPixels || d.targets == targetsInstances:
			// Pixels alone (torchvision passes a Mask through; erase
			// warns), or boxes alone (Targets.Move drops the masks of
			// the instances it drops).
		case d.targets != targetsMove || d.masks == nil:
			return fmt.Errorf("%w: targets' masks do not support %s yet", ErrUnsupported, st.Fn)
		default:
			if err := d.masks(t, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendMasks appends t's masks on its W x H canvas: each instance's
// source mask sampled through the maps (kernels.MaskRuns), after the
// targets' other bytes padded with zeros to a multiple of 4 (base is
// where the targets start in b): K u32 run counts, then every instance's
// runs (u32), row-major over the canvas from a run of 0. limit bounds the
// targets' bytes: past it the sample fails (dataset.TargetsTooLarge, which
// the field set words as its field over the bound) before more is made.
func (t *Targets) appendMasks(b []byte, base int, limit int64) ([]byte, error) {
	m := &t.mm
	if len(m.ys) != t.H || len(m.xs) != t.W || len(t.Masks) != len(t.Boxes) {
		return b, fmt.Errorf("targets: %d masks on a %dx%d canvas for %d boxes on %dx%d", len(t.Masks), len(m.xs), len(m.ys), len(t.Boxes), t.W, t.H)
	}
	for (len(b)-base)%4 != 0 {
		b = append(b, 0)
	}
	size := int64(len(b)-base) + 4*int64(len(t.Masks))
	m.runs, m.lens = m.runs[:0], m.lens[:0]
	for k := range t.Masks {
		r := &t.Masks[k]
		if r.H != m.srcH || r.W != m.srcW {
			return b, fmt.Errorf("targets: instance %d's mask is %dx%d, the source %dx%d", k, r.W, r.H, m.srcW, m.srcH)
		}
		var ok bool
		if m.src, m.rows, ok = kernels.RowMajor(m.src, m.rows, r.Counts, r.H, r.W); !ok {
			return b, fmt.Errorf("targets: instance %d's mask: runs that do not cover %dx%d", k, r.W, r.H)
		}
		n := len(m.runs)
		m.runs = kernels.MaskRuns(m.runs, m.src, r.W, m.rows, m.base, m.bw, m.ys, m.xs)
		m.lens = append(m.lens, uint32(len(m.runs)-n))
		if size += 4 * int64(len(m.runs)-n); size > limit {
			return b, &dataset.TargetsTooLarge{At: size}
		}
	}
	le := binary.LittleEndian
	for _, n := range m.lens {
		b = le.AppendUint32(b, n)
	}
	for _, r := range m.runs {
		b = le.AppendUint32(b, r)
	}
	return b, nil
}

// TargetKeypoints is the keypoints an instance of ds's targets carries
// (P): 0 for a dataset without them.
func TargetKeypoints(ds Dataset) int {
	switch d := ds.(type) {
	case *dataset.COCODataset:
		return d.Annotations().Keypoints()
	case *dataset.YOLODataset:
		return d.Config().KptShape[0]
	}
	return 0
}

// CheckMasks refuses a transform whose geometry masks do not follow: a
// Pad, RandomCrop, RandomZoomOut, RandomRotation or RandomAffine whose
// masks' fill is not 0 (torchvision fills a Mask with a plain fill too;
// a fill per type, Op.FillTyped, gives the masks their own). A
// FixedSizeCrop pads masks with 0, as the detection references' does.
func CheckMasks(t *Transform) error {
	return checkMaskOps(t.ops, "")
}

func checkMaskOps(ops []Op, at string) error {
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("%s%s (op %d)", at, op.Kind, i)
		d := lookupOp(op.Kind)
		switch {
		case d == nil:
		case d.targets == targetsContainer:
			if err := checkMaskOps(op.Ops, where+": "); err != nil {
				return err
			}
		case d.masks != nil:
			if err := d.masks(op); err != nil {
				return fmt.Errorf("%w: transform: %s: %v", ErrUnsupported, where, err)
			}
		}
	}
	return nil
}

// TargetsSize is the bytes AppendTargets writes for k instances of p
// keypoints each.
func TargetsSize(k, p int) int64 {
	return targetsHeader + int64(k)*(16+8+1) + int64(k)*int64(p)*(8+1)
}

// OverlapMaskSize is the bytes of the overlap mask of k instances on a w x
// h canvas after the targets (padded to a multiple of 4 each side): one
// byte a pixel of its w/4 x h/4 map, four past 255 instances.
func OverlapMaskSize(w, h, k int) int64 {
	n := int64(w/OverlapRatio) * int64(h/OverlapRatio)
	if k > 255 {
		n *= 4
	}
	return (n + 3) / 4 * 4
}

// appendOverlap appends t's encoding with ultralytics' overlap mask
// (Format(return_mask=True, mask_ratio=4, mask_overlap=True)): its
// instances ordered as polygons2masks_overlap orders them (by their
// masks' area, largest first: Format's instances[sorted_idx] and
// cls[sorted_idx]), then, after zeros to a multiple of 4, the map
// (cv.PolygonsToMasksOverlap of the segments on the W x H canvas), row-major,
// uint8 (int32 little-endian past 255 instances, as ultralytics), and
// zeros to a multiple of 4. limit bounds the bytes (TargetsTooLarge).
func (t *Targets) appendOverlap(b []byte, limit int64) ([]byte, error) {
	k := len(t.Boxes)
	if len(t.Segments) != k {
		return b, fmt.Errorf("%w: overlap_mask: %d instances with %d polygons: the overlap mask needs a segment dataset's polygons for every instance", ErrUnsupported, k, len(t.Segments))
	}
	size := (TargetsSize(k, t.P)+3)/4*4 + OverlapMaskSize(t.W, t.H, k)
	if size > limit {
		return b, &dataset.TargetsTooLarge{At: size}
	}
	m, order := cv.PolygonsToMasksOverlap(t.Segments, t.W, t.H, OverlapRatio)
	t.reorder(order)
	base := len(b)
	b = AppendTargets(b, t)
	for (len(b)-base)%4 != 0 {
		b = append(b, 0)
	}
	if k > 255 {
		for _, v := range m {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	} else {
		for _, v := range m {
			b = append(b, uint8(v))
		}
	}
	for (len(b)-base)%4 != 0 {
		b = append(b, 0)
	}
	return b, nil
}

// reorder puts t's instances (boxes, labels, crowd flags, keypoints,
// segments) in order: the n-th is the order[n]-th before.
func (t *Targets) reorder(order []int) {
	boxes := append([][4]float32(nil), t.Boxes...)
	labels := append([]int64(nil), t.Labels...)
	crowd := append([]uint8(nil), t.Crowd...)
	pts := append([][2]float32(nil), t.Points...)
	vis := append([]uint8(nil), t.Vis...)
	segs := append([][][2]float32(nil), t.Segments...)
	for n, k := range order {
		t.Boxes[n], t.Labels[n], t.Crowd[n], t.Segments[n] = boxes[k], labels[k], crowd[k], segs[k]
		if t.P > 0 {
			copy(t.Points[n*t.P:(n+1)*t.P], pts[k*t.P:(k+1)*t.P])
			copy(t.Vis[n*t.P:(n+1)*t.P], vis[k*t.P:(k+1)*t.P])
		}
	}
}

// CheckOverlapMask refuses a job asking for the overlap mask
// (target_fields "overlap_mask") whose transform or dataset cannot give
// ultralytics' one: the dataset's polygons move only through ultralytics'
// ops (the YOLO geometry, YOLOMosaic, YOLOMixUp, YOLORandomFlip), so the
// transform must start with that geometry (YOLOLoadImage or YOLOMosaic)
// and move the targets by no other op; and the dataset must be a YOLO
// segment dataset (label lines of polygons).
func CheckOverlapMask(t *Transform, ds Dataset) error {
	if d, ok := ds.(*dataset.YOLODataset); !ok || !d.HasSegments() {
		return fmt.Errorf("%w: overlap_mask: the dataset has no polygons (a YOLO segment dataset's label lines): ultralytics' overlap mask is made of them", ErrUnsupported)
	}
	if t.views != nil || t.yolo == nil && t.mosaic == nil {
		return fmt.Errorf("%w: overlap_mask: the transform has no YOLO geometry (YOLOLoadImage or YOLOMosaic first): the overlap mask follows ultralytics' ops only", ErrUnsupported)
	}
	return checkOverlapOps(t.ops, "")
}

func checkOverlapOps(ops []Op, at string) error {
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("%s%s (op %d)", at, op.Kind, i)
		switch roleOf(op.Kind) {
		case targetsContainer:
			if err := checkOverlapOps(op.Ops, where+": "); err != nil {
				return err
			}
		case targetsMove:
			if !strings.HasPrefix(string(op.Kind), "YOLO") {
				return fmt.Errorf("%w: overlap_mask: transform: %s moves the boxes but not the dataset's polygons: the overlap mask follows ultralytics' ops only (YOLOLoadImage, YOLOLetterBox, YOLORandomPerspective, YOLOMosaic, YOLOMixUp, YOLORandomFlip)", ErrUnsupported, where)
			}
		}
	}
	return nil
}
