package pipeline

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// Targets are a detection sample's boxes and labels moved through the
// sample's geometry, as torchvision.transforms.v2 moves a
// tv_tensors.BoundingBoxes (XYXY, float32, clamping_mode "soft") with the
// image: the same functional ops (the sample's trace) applied to the boxes
// by torchvision's box kernels, in float32 as they compute. A job asks for
// them with JobSpec.targets; they travel as the per-sample field
// FieldTargets (AppendTargets gives the layout): pipeline/dataset's.
const FieldTargets = dataset.FieldTargets

// targetsHeader is the bytes of an encoded Targets before its boxes.
const targetsHeader = dataset.TargetsHeader

// Targeted is a Dataset whose samples have boxes and labels (COCO, YOLO):
// pipeline/dataset's, whose SourceTargets sets a sample's Instances.
type Targeted = dataset.Targeted

// Instances are a sample's boxes, labels and crowd flags as its dataset
// has them (pipeline/dataset's).
type Instances = dataset.Instances

// Targets are one sample's instances: Boxes XYXY in pixels of a canvas of
// W x H, Labels the contiguous labels, Crowd 1 for a COCO crowd
// annotation (kept, as torchvision's CocoDetection wrapper keeps it),
// and the instances' keypoints when the dataset has them (P, Points, Vis).
type Targets struct {
	Instances
	W, H int
	// Format is the boxes' format: XYXY but after a
	// ConvertBoundingBoxFormat (Move).
	Format BoxFormat
	// mm are the masks' maps, with WantMasks (targets_wire.go).
	mm maskMaps
	// WantOverlap: the overlap mask follows the instances, which are in
	// its order (appendOverlap); never with WantMasks.
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
	return 0, fmt.Errorf("%w: box format %q: want XYXY, XYWH or CXCYWH (the rotated formats are not supported)", ErrUnsupported, truncateString(s, 32))
}

// convertBoxes is torchvision's convert_bounding_box_format from XYXY to
// f, in float32: XYWH (x1, y1, x2 - x1, y2 - y1); CXCYWH (w = x2 - x1,
// then cx = (x1 * 2 + w) / 2), as _xyxy_to_cxcywh computes it in place.
func convertBoxes(boxes [][4]float32, f BoxFormat) {
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

func (t *Targets) reset() {
	t.Format = BoxXYXY
	t.W, t.H = 0, 0
	t.Instances.Reset()
}

// MoveBoxes applies steps to boxes on a canvas of w x h, as torchvision's
// box kernels do, and returns the canvas after them: crop (and
// center_crop, resized_crop's first half) subtracts the offset and clamps
// to the new canvas; pad adds the left and top padding and clamps; resize
// scales by float32(new/old) without clamping (and leaves boxes alone when
// the size does not change); the flips mirror; rotate and affine move
// each box's corners and take their extent, clamped (affineBoxes). Ops on
// pixels alone leave the boxes. AugMix's chains are an error: targets do
// not support them.
func MoveBoxes(boxes [][4]float32, w, h int, steps []Step) (int, int, error) {
	for i := range steps {
		st := &steps[i]
		d := st.Fn.def()
		switch {
		case d.targets == targetsPixels:
			// color, blur, erase, normalize: torchvision passes a
			// BoundingBoxes through it (erase warns).
		case d.targets == targetsInstances:
			return w, h, fmt.Errorf("%w: %s drops boxes with their labels or changes their format: Targets.Move, not MoveBoxes", ErrUnsupported, st.Fn)
		case d.targets != targetsMove || d.boxes == nil:
			return w, h, fmt.Errorf("%w: targets do not support %s yet", ErrUnsupported, st.Fn)
		default:
			var err error
			if w, h, err = d.boxes(boxes, w, h, st); err != nil {
				return w, h, err
			}
		}
	}
	return w, h, nil
}

// Move applies steps to t's instances on a canvas of w x h, as MoveBoxes
// does, and at each sanitize_bounding_boxes step drops the instances
// SanitizeBoundingBoxes would (sanitize), at the clamps and
// sanitize_keypoints clamps or drops (clampOrSanitize); it returns the
// canvas after them.
func (t *Targets) Move(w, h int, steps []Step) (int, int, error) {
	from := 0
	for i := range steps {
		d := steps[i].Fn.def()
		if d.targets != targetsInstances {
			continue
		}
		var err error
		if w, h, err = t.moveXYXY(w, h, steps[from:i]); err != nil {
			return w, h, err
		}
		if w, h, err = d.instances(t, w, h, &steps[i]); err != nil {
			return w, h, err
		}
		from = i + 1
	}
	return t.moveXYXY(w, h, steps[from:])
}

// moveXYXY is MoveBoxes of t's boxes, which must be XYXY still where a
// step moves them (NewTransform puts ConvertBoundingBoxFormat after every
// such op).
func (t *Targets) moveXYXY(w, h int, steps []Step) (int, int, error) {
	if t.Format != BoxXYXY {
		for i := range steps {
			if movesBoxes(steps[i].Fn) {
				return w, h, fmt.Errorf("%w: %s after ConvertBoundingBoxFormat(%s): convert last", ErrUnsupported, steps[i].Fn, t.Format)
			}
		}
	}
	return t.moveAll(w, h, steps) // the boxes, and the keypoints
}

// checkConvertLast refuses a ConvertBoundingBoxFormat (ops after the
// geometry) followed by an op that moves or drops boxes, or a second one:
// torchvision's would act on the converted boxes, which stoker's targets
// do not (convert last, as the DETR recipes do).
func checkConvertLast(ops []Op, first int) error {
	conv := -1
	for i := range ops {
		k := ops[i].Kind
		switch d := lookupOp(k); {
		case conv < 0 && k == OpConvertBoundingBoxFormat:
			conv = i
		case conv < 0:
		case d != nil && (d.targets == targetsPixels || d.anyFormat):
			// Pixels alone, or the targets' clamps and SanitizeKeyPoints (in any format).
		default:
			return fmt.Errorf("%w: transform: op %d (%s) after ConvertBoundingBoxFormat (op %d): it must come after every op that moves or drops boxes (convert last)",
				ErrUnsupported, first+i, k, first+conv)
		}
	}
	return nil
}

// movesBoxes reports whether a step moves or drops boxes.
func movesBoxes(f Fn) bool {
	d := f.def()
	return d.geometry || d.targets == targetsMove || f == FnSanitizeBoxes || f == FnConvertBoxFormat
}

// sanitize keeps the instances torchvision's SanitizeBoundingBoxes keeps
// on a canvas of w x h (its _get_sanitize_bounding_boxes_mask for XYXY, in
// float32 as torch computes on a float32 tensor, the bounds rounded to
// float32 as torch rounds a Python float against one): width and height
// at least minSize, their product at least minArea, every coordinate at
// least 0, x1 and x2 at most w, y1 and y2 at most h. A NaN fails them all.
func (t *Targets) sanitize(w, h int, minSize, minArea float64) {
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

// cropBoxes is torchvision's crop_bounding_boxes: the boxes less (left,
// top), clamped to the height x width canvas it returns (as w, h).
func cropBoxes(boxes [][4]float32, top, left, height, width int) (int, int) {
	fl, ft := float32(left), float32(top)
	for k := range boxes {
		bx := &boxes[k]
		bx[0], bx[1], bx[2], bx[3] = bx[0]-fl, bx[1]-ft, bx[2]-fl, bx[3]-ft
		clampBox(bx, width, height)
	}
	return width, height
}

// iouCropBoxes is RandomIoUCrop.transform on boxes: torchvision's crop
// (cropBoxes), then every box whose centre, before the crop, was not
// strictly inside it set to (0, 0, 0, 0), which a SanitizeBoundingBoxes
// after it drops (make_params' is_within_crop_area, in float32).
func iouCropBoxes(boxes [][4]float32, top, left, height, width int) (int, int) {
	for k := range boxes {
		bx := &boxes[k]
		in := boxWithin(bx, top, left, height, width)
		cropBoxes(boxes[k:k+1], top, left, height, width)
		if !in {
			*bx = [4]float32{}
		}
	}
	return width, height
}

// boxWithin is make_params' is_within_crop_area for one XYXY box:
// its centre 0.5 * (x1 + x2), 0.5 * (y1 + y2) strictly inside the crop.
func boxWithin(bx *[4]float32, top, left, height, width int) bool {
	cx, cy := float32(0.5)*float32(bx[0]+bx[2]), float32(0.5)*float32(bx[1]+bx[3])
	return float32(left) < cx && cx < float32(left+width) && float32(top) < cy && cy < float32(top+height)
}

// resizeBoxes is torchvision's resize_bounding_boxes from w x h to nw x
// nh: unchanged when the size is, else each coordinate times the ratio
// rounded to float32 (torch.tensor of Python floats), not clamped.
func resizeBoxes(boxes [][4]float32, w, h, nw, nh int) (int, int) {
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

// clampBox is torchvision's _clamp_bounding_boxes for XYXY (soft and hard
// are the same for unrotated boxes): x within [0, w], y within [0, h]
// (torch.clamp: a NaN stays NaN).
func clampBox(bx *[4]float32, w, h int) {
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

// appendTargets appends sample i's targets (of ds), moved through the
// geometry and steps d drew for its last sample with t, to b.
func (d *Decoder) appendTargets(b []byte, t *Transform, ds Targeted, i int, fs *FieldSet) ([]byte, error) {
	if t.views != nil {
		return b, fmt.Errorf("%w: targets do not support views yet", ErrUnsupported)
	}
	vd, t := &d.vd[0], t.AtEpoch(d.epoch)
	if vd.multi != nil {
		return d.appendMosaicTargets(b, t, ds, fs, vd.multi)
	}
	tg := &d.targets
	tg.reset()
	tg.WantMasks = fs.Masks()
	w0, h0, err := sourceTargets(ds, i, &vd.plan, &tg.Instances)
	if err != nil {
		return b, err
	}
	if tg.WantMasks {
		tg.startMasks(vd.plan.srcW, vd.plan.srcH)
	}
	// The geometry's steps, then the ops' (the trace's order), in two
	// calls: no list of both is made.
	var geo [6]Step
	w, h, err := tg.Move(w0, h0, t.geometrySteps(&vd.plan, geo[:0]))
	if err == nil {
		w, h, err = tg.Move(w, h, vd.steps)
	}
	if err != nil {
		return b, err
	}
	tg.W, tg.H = w, h
	if tg.WantOverlap = fs.OverlapMask(); tg.WantOverlap {
		return tg.appendOverlap(b, fs.TargetsMax())
	}
	base := len(b)
	if b = AppendTargets(b, tg); tg.WantMasks {
		return tg.appendMasks(b, base, fs.TargetsMax())
	}
	return b, nil
}

// CheckTargets refuses a transform whose ops targets do not support yet:
// one that moves pixels other than by the decode's geometry (RandomResizedCrop,
// Resize, CenterCrop, RandomCrop, Pad, RandomZoomOut, RandomIoUCrop), the
// flips, RandomRotation and RandomAffine, naming the op. Ops on pixels
// alone are fine. Several views are refused, and the policies
// (AutoAugment, RandAugment, TrivialAugmentWide, AugMix, timm's
// RandAugment): torchvision's refuse a BoundingBoxes.
func CheckTargets(t *Transform) error {
	if t.views != nil {
		return fmt.Errorf("%w: targets do not support views (multi-crop) yet", ErrUnsupported)
	}
	return checkTargetOps(t.ops, "")
}

// NeedsTargets names the first op of t that acts on targets alone
// (SanitizeBoundingBoxes, the clamps, …) or draws against them (RandomIoUCrop), "" if
// none: a job without targets refuses it, as torchvision's fails when it
// is given no boxes.
func NeedsTargets(t *Transform) string {
	if t.views != nil {
		for _, v := range t.views {
			if s := NeedsTargets(v); s != "" {
				return s
			}
		}
		return ""
	}
	return needsTargets(t.ops, "")
}

func needsTargets(ops []Op, at string) string {
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("%s%s (op %d)", at, op.Kind, i)
		if d := lookupOp(op.Kind); d != nil && d.needsTargets {
			return where
		}
		if s := needsTargets(op.Ops, where+": "); s != "" {
			return s
		}
	}
	return ""
}

func checkTargetOps(ops []Op, at string) error {
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("%s%s (op %d)", at, op.Kind, i)
		switch roleOf(op.Kind) {
		case targetsContainer:
			if err := checkTargetOps(op.Ops, where+": "); err != nil {
				return err
			}
		case targetsMove, targetsInstances, targetsPixels:
			// Moves the boxes (MoveBoxes), drops, clamps or reformats them
			// (Targets.Move), or pixels alone: the boxes stay.
		default:
			return fmt.Errorf("%w: transform: %s: targets do not support it yet (boxes move only through %s)", ErrUnsupported, where, strings.Join(kindsMoving(), ", "))
		}
	}
	return nil
}

// kindsMoving are the ops that move targets.
func kindsMoving() []string {
	var ks []string
	for _, k := range opKinds() {
		if opDefs[k].targets == targetsMove {
			ks = append(ks, string(k))
		}
	}
	return ks
}

// cutmixTargets is all (the sample's instances, p keypoints each) after
// the CutMix that applied (CutMix.apply_instances): the partner's picked
// instances moved into the area, after them.
func (d *Decoder) cutmixTargets(ds Targeted, md *multiDraw, all cv.Instances, p int) (cv.Instances, error) {
	two, sel, err := d.cutmixPick(ds, md, all)
	if err != nil {
		return all, err
	}
	if len(sel) == 0 {
		return all, fmt.Errorf("targets: YOLOCutMix applied, its labels pick nothing")
	}
	if t := md.cutM.idx; len(two.Keypoints) > 0 && len(two.Keypoints[0]) != p || cv.MixedSegments(all, two) {
		return all, fmt.Errorf("%w: cutmix partner (sample %d) has other labels than the sample's (keypoints or polygons)", ErrUnsupported, t[0])
	}
	return cv.CutMixInstances(all, two, md.cutArea(md.cutChoice), sel), nil
}

// cutmixPick is the CutMix partner's instances and those its area takes
// (cv.CutMixPick), given the sample's instances in.
func (d *Decoder) cutmixPick(ds Targeted, md *multiDraw, in cv.Instances) (cv.Instances, []int, error) {
	two, _, err := d.preInstances(ds, &md.cutM, &md.cutPP, md)
	if err != nil {
		return two, nil, fmt.Errorf("cutmix partner (sample %d): %w", md.cutM.idx[0], err)
	}
	return two, cv.CutMixPick(md.cutArea(md.cutChoice), two.Boxes, len(in.Segments) > 0), nil
}
