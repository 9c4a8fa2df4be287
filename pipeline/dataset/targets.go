package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

// FieldTargets is the per-sample field a job's detection targets travel
// as: a sample's instances (Targeted) moved through the geometry the
// pipeline drew for it, made by the executor's worker after the image
// (targets.AppendTargets gives the layout), never read from a dataset.
const FieldTargets = "targets"

// TargetsHeader is the bytes of an encoded FieldTargets before its boxes
// (targets.AppendTargets): the least a sample's targets field holds.
const TargetsHeader = 24

// Targeted is a Dataset whose samples have boxes and labels (COCO, YOLO).
type Targeted interface {
	// SourceTargets sets t to sample i's instances, reusing its slices:
	// boxes XYXY in the pixels of the source image, which is w x h; an
	// error when the sample's annotations are malformed. A dataset with
	// keypoints sets t.P and P points an instance.
	SourceTargets(i, w, h int, t *Instances) error
}

// UltralyticsTargeted is a Targeted whose labels are ultralytics'
// (YOLO's normalized ones): UltralyticsTargets sets t as SourceTargets
// does, with ultralytics' arithmetic, for an image of w x h (the YOLO
// family's loaded size).
type UltralyticsTargeted interface {
	UltralyticsTargets(i, w, h int, t *Instances) error
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
	// P is the keypoints of every instance: the dataset's (a COCO file's
	// most keypoints of a category, a YOLO dataset's kpt_shape[0]); 0:
	// none.
	P int
	// Points are (x, y) in pixels, P an instance, instance by instance
	// (Points[k*P+j] is instance k's point j).
	Points [][2]float32
	// Vis are their visibilities, as COCO's v: 0 not labelled (the point
	// is (0, 0)), 1 labelled but not visible, 2 visible. The geometry
	// leaves them, as torchvision's kernels have none.
	Vis []uint8
	// WantMasks asks SourceTargets for Masks (a job's, kept by Reset).
	WantMasks bool
	// ContiguousLabels asks a COCO dataset's SourceTargets for each
	// category's rank (0..K-1, the categories sorted by id) as its label
	// rather than its category_id (a job's, kept by Reset).
	ContiguousLabels bool
	// Masks are the instances' masks at the source image's size, one an
	// instance, as pycocotools' annToRLE gives them (column-major runs):
	// with WantMasks only.
	Masks []annot.RLE
	// Segments are a YOLO segment dataset's polygons as ultralytics'
	// Instances holds them for its training transforms: each instance's,
	// resampled to one length (resample_segments, 1000 points), in pixels;
	// set by UltralyticsTargets only, one an instance, or none.
	Segments [][][2]float32
}

// Reset empties t, keeping its slices' room.
func (t *Instances) Reset() {
	t.ImageID, t.P = 0, 0
	t.Boxes, t.Labels, t.Crowd = t.Boxes[:0], t.Labels[:0], t.Crowd[:0]
	t.Points, t.Vis = t.Points[:0], t.Vis[:0]
	t.Masks = t.Masks[:0]
	t.Segments = t.Segments[:0]
}

// KeepPoints moves instance k's points to instance n's place (n <= k),
// for a filter that keeps instance k as the n-th.
func (t *Instances) KeepPoints(n, k int) {
	if len(t.Masks) > k {
		t.Masks[n] = t.Masks[k]
	}
	if len(t.Segments) > k {
		t.Segments[n] = t.Segments[k]
	}
	if t.P > 0 && n != k {
		copy(t.Points[n*t.P:(n+1)*t.P], t.Points[k*t.P:(k+1)*t.P])
		copy(t.Vis[n*t.P:(n+1)*t.P], t.Vis[k*t.P:(k+1)*t.P])
	}
}

// CutPoints keeps the first n instances' points.
func (t *Instances) CutPoints(n int) {
	t.Points, t.Vis = t.Points[:n*t.P], t.Vis[:n*t.P]
	if len(t.Masks) > n {
		t.Masks = t.Masks[:n]
	}
	if len(t.Segments) > n {
		t.Segments = t.Segments[:n]
	}
}

// addMask appends an instance's mask (its polygons' union or its
// run-length mask: annot's, pycocotools' bytes); none (no segmentation)
// is a mask of zeros of h x w.
func (t *Instances) addMask(r annot.RLE, ok bool, h, w int) {
	if !ok || len(r.Counts) == 0 {
		r = annot.RLE{H: h, W: w, Counts: []uint32{uint32(h * w)}}
	}
	t.Masks = append(t.Masks, r)
}

// addCOCOPoints appends one instance's P points from COCO's (x, y, v)
// triplets, each coordinate made float32 as torch.as_tensor(keypoints,
// dtype=torch.float32) makes it; an instance with fewer (its category has
// fewer, or none) gets (0, 0) with visibility 0 for the rest, as COCO
// writes an unlabelled point. The triplets were checked when the file was
// read (annot: v is 0, 1 or 2).
func (t *Instances) addCOCOPoints(kp []float64) {
	for j := range t.P {
		if 3*j+2 < len(kp) {
			t.Points = append(t.Points, [2]float32{float32(kp[3*j]), float32(kp[3*j+1])})
			t.Vis = append(t.Vis, uint8(kp[3*j+2]))
			continue
		}
		t.Points, t.Vis = append(t.Points, [2]float32{}), append(t.Vis, 0)
	}
}

// addYOLOPoints appends one instance's P points from a YOLO pose line's
// normalized (x, y, v) triplets, in pixels of a w x h image as
// ultralytics' denormalize scales them (x * w, y * h in float32); an error
// (its message, without the file) for a visibility other than 0, 1 or 2.
func (t *Instances) addYOLOPoints(kp []float32, w, h int) error {
	fw, fh := float32(w), float32(h)
	for j := range t.P {
		x, y, v := kp[3*j], kp[3*j+1], kp[3*j+2]
		if v != 0 && v != 1 && v != 2 {
			return fmt.Errorf("keypoint %d has visibility %v: targets carry 0, 1 or 2 (COCO's)", j, v)
		}
		t.Points = append(t.Points, [2]float32{float32(x * fw), float32(y * fh)})
		t.Vis = append(t.Vis, uint8(v))
	}
	return nil
}

// Add appends an instance.
func (t *Instances) Add(box [4]float32, label int64, crowd bool) {
	c := uint8(0)
	if crowd {
		c = 1
	}
	t.Boxes, t.Labels, t.Crowd = append(t.Boxes, box), append(t.Labels, label), append(t.Crowd, c)
}

// MemberAnnotations says whether an --annotations value names a member of
// each WebDataset sample rather than a file: ".EXT" (".json"), the
// member key.EXT; ext is EXT.
func MemberAnnotations(ann string) (ext string, ok bool) {
	ext, ok = strings.CutPrefix(ann, ".")
	return ext, ok && ext != "" && !strings.ContainsAny(ext, "/\\")
}

// WithMemberTargets makes ds, WebDataset shards on a disk or in a store,
// Targeted: each sample's instances are its member key.EXT, COCO-style
// JSON (annot.ReadSampleJSON: boxes [x, y, w, h] in pixels, category_id,
// iscrowd, segmentation, keypoints), checked sample by sample as it is
// read. The labels are the category ids as given (no file lists the
// categories); the image id the member's "image_id", else the sample's
// index. A dataset of another layout, or no sample with the member, is
// refused.
func WithMemberTargets(ds Dataset, ext string) (Dataset, error) {
	f, ok := ds.(Fielded)
	var id int
	if ok {
		id, ok = f.FieldID(ext)
	}
	if !ok || id == fieldIDKey || id == fieldIDCls {
		why := "no sample has one"
		if n, ok := ds.(interface{ FieldsNotIndexed() string }); ok && n.FieldsNotIndexed() != "" {
			why = n.FieldsNotIndexed()
		}
		if _, wds := ds.(Sharded); !wds {
			why = "the annotations of a member are a WebDataset's (shards of key.jpg with key." + ext + "), and this dataset is not one"
		}
		return nil, fmt.Errorf("%w: annotations .%s: each sample's member key.%s: %s", ErrUnsupported, ext, ext, why)
	}
	if g, ok := ds.(Grouped); ok && g.Records() < ds.Len() {
		// Its member is the record's, not one image's: whose boxes
		// they are would be a guess.
		return nil, fmt.Errorf("%w: annotations .%s: the dataset has records of several images (KEY.0.jpg, KEY.1.jpg, ...: %d images in %d records), "+
			"and a record's member key.%s is the record's, not one image's: targets of records of several images are not served", ErrUnsupported, ext, ds.Len(), g.Records(), ext)
	}
	m := memberTargets{ext: ext, id: id}
	h := sha256.Sum256([]byte(ds.Fingerprint() + "\x00annotations ." + ext))
	m.mfp = hex.EncodeToString(h[:])
	switch d := ds.(type) {
	case *WebDataset:
		return &WebDatasetTargets{WebDataset: d, memberTargets: m}, nil
	case *ShardedStoreDataset:
		return &StoreWebDatasetTargets{ShardedStoreDataset: d, memberTargets: m}, nil
	}
	return nil, fmt.Errorf("%w: annotations .%s: the annotations of a member are a WebDataset's, and this dataset is not one", ErrUnsupported, ext)
}

// WebDatasetTargets is a WebDataset on a disk whose samples' annotations
// are a member of each (WithMemberTargets).
type WebDatasetTargets struct {
	*WebDataset
	memberTargets
}

// StoreWebDatasetTargets is WebDatasetTargets of shards in a store.
type StoreWebDatasetTargets struct {
	*ShardedStoreDataset
	memberTargets
}

var (
	_ Targeted = (*WebDatasetTargets)(nil)
	_ Targeted = (*StoreWebDatasetTargets)(nil)
	_ Sharded  = (*StoreWebDatasetTargets)(nil)
)

var _ ShardFieldPrefetcher = (*StoreWebDatasetTargets)(nil)

// PrefetchFields implements FieldPrefetcher: a job with targets reads each
// sample's member too, hinted with its image (one request for both).
func (d *StoreWebDatasetTargets) PrefetchFields(indices []int64, fs *FieldSet) {
	d.ShardedStoreDataset.PrefetchFields(indices, d.hint(fs))
}

// PrefetchShardFields implements ShardFieldPrefetcher, as PrefetchFields.
func (d *StoreWebDatasetTargets) PrefetchShardFields(indices []int64, fs *FieldSet) {
	d.ShardedStoreDataset.PrefetchShardFields(indices, d.hint(fs))
}

// hint is fs with the annotations' member when fs has the targets.
func (m *memberTargets) hint(fs *FieldSet) *FieldSet {
	if !fs.HasTargets() || slices.Contains(fs.ids, m.id) {
		return fs
	}
	h := *fs
	h.names = append(slices.Clip(fs.names), "\x00member ."+m.ext) // its own key for the rehint
	h.ids = append(slices.Clip(fs.ids), m.id)
	h.max = max(fs.max, annot.MaxSampleJSON)
	return &h
}

// memberTargets reads a sample's instances from its member key.ext,
// field id of its dataset.
type memberTargets struct {
	ext string
	id  int
	mfp string
}

// SourceTargets implements Targeted.
func (d *WebDatasetTargets) SourceTargets(i, w, h int, t *Instances) error {
	return d.read(d.WebDataset, i, w, h, t)
}

// SourceTargets implements Targeted.
func (d *StoreWebDatasetTargets) SourceTargets(i, w, h int, t *Instances) error {
	return d.read(d.ShardedStoreDataset, i, w, h, t)
}

// Fingerprint implements Dataset: the shards', and which member holds the
// annotations (the shards' objects and sizes cover the members' bytes).
func (d *WebDatasetTargets) Fingerprint() string { return d.mfp }

// Fingerprint implements Dataset, as WebDatasetTargets'.
func (d *StoreWebDatasetTargets) Fingerprint() string { return d.mfp }

// Layout implements the format name servers report.
func (d *WebDatasetTargets) Layout() string { return LayoutWebDataset }

// AnnotationsMember is the member the annotations are read from, "json".
func (m *memberTargets) AnnotationsMember() string { return m.ext }

func (m *memberTargets) read(ds interface {
	Fielded
	Name(int) string
}, i, w, h int, t *Instances) error {
	dir, base := path.Split(ds.Name(i))
	key, _, _ := strings.Cut(base, ".")
	name := dir + key + "." + m.ext
	switch size := ds.FieldSize(i, m.id); {
	case size < 0:
		return &annotationError{&annot.SampleError{File: name, Annotation: "file", Field: m.ext, Err: fmt.Errorf("the sample has no member key.%s: its annotations", m.ext)}}
	case size > annot.MaxSampleJSON:
		return &annotationError{&annot.SampleError{File: name, Annotation: "file", Field: "size", Err: fmt.Errorf("%d bytes, more than the %d allowed", size, annot.MaxSampleJSON)}}
	}
	b, err := ds.ReadField(i, m.id, nil)
	if err != nil {
		return err
	}
	s, err := annot.ReadSampleJSON(name, b, w, h)
	if err != nil {
		return &annotationError{err}
	}
	t.ImageID = int64(i)
	if s.HasID {
		t.ImageID = s.ImageID
	}
	for k := range s.Instances {
		t.P = max(t.P, len(s.Instances[k].Keypoints)/3)
	}
	for k := range s.Instances {
		in := &s.Instances[k]
		t.Add(xywhToXYXY(in.BBox), in.CategoryID, in.IsCrowd)
		t.addCOCOPoints(in.Keypoints)
		if t.WantMasks {
			r, ok, err := annot.SegmentationMask(in.Segmentation, h, w)
			if err != nil {
				return &annotationError{&annot.SampleError{File: name, Annotation: fmt.Sprintf("annotation %d", k), Field: "segmentation", Err: err}}
			}
			t.addMask(r, ok, h, w)
		}
	}
	return nil
}
