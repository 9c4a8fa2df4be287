package transform

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
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
func MoveBoxes(boxes [][4]float32, w, h int, steps []fn.Step) (int, int, error) {
	for i := range steps {
		st := &steps[i]
		d := st.Fn.Def()
		switch {
		case d.Role == optab.TargetsPixels:
			// color, blur, erase, normalize: torchvision passes a
			// BoundingBoxes through it (erase warns).
		case d.Role == optab.TargetsInstances:
			return w, h, fmt.Errorf("%w: %s drops boxes with their labels or changes their format: MoveTargets, not MoveBoxes", errs.Unsupported, st.Fn)
		case d.Role != optab.TargetsMove || d.Boxes == nil:
			return w, h, fmt.Errorf("%w: targets do not support %s yet", errs.Unsupported, st.Fn)
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
func MoveTargets(t *targets.Targets, w, h int, steps []fn.Step) (int, int, error) {
	from := 0
	for i := range steps {
		d := steps[i].Fn.Def()
		if d.Role != optab.TargetsInstances {
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
func moveXYXY(t *targets.Targets, w, h int, steps []fn.Step) (int, int, error) {
	if t.Format != targets.BoxXYXY {
		for i := range steps {
			if movesBoxes(steps[i].Fn) {
				return w, h, fmt.Errorf("%w: %s after ConvertBoundingBoxFormat(%s): convert last", errs.Unsupported, steps[i].Fn, t.Format)
			}
		}
	}
	return moveAll(t, w, h, steps) // the boxes, and the keypoints
}

// moveAll is MoveBoxes of t's boxes and MoveKeypoints of its keypoints
// through the same steps (the canvas the same after them).
func moveAll(t *targets.Targets, w, h int, steps []fn.Step) (int, int, error) {
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
func MoveKeypoints(pts [][2]float32, w, h int, steps []fn.Step) (int, int, error) {
	for i := range steps {
		st := &steps[i]
		d := st.Fn.Def()
		switch {
		case d.Role == optab.TargetsPixels:
			// Pixels alone: torchvision passes a KeyPoints through (erase warns).
		case d.Role != optab.TargetsMove || d.Points == nil:
			return w, h, fmt.Errorf("%w: targets' keypoints do not support %s yet", errs.Unsupported, st.Fn)
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
func moveMasks(t *targets.Targets, steps []fn.Step) error {
	if !t.WantMasks {
		return nil
	}
	for i := range steps {
		st := &steps[i]
		d := st.Fn.Def()
		switch {
		case d.Role == optab.TargetsPixels || d.Role == optab.TargetsInstances:
			// Pixels alone (torchvision passes a Mask through; erase
			// warns), or boxes alone (MoveTargets drops the masks of
			// the instances it drops).
		case d.Role != optab.TargetsMove || d.Masks == nil:
			return fmt.Errorf("%w: targets' masks do not support %s yet", errs.Unsupported, st.Fn)
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
func checkConvertLast(ops []optab.Op, first int) error {
	conv := -1
	for i := range ops {
		k := ops[i].Kind
		switch {
		case conv < 0 && k == optab.OpConvertBoundingBoxFormat && optab.ArgsOf[optab.BoxFormatArgs](&ops[i]).Format != targets.BoxXYXY:
			// (to XYXY first, as the detection references' presets convert
			// before their SanitizeBoundingBoxes: the boxes' own format)
			conv = i
		case conv < 0:
		case boxesStay(&ops[i]):
			// Pixels alone, or the targets' clamps and SanitizeKeyPoints (in
			// any format), or a container of only those.
		default:
			return fmt.Errorf("%w: transform: op %d (%s) after ConvertBoundingBoxFormat (op %d): it must come after every op that moves or drops boxes (convert last)",
				errs.Unsupported, first+i, k, first+conv)
		}
	}
	return nil
}

// boxesStay reports whether op leaves the boxes as a conversion made
// them: it acts on pixels alone, or on boxes in their format (its Def's
// AnyFormat), or it is a container of only such ops.
func boxesStay(op *optab.Op) bool {
	switch d := optab.Lookup(op.Kind); {
	case d == nil:
		return false
	case d.Targets == optab.TargetsContainer:
		for i := range op.Ops {
			if !boxesStay(&op.Ops[i]) {
				return false
			}
		}
		return true
	default:
		return d.Targets == optab.TargetsPixels || d.AnyFormat
	}
}

// movesBoxes reports whether a step moves or drops boxes.
func movesBoxes(f fn.Fn) bool {
	d := f.Def()
	return d.Geometry || d.Role == optab.TargetsMove || f == fn.SanitizeBoxes || f == fn.ConvertBoxFormat
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
		return fmt.Errorf("%w: targets do not support views (multi-crop) yet", errs.Unsupported)
	}
	if t.preCrop != nil {
		return fmt.Errorf("%w: targets do not support a RandomResizedCrop before a resize of the whole image (two resizes) yet", errs.Unsupported)
	}
	return checkTargetOps(t.ops, "")
}

// NeedsTargets names the first op of t that acts on targets alone
// (SanitizeBoundingBoxes, the clamps, …) or draws against them (RandomIoUCrop), "" if
// none: a job without targets refuses it, as torchvision's fails when it
// is given no boxes.
func NeedsTargets(t *Transform) string {
	return t.firstOp(func(d *optab.Def) bool { return d.NeedsTargets })
}

// NeedsKeypoints names the first op of t that acts on the instances'
// keypoints (SanitizeKeyPoints: its Def's NeedsKeypoints), "" if none: a
// job whose dataset has none refuses it (KeypointsKnownNone).
func NeedsKeypoints(t *Transform) string {
	return t.firstOp(func(d *optab.Def) bool { return d.NeedsKeypoints })
}

// firstOp names the first op of t (of each view in turn) whose Def is
// (firstOf), "" if none.
func (t *Transform) firstOp(is func(d *optab.Def) bool) string {
	if t.views != nil {
		for _, v := range t.views {
			if s := v.firstOp(is); s != "" {
				return s
			}
		}
		return ""
	}
	return firstOf(t.ops, "", is)
}

// firstOf names the first op of ops, at any depth, whose Def is, "" if
// none: "Kind (op i)", a container's op after its own.
func firstOf(ops []optab.Op, at string, is func(d *optab.Def) bool) string {
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("%s%s (op %d)", at, op.Kind, i)
		if d := optab.Lookup(op.Kind); d != nil && is(d) {
			return where
		}
		if s := firstOf(op.Ops, where+": ", is); s != "" {
			return s
		}
	}
	return ""
}

func checkTargetOps(ops []optab.Op, at string) error {
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("%s%s (op %d)", at, op.Kind, i)
		switch optab.RoleOf(op.Kind) {
		case optab.TargetsContainer:
			if err := checkTargetOps(op.Ops, where+": "); err != nil {
				return err
			}
		case optab.TargetsMove, optab.TargetsInstances, optab.TargetsPixels:
			// Moves the boxes (MoveBoxes), drops, clamps or reformats them
			// (MoveTargets), or pixels alone: the boxes stay.
		default:
			return fmt.Errorf("%w: transform: %s: targets do not support it yet (boxes move only through %s)", errs.Unsupported, where, strings.Join(kindsMoving(), ", "))
		}
	}
	return nil
}

// kindsMoving are the ops that move targets.
func kindsMoving() []string {
	var ks []string
	for _, k := range optab.Kinds() {
		if optab.Defs[k].Targets == optab.TargetsMove {
			ks = append(ks, string(k))
		}
	}
	return ks
}

// TargetKeypoints is the keypoints an instance of ds's targets carries
// (P): 0 for a dataset without them.
func TargetKeypoints(ds dataset.Dataset) int {
	switch d := ds.(type) {
	case *dataset.COCODataset:
		return d.Annotations().Keypoints()
	case *dataset.YOLODataset:
		return d.Config().KptShape[0]
	}
	return 0
}

// KeypointsKnownNone says whether ds says its instances carry no
// keypoints: a COCO file without them, a YOLO dataset without kpt_shape.
// A WebDataset's are each sample's own, so it says nothing.
func KeypointsKnownNone(ds dataset.Dataset) bool {
	switch ds.(type) {
	case *dataset.COCODataset, *dataset.YOLODataset:
		return TargetKeypoints(ds) == 0
	}
	return false
}

// CheckMasks refuses a transform whose geometry masks do not follow: a
// Pad, RandomCrop, RandomZoomOut, RandomRotation or RandomAffine whose
// masks' fill is not one integer 0..255 (torchvision fills a Mask with a
// plain fill too; a fill per type, its optab.Filling's FillTyped, gives
// the masks their own), or a RandomPerspective. A FixedSizeCrop pads masks with 0, as the
// detection references' does.
func CheckMasks(t *Transform) error {
	return checkMaskOps(t.ops, "")
}

func checkMaskOps(ops []optab.Op, at string) error {
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("%s%s (op %d)", at, op.Kind, i)
		d := optab.Lookup(op.Kind)
		switch {
		case d == nil:
		case d.Targets == optab.TargetsContainer:
			if err := checkMaskOps(op.Ops, where+": "); err != nil {
				return err
			}
		case d.Masks != nil:
			if err := d.Masks(op); err != nil {
				return fmt.Errorf("%w: transform: %s: %v", errs.Unsupported, where, err)
			}
		}
	}
	return nil
}

// CheckOverlapMask refuses a job asking for the overlap mask
// (target_fields "overlap_mask") whose transform or dataset cannot give
// ultralytics' one: the dataset's polygons move only through ultralytics'
// ops (the YOLO family's), so the transform must start with the YOLO
// geometry (a load_image or a mosaic) and move the targets by no other op; and the dataset must be a YOLO
// segment dataset (label lines of polygons).
func CheckOverlapMask(t *Transform, ds dataset.Dataset) error {
	if d, ok := ds.(*dataset.YOLODataset); !ok || !d.HasSegments() {
		return fmt.Errorf("%w: overlap_mask: the dataset has no polygons (a YOLO segment dataset's label lines): ultralytics' overlap mask is made of them", errs.Unsupported)
	}
	if t.views != nil || t.yolo == nil && t.mosaic == nil {
		return fmt.Errorf("%w: overlap_mask: the transform has no YOLO geometry (%s or a mosaic first): the overlap mask follows ultralytics' ops only", errs.Unsupported, OpYOLOLoadImage)
	}
	return checkOverlapOps(t.ops, "")
}

func checkOverlapOps(ops []optab.Op, at string) error {
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("%s%s (op %d)", at, op.Kind, i)
		switch optab.RoleOf(op.Kind) {
		case optab.TargetsContainer:
			if err := checkOverlapOps(op.Ops, where+": "); err != nil {
				return err
			}
		case optab.TargetsMove:
			if !strings.HasPrefix(string(op.Kind), "YOLO") {
				return fmt.Errorf("%w: overlap_mask: transform: %s moves the boxes but not the dataset's polygons: the overlap mask follows ultralytics' ops only (%s)", errs.Unsupported, where, strings.Join(yoloMovers(), ", "))
			}
		}
	}
	return nil
}

// yoloMovers are the YOLO family's ops that move the targets (the only
// ones whose moves the overlap mask follows), as the registry has them.
func yoloMovers() []string {
	var ks []string
	for _, k := range optab.Kinds() {
		if r := optab.RoleOf(k); strings.HasPrefix(string(k), "YOLO") && (r == optab.TargetsMove || r == optab.TargetsInstances) {
			ks = append(ks, string(k))
		}
	}
	return ks
}
