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

// Targeted is a Dataset whose samples have boxes and labels (COCO, YOLO):
// pipeline/dataset's, whose SourceTargets sets a sample's Instances.
type Targeted = dataset.Targeted

// Instances are a sample's boxes, labels and crowd flags as its dataset
// has them (pipeline/dataset's).
type Instances = dataset.Instances

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
		d := st.Fn.Def()
		switch {
		case d.Role == targetsPixels:
			// color, blur, erase, normalize: torchvision passes a
			// BoundingBoxes through it (erase warns).
		case d.Role == targetsInstances:
			return w, h, fmt.Errorf("%w: %s drops boxes with their labels or changes their format: MoveTargets, not MoveBoxes", ErrUnsupported, st.Fn)
		case d.Role != targetsMove || d.Boxes == nil:
			return w, h, fmt.Errorf("%w: targets do not support %s yet", ErrUnsupported, st.Fn)
		default:
			var err error
			if w, h, err = d.Boxes(boxes, w, h, st); err != nil {
				return w, h, err
			}
		}
	}
	return w, h, nil
}

// MoveTargets applies steps to t's instances on a canvas of w x h, as MoveBoxes
// does, and at each sanitize_bounding_boxes step drops the instances
// SanitizeBoundingBoxes would (Targets.Sanitize), at the clamps and
// sanitize_keypoints clamps or drops (clampOrSanitize); it returns the
// canvas after them.
func MoveTargets(t *Targets, w, h int, steps []Step) (int, int, error) {
	from := 0
	for i := range steps {
		d := steps[i].Fn.Def()
		if d.Role != targetsInstances {
			continue
		}
		var err error
		if w, h, err = moveXYXY(t, w, h, steps[from:i]); err != nil {
			return w, h, err
		}
		if w, h, err = d.Instances(t, w, h, &steps[i]); err != nil {
			return w, h, err
		}
		from = i + 1
	}
	return moveXYXY(t, w, h, steps[from:])
}

// moveXYXY is MoveBoxes of t's boxes, which must be XYXY still where a
// step moves them (NewTransform puts ConvertBoundingBoxFormat after every
// such op).
func moveXYXY(t *Targets, w, h int, steps []Step) (int, int, error) {
	if t.Format != BoxXYXY {
		for i := range steps {
			if movesBoxes(steps[i].Fn) {
				return w, h, fmt.Errorf("%w: %s after ConvertBoundingBoxFormat(%s): convert last", ErrUnsupported, steps[i].Fn, t.Format)
			}
		}
	}
	return moveAll(t, w, h, steps) // the boxes, and the keypoints
}

// moveAll is MoveBoxes of t's boxes and MoveKeypoints of its keypoints
// through the same steps (the canvas the same after them).
func moveAll(t *Targets, w, h int, steps []Step) (int, int, error) {
	bw, bh, err := MoveBoxes(t.Boxes, w, h, steps)
	if err == nil {
		err = moveMasks(t, steps) // with WantMasks
	}
	if err != nil || t.P == 0 {
		return bw, bh, err
	}
	if len(t.Points) != len(t.Boxes)*t.P || len(t.Vis) != len(t.Points) {
		return bw, bh, fmt.Errorf("targets: %d boxes with %d keypoints and %d visibilities: want %d points an instance", len(t.Boxes), len(t.Points), len(t.Vis), t.P)
	}
	kw, kh, err := MoveKeypoints(t.Points, w, h, steps)
	if err != nil {
		return kw, kh, err
	}
	if kw != bw || kh != bh {
		return bw, bh, fmt.Errorf("targets: the boxes' canvas %dx%d and the keypoints' %dx%d differ after %d steps", bw, bh, kw, kh, len(steps))
	}
	return bw, bh, nil
}

// MoveKeypoints applies steps to points on a canvas of w x h, as
// torchvision's keypoint kernels do, and returns the canvas after them:
// crop (and center_crop, resized_crop's first half, RandomIoUCrop's crop)
// subtracts the offset, in float32, without clamping; pad adds the left
// and top padding; resize multiplies by the float32 ratio of the sizes
// (and leaves the points when the size does not change); the flips mirror
// about the last pixel (x' = -(x - (W - 1))); rotate and affine take each
// point through the float32 forward matrix (affinePoints). Ops on pixels
// alone leave the points. Any other step is an error: the keypoints do not
// support it (a geometric op added for boxes alone fails here rather than
// leave the points behind).
func MoveKeypoints(pts [][2]float32, w, h int, steps []Step) (int, int, error) {
	for i := range steps {
		st := &steps[i]
		d := st.Fn.Def()
		switch {
		case d.Role == targetsPixels:
			// Pixels alone: torchvision passes a KeyPoints through (erase warns).
		case d.Role != targetsMove || d.Points == nil:
			return w, h, fmt.Errorf("%w: targets' keypoints do not support %s yet", ErrUnsupported, st.Fn)
		default:
			var err error
			if w, h, err = d.Points(pts, w, h, st); err != nil {
				return w, h, err
			}
		}
	}
	return w, h, nil
}

// moveMasks moves t's mask maps through steps, as torchvision's Mask
// kernels move a tv_tensors.Mask: resized_crop (crop, then resize_mask's
// nearest), resize, center_crop, crop (RandomCrop's, RandomIoUCrop's),
// pad (the step's MaskFill), the flips, rotate and affine (nearest, the
// step's MaskFill: turnMasks). Ops on pixels alone leave them; any other
// step is an error.
func moveMasks(t *Targets, steps []Step) error {
	if !t.WantMasks {
		return nil
	}
	for i := range steps {
		st := &steps[i]
		d := st.Fn.Def()
		switch {
		case d.Role == targetsPixels || d.Role == targetsInstances:
			// Pixels alone (torchvision passes a Mask through; erase
			// warns), or boxes alone (MoveTargets drops the masks of
			// the instances it drops).
		case d.Role != targetsMove || d.Masks == nil:
			return fmt.Errorf("%w: targets' masks do not support %s yet", ErrUnsupported, st.Fn)
		default:
			if err := d.Masks(t, st); err != nil {
				return err
			}
		}
	}
	return nil
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
	d := f.Def()
	return d.Geometry || d.Role == targetsMove || f == FnSanitizeBoxes || f == FnConvertBoxFormat
}

// appendTargets appends sample i's targets (of ds), moved through the
// geometry and steps d drew for its last sample with t, to b.
// AppendTargets appends sample i's targets (of ds, with fs's options)
// made after the Decoder's last decode of it with t, as the executor
// makes them: for a benchmark of their cost (bench cost).
func (d *Decoder) AppendTargets(b []byte, t *Transform, ds Targeted, i int, fs *FieldSet) ([]byte, error) {
	return d.appendTargets(b, t, ds, i, fs)
}

func (d *Decoder) appendTargets(b []byte, t *Transform, ds Targeted, i int, fs *FieldSet) ([]byte, error) {
	if t.views != nil {
		return b, fmt.Errorf("%w: targets do not support views yet", ErrUnsupported)
	}
	vd, t := &d.vd[0], t.AtEpoch(d.epoch)
	if vd.multi != nil {
		return d.appendMosaicTargets(b, t, ds, fs, vd.multi)
	}
	tg := &d.targets
	tg.Reset()
	tg.WantMasks = fs.Masks()
	w0, h0, err := sourceTargets(ds, i, &vd.plan, &tg.Instances)
	if err != nil {
		return b, err
	}
	if tg.WantMasks {
		tg.StartMasks(vd.plan.srcW, vd.plan.srcH)
	}
	// The geometry's steps, then the ops' (the trace's order), in two
	// calls: no list of both is made.
	var geo [6]Step
	w, h, err := MoveTargets(tg, w0, h0, t.geometrySteps(&vd.plan, geo[:0]))
	if err == nil {
		w, h, err = MoveTargets(tg, w, h, vd.steps)
	}
	if err != nil {
		return b, err
	}
	tg.W, tg.H = w, h
	if tg.WantOverlap = fs.OverlapMask(); tg.WantOverlap {
		return tg.AppendOverlap(b, fs.MaskRatio(), fs.MaskOverlap(), fs.TargetsMax())
	}
	base := len(b)
	if b = AppendTargets(b, tg); tg.WantMasks {
		return tg.AppendMasks(b, base, fs.TargetsMax())
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
			// (MoveTargets), or pixels alone: the boxes stay.
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
// masks' fill is not one integer 0..255 (torchvision fills a Mask with a
// plain fill too; a fill per type, Op.FillTyped, gives the masks their
// own), or a RandomPerspective. A FixedSizeCrop pads masks with 0, as the
// detection references' does.
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
	two, _, err := d.preMixInstances(ds, &md.cutM, &md.cutPP, &md.cutCPM, md)
	if err != nil {
		return two, nil, fmt.Errorf("cutmix partner (sample %d): %w", md.cutM.idx[0], err)
	}
	return two, cv.CutMixPick(md.cutArea(md.cutChoice), two.Boxes, len(in.Segments) > 0), nil
}
