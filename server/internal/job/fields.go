package job

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/internal/ragged"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A job's fields (JobSpec.fields) travel in each batch's header, beside
// its pixels, one FieldValues a field; its targets (JobSpec.targets), a
// field of the batch (FieldTargets) while it is made, as the header's
// ragged arrays (BatchTargets). What a batch's fields may take is
// bounded before the job starts: batch_size x fields x max_field_bytes
// is at most maxBatchFieldBytes, and a sample with a larger field fails
// by itself, named, before the field is read. So a header stays within
// what the clients take (stoker's raise gRPC's receive limit for it), the
// bound is the same on every maker (a peer's batch is the bytes this
// server's would be), and the memory budget counts each batch buffer's
// fields at the bound (Job.BatchBytes), whatever the dataset holds.
const (
	// defaultMaxFieldBytes is a field's bound when the job sets none: a
	// caption or a sample's metadata (LAION's .json is about 1 KB).
	defaultMaxFieldBytes = 16 << 10
	// maxBatchFieldBytes bounds a batch's fields in all.
	maxBatchFieldBytes = 32 << 20
)

// fieldsOf validates spec's fields against ds (served as name) for
// batches of bs samples.
func fieldsOf(spec *stokerv1.JobSpec, name string, ds dataset.Dataset, bs int) (*dataset.FieldSet, error) {
	names := spec.GetFields()
	if slices.Contains(names, transform.FieldTargets) {
		return nil, status.Errorf(codes.InvalidArgument, "field %q: ask for targets with targets=true (JobSpec.targets), which checks the transform", transform.FieldTargets)
	}
	masks, overlap, err := targetFieldsOf(spec, ds)
	if err != nil {
		return nil, err
	}
	if spec.GetTargets() {
		// The targets are made as a field, last, bounded as the others
		// (with masks, by a bound of their own: SetMasks); they travel
		// packed (packTargets).
		names = append(slices.Clip(names), transform.FieldTargets)
	}
	if len(names) == 0 {
		if spec.GetMaxFieldBytes() != 0 {
			return nil, status.Errorf(codes.InvalidArgument, "max_field_bytes %d without fields: it bounds the fields a job asks for", spec.GetMaxFieldBytes())
		}
		return nil, nil
	}
	if len(names) > dataset.MaxFields {
		return nil, status.Errorf(codes.InvalidArgument, "%d fields: the limit is %d", len(names), dataset.MaxFields)
	}
	most := int64(maxBatchFieldBytes) / (int64(bs) * int64(len(names)))
	per := int64(spec.GetMaxFieldBytes())
	switch {
	case per == 0:
		per = min(defaultMaxFieldBytes, most)
	case per > most:
		return nil, status.Errorf(codes.InvalidArgument, "max_field_bytes %d: a batch of %d samples with %d fields may then take %d bytes of fields, over the bound of %d; "+
			"at this batch size and these fields, max_field_bytes may be at most %d (a sample with a larger field fails by itself)",
			per, bs, len(names), per*int64(bs)*int64(len(names)), maxBatchFieldBytes, most)
	}
	if per < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "fields with batch_size %d: %d fields of %d samples leave less than a byte each within a batch's bound of %d bytes",
			bs, len(names), bs, maxBatchFieldBytes)
	}
	fs, err := dataset.NewFieldSet(ds, names, per, name)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "dataset %q: %s", Truncate(name, 64), strings.TrimPrefix(err.Error(), errs.Unsupported.Error()+": "))
	}
	if spec.GetContiguousLabels() {
		fs.SetContiguousLabels()
	}
	if masks || overlap {
		// The targets with masks (or the overlap mask) have a bound of their own, within what
		// the batch's bound leaves after the other fields.
		left := int64(maxBatchFieldBytes)/int64(bs) - int64(len(names)-1)*per
		tb := int64(spec.GetMaxTargetsBytes())
		switch {
		case tb == 0:
			tb = min(defaultMaxTargetsBytes, left)
		case tb > left:
			return nil, status.Errorf(codes.InvalidArgument, "max_targets_bytes %d: a batch of %d samples may take %d bytes of fields in all, which leaves at most %d a sample's targets",
				tb, bs, maxBatchFieldBytes, left)
		}
		if tb < int64(targets.TargetsSize(0, 0)) {
			return nil, status.Errorf(codes.InvalidArgument, "targets with masks with batch_size %d: the batch's %d bytes of fields leave a sample's targets %d bytes", bs, maxBatchFieldBytes, tb)
		}
		if masks {
			fs.SetMasks(tb)
		} else {
			fs.SetOverlapMask(tb)
			fs.SetMaskFormat(maskFormatOf(spec))
		}
	}
	return fs, nil
}

// targetFieldNames are the names JobSpec.target_fields may give:
// torchvision's keys of a detection sample's target, and "overlap_mask",
// ultralytics' yolov8-seg mask (Format(mask_overlap=True)'s).
var targetFieldNames = []string{"boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility", "masks", "overlap_mask"}

// defaultMaxTargetsBytes bounds a sample's targets with masks when the
// job sets no max_targets_bytes: about 250 000 runs, the masks of a few
// hundred instances of a 1024x1024 canvas.
const defaultMaxTargetsBytes = 1 << 20

// errMasksAndOverlap refuses target_fields with both masks.
var errMasksAndOverlap = status.Error(codes.InvalidArgument, "target_fields: \"masks\" and \"overlap_mask\" together: torchvision's masks (one an instance, in the boxes' order) and ultralytics' overlap mask (the instances in its area order) cannot share the boxes' order; ask for one")

// targetFieldsOf checks spec's target_fields against ds and says whether
// they ask for masks, and for the overlap mask (never both).
func targetFieldsOf(spec *stokerv1.JobSpec, ds dataset.Dataset) (masks, overlap bool, err error) {
	tf := spec.GetTargetFields()
	if len(tf) > 0 && !spec.GetTargets() {
		return false, false, status.Error(codes.InvalidArgument, "target_fields without targets: they name the fields of the targets a job asks for (targets=true)")
	}
	if spec.GetContiguousLabels() && !spec.GetTargets() {
		return false, false, status.Error(codes.InvalidArgument, "contiguous_labels without targets: it says how the targets' labels count a COCO file's categories (targets=true)")
	}
	seen := map[string]bool{}
	for _, n := range tf {
		switch {
		case !slices.Contains(targetFieldNames, n):
			return false, false, status.Errorf(codes.InvalidArgument, "target_fields: %q: want some of %s", Truncate(n, 64), strings.Join(targetFieldNames, ", "))
		case seen[n]:
			return false, false, status.Errorf(codes.InvalidArgument, "target_fields: %q asked for twice", n)
		case strings.HasPrefix(n, "keypoints") && transform.TargetKeypoints(ds) == 0:
			return false, false, status.Errorf(codes.InvalidArgument, "target_fields: %q: the dataset has no keypoints", n)
		}
		seen[n] = true
	}
	masks, overlap = seen["masks"], seen["overlap_mask"]
	switch {
	case masks && overlap:
		return false, false, errMasksAndOverlap
	case !overlap && (spec.GetMaskRatio() != 0 || spec.MaskOverlap != nil):
		return false, false, status.Error(codes.InvalidArgument, "mask_ratio or mask_overlap without \"overlap_mask\" in target_fields: they are the options of ultralytics' Format mask (targets=(..., \"overlap_mask\"))")
	case spec.GetMaskRatio() > maxMaskRatio:
		return false, false, status.Errorf(codes.InvalidArgument, "mask_ratio %d: at most %d (the masks' downsample; ultralytics' default is 4)", spec.GetMaskRatio(), maxMaskRatio)
	case !masks && !overlap && spec.GetMaxTargetsBytes() != 0:
		return false, false, status.Errorf(codes.InvalidArgument, "max_targets_bytes %d without masks: it bounds the targets that carry masks (target_fields \"masks\" or \"overlap_mask\"); the others are bounded by max_field_bytes", spec.GetMaxTargetsBytes())
	}
	return masks, overlap, nil
}

// maxMaskRatio bounds JobSpec.mask_ratio before the canvas does (it
// must not exceed the canvas' smaller side: Format's own check).
const maxMaskRatio = 1 << 14

// maskFormatOf is spec's overlap mask's mask_ratio (0: ultralytics'
// default, 4) and mask_overlap (absent: true).
func maskFormatOf(spec *stokerv1.JobSpec) (ratio int, overlap bool) {
	ratio = int(spec.GetMaskRatio())
	if ratio == 0 {
		ratio = 4
	}
	return ratio, spec.MaskOverlap == nil || spec.GetMaskOverlap()
}

// checkMaskRatio refuses a mask_ratio past the smaller side of t's
// output (the masks would have no pixels), as ultralytics' Format does;
// a transform whose samples have sizes of their own is checked per
// sample (targets.AppendOverlap).
func checkMaskRatio(t *transform.Transform, spec *stokerv1.JobSpec) error {
	r, _ := maskFormatOf(spec)
	if h, w := t.Size(); !t.Varies() && h > 0 && w > 0 && r > min(h, w) {
		return fmt.Errorf("%w: overlap_mask: mask_ratio=%d downsamples the transform's %dx%d output to zero size; use mask_ratio <= %d", errs.Unsupported, r, w, h, min(h, w))
	}
	return nil
}

// fieldBytes bounds what one batch's fields hold, and its targets'
// ragged arrays beside them (b.Packed: at most the samples' targets, each
// at its bound, and a run offset).
func (j *Job) fieldBytes() int64 {
	fs := j.fields
	n := int64(j.MaxSamples()) * fs.SampleMax()
	if fs.HasTargets() {
		n += ragged.Size(int64(j.MaxSamples()) * fs.TargetsMax())
	}
	return n
}

// SlotBytes is a shared-memory slot's size for the job: its pixels at
// their largest, and, when the trainer reads targets from the slot
// (ShmRequest.targets_in_slot) and the job has them, room after them for
// their arrays (ragged.SlotRoom; a batch whose arrays need more has them
// in its header).
func (j *Job) SlotBytes(targetsInSlot bool) int64 {
	px := j.PixelBytes()
	if !targetsInSlot || !j.fields.HasTargets() {
		return px
	}
	room := ragged.SlotRoom(px, int64(j.MaxSamples()), j.fields.TargetsMax())
	if room == 0 {
		return px
	}
	return (px+ragged.SlotAlign-1)/ragged.SlotAlign*ragged.SlotAlign + room
}

// fieldValues is b's fields for its header, field by field: each value
// b's own bytes, not copied. The targets are not among them: they travel
// as ragged arrays (packTargets).
func fieldValues(b *pipeline.Batch) []*stokerv1.FieldValues {
	fs := b.FieldSet
	nf := batch.FieldCount(fs)
	if nf == 0 || len(b.Fields) != b.N*nf {
		return nil
	}
	t := -1
	if s, ok := fs.(*dataset.FieldSet); ok {
		t = s.TargetsAt()
	}
	out := make([]*stokerv1.FieldValues, 0, nf)
	for f, name := range fs.Names() {
		if f == t {
			continue
		}
		v := &stokerv1.FieldValues{Name: name, Values: make([][]byte, b.N)}
		for i := range b.N {
			fv := &b.Fields[i*nf+f]
			v.Values[i] = fv.Data
			if !fv.Has {
				v.Missing = append(v.Missing, uint32(i))
			}
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// packTargets packs b's samples' targets (its field FieldTargets, each
// sample's as the pipeline encoded it) into the ragged arrays of its
// header, in b.Packed; nil when the job asks for none.
func packTargets(fs *dataset.FieldSet, b *pipeline.Batch) (*stokerv1.BatchTargets, error) {
	t := fs.TargetsAt()
	if t < 0 {
		return nil, nil
	}
	nf := fs.Len()
	if len(b.Fields) != b.N*nf {
		return nil, fmt.Errorf("batch of %d samples with %d fields, want %d a sample", b.N, len(b.Fields), nf)
	}
	vals := make([][]byte, b.N)
	for i := range b.N {
		f := &b.Fields[i*nf+t]
		if !f.Has {
			return nil, fmt.Errorf("sample %d (index %d) without its targets", i, b.Indices[i])
		}
		vals[i] = f.Data
	}
	bt, buf, err := ragged.Pack(vals, fs.Masks(), ragged.OverlapOf(fs), b.Packed)
	b.Packed = buf
	return bt, err
}

// FieldNames is the fields ds's samples may have.
func FieldNames(ds dataset.Dataset) []string {
	if fd, ok := ds.(dataset.Fielded); ok {
		return fd.FieldNames()
	}
	return []string{dataset.FieldSource}
}
