package dataset

// FieldTargets is the per-sample field a job's detection targets travel
// as: a sample's instances (Targeted) moved through the geometry the
// pipeline drew for it, made by the executor's worker after the image
// (pipeline.AppendTargets gives the layout), never read from a dataset.
const FieldTargets = "targets"

// TargetsHeader is the bytes of an encoded FieldTargets before its boxes
// (pipeline.AppendTargets): the least a sample's targets field holds.
const TargetsHeader = 24

// Targeted is a Dataset whose samples have boxes and labels (COCO, YOLO).
type Targeted interface {
	// SourceTargets sets t to sample i's instances, reusing its slices:
	// boxes XYXY in the pixels of the source image, which is w x h; an
	// error when the sample's annotations are malformed.
	SourceTargets(i, w, h int, t *Instances) error
}

// Instances are one sample's annotated instances as its dataset has them:
// Boxes XYXY in pixels of the source image, Labels the contiguous labels,
// Crowd 1 for a COCO crowd annotation (kept, as torchvision's
// CocoDetection wrapper keeps it). The pipeline's Targets are Instances
// moved through a sample's geometry.
type Instances struct {
	ImageID int64
	Boxes   [][4]float32
	Labels  []int64
	Crowd   []uint8
}

// Reset empties t, keeping its slices' room.
func (t *Instances) Reset() {
	t.ImageID = 0
	t.Boxes, t.Labels, t.Crowd = t.Boxes[:0], t.Labels[:0], t.Crowd[:0]
}

// Add appends an instance.
func (t *Instances) Add(box [4]float32, label int64, crowd bool) {
	c := uint8(0)
	if crowd {
		c = 1
	}
	t.Boxes, t.Labels, t.Crowd = append(t.Boxes, box), append(t.Labels, label), append(t.Crowd, c)
}
