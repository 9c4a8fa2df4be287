package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/det"
)

// FieldYOLO is a YOLO dataset's sample's labels, as JSON: {"file_name":
// ..., "labels": [{"class": C, "box": [cx, cy, w, h], "polygon": [...],
// "keypoints": [...]}, ...]}, normalized as the label file gives them.
const FieldYOLO = "yolo"

const fieldIDYOLO = 0

// YOLODataset is a directory of images in the YOLO layout, as ultralytics
// reads it (`--dataset NAME=DIR/images/train --annotations NAME=data.yaml`):
// the images under DIR, sorted by path; each image's labels in its label
// file (annot.LabelPath: the last "images" component of the path becomes
// "labels", the extension .txt; none: no instances), its field "yolo";
// class names from the YAML. Every label file is read and checked at
// start (as ultralytics caches them); a bad one is its image's error. The
// fingerprint covers the YAML and every label file's bytes.
type YOLODataset struct {
	*ImageFolder // the images, read as an ImageFolder's (one class "")
	cfg          *annot.YOLOConfig
	dir          string // the images' directory, for the label files' names
	labels       [][]annot.YOLOInstance
	errs         []error
	bytes        int64
	fp           string
	// imgs reads the images from object storage (nil: the ImageFolder's
	// root); lnames are then the label files' names in messages.
	imgs   *storeImages
	lnames []string
	read   []yoloLabel // the label files as read, when kept (IndexAnnotated)
	// yamlSum is the hex SHA-256 of the dataset YAML.
	yamlSum string
}

var _ Fielded = (*YOLODataset)(nil)

// OpenYOLO opens the images under dir with the labels beside them, class
// names from the dataset YAML at yaml.
// The YAML is read as openLocalFile reads a file, at most MaxDatasetYAML
// bytes.
func OpenYOLO(dir, yaml string) (*YOLODataset, error) {
	raw, err := readLocalFile(yaml, "annotations "+yaml, MaxDatasetYAML)
	if err != nil {
		return nil, fmt.Errorf("annotations: %w", err)
	}
	return yoloInDir(dir, filepath.Base(yaml), raw)
}

// yoloInDir is the YOLO dataset of the images under the local directory
// dir, with the dataset YAML raw (named yamlName).
func yoloInDir(dir, yamlName string, raw []byte) (*YOLODataset, error) {
	cfg, err := annot.ParseYOLOConfig(yamlName, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	var sizes []int64
	err = fs.WalkDir(root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() && isImage(p) {
			info, err := e.Info()
			if err != nil {
				return err
			}
			files = append(files, p)
			sizes = append(sizes, info.Size())
		}
		return nil
	})
	if err != nil {
		root.Close()
		return nil, err
	}
	if len(files) == 0 {
		root.Close()
		return nil, fmt.Errorf("%w: no images under %s", ErrUnsupported, dir)
	}
	d, h := newYOLODataset(cfg, raw, files, sizes)
	d.root, d.dir = root, dir
	// Label files are read beneath the dataset's root (labelRoots), as
	// the images are: a labels directory linked out of it refuses the
	// dataset; a label file that cannot be taken (a link out, a FIFO or a
	// device, over the bound) is its image's error, naming it and why.
	lr := newLabelRoots(dir)
	defer lr.close()
	if err := lr.checkDirs(d.files); err != nil {
		root.Close()
		return nil, err
	}
	for i, f := range d.files {
		name := labelName(dir, annot.LabelPath(filepath.Join(dir, filepath.FromSlash(f))))
		data, ok, err := lr.read(f, name)
		var ae *annotationError
		switch {
		case errors.As(err, &ae):
			d.errs[i] = ae
			h.add(f+"\x00"+ae.Error(), d.sizes[i], -1)
			continue
		case err != nil:
			root.Close()
			return nil, fmt.Errorf("labels of %s: %w", f, err)
		}
		d.setLabels(&h, i, name, data, ok)
	}
	d.fp = h.sum()
	return d, nil
}

// newYOLODataset is the dataset of the images files (of sizes), sorted
// by path, before their labels are read, with the hash its fingerprint is
// made of (setLabels adds each image's to it).
func newYOLODataset(cfg *annot.YOLOConfig, raw []byte, files []string, sizes []int64) (*YOLODataset, indexHash) {
	idx := make([]int, len(files))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return files[idx[a]] < files[idx[b]] })
	sf, ss := make([]string, len(files)), make([]int64, len(files))
	for i, j := range idx {
		sf[i], ss[i] = files[j], sizes[j]
	}
	d := &YOLODataset{
		ImageFolder: &ImageFolder{maxSize: DefaultMaxFileSize, classes: cfg.Names, files: sf, labels: make([]int32, len(sf)), sizes: ss},
		cfg:         cfg, labels: make([][]annot.YOLOInstance, len(sf)), errs: make([]error, len(sf)),
	}
	for i := range d.ImageFolder.labels {
		d.ImageFolder.labels[i] = -1
	}
	h := newIndexHash("yolo", cfg.Names)
	yh := sha256.Sum256(raw)
	h.str(string(yh[:]))
	d.yamlSum = hex.EncodeToString(yh[:])
	return d, h
}

// setLabels sets image i's labels from its label file's bytes, data
// (named name in messages; ok false: it has none), and adds the image and
// its labels to the fingerprint's hash.
func (d *YOLODataset) setLabels(h *indexHash, i int, name string, data []byte, ok bool) {
	f := d.files[i]
	if !ok {
		h.add(f, d.sizes[i], -1)
		return
	}
	sum := sha256.Sum256(data)
	h.add(f+"\x00"+string(sum[:]), d.sizes[i], int64(len(data)))
	d.bytes += d.parseLabels(i, name, data)
}

// parseLabels sets image i's labels, or their error, from its label
// file's bytes, and says about how many bytes they hold.
func (d *YOLODataset) parseLabels(i int, name string, data []byte) (n int64) {
	ins, err := annot.ParseYOLOLabels(name, data, d.cfg)
	if err != nil {
		d.errs[i] = &annotationError{err}
		return 0
	}
	d.labels[i] = ins
	for _, in := range ins {
		n += 48 + 4*int64(len(in.Polygon)+len(in.Keypoints))
	}
	return n
}

// Layout implements the format name servers report.
func (d *YOLODataset) Layout() string { return "yolo" }

// Label implements Dataset: -1, the targets are the labels.
func (d *YOLODataset) Label(i int) int64 { return -1 }

// Fingerprint implements Dataset.
func (d *YOLODataset) Fingerprint() string { return d.fp }

// AnnotationBytes is about what the parsed labels hold in memory.
func (d *YOLODataset) AnnotationBytes() int64 { return d.bytes + int64(len(d.labels))*32 }

// Config is what the dataset YAML says.
func (d *YOLODataset) Config() *annot.YOLOConfig { return d.cfg }

// Labels are sample i's instances, or its label file's error.
func (d *YOLODataset) Labels(i int) ([]annot.YOLOInstance, error) { return d.labels[i], d.errs[i] }

func (d *YOLODataset) json(i int) ([]byte, error) {
	if d.errs[i] != nil {
		return nil, d.errs[i]
	}
	type lab struct {
		Class     int        `json:"class"`
		Box       [4]float32 `json:"box"`
		Polygon   []float32  `json:"polygon,omitempty"`
		Keypoints []float32  `json:"keypoints,omitempty"`
	}
	out := struct {
		FileName string `json:"file_name"`
		Labels   []lab  `json:"labels"`
	}{FileName: d.files[i], Labels: make([]lab, len(d.labels[i]))}
	for j, in := range d.labels[i] {
		out.Labels[j] = lab{in.Class, in.Box, in.Polygon, in.Keypoints}
	}
	return json.Marshal(out)
}

// FieldID implements Fielded: "yolo", and the ImageFolder's.
func (d *YOLODataset) FieldID(name string) (int, bool) {
	if name == FieldYOLO {
		return fieldIDYOLO, true
	}
	return d.ImageFolder.FieldID(name)
}

// FieldNames implements Fielded.
func (d *YOLODataset) FieldNames() []string {
	return append([]string{FieldYOLO}, d.ImageFolder.FieldNames()...)
}

// FieldSize implements Fielded (0 for a sample whose labels are bad:
// reading them is its error).
func (d *YOLODataset) FieldSize(i, id int) int64 {
	if id == fieldIDYOLO {
		b, err := d.json(i)
		if err != nil {
			return 0
		}
		return int64(len(b))
	}
	return d.ImageFolder.FieldSize(i, id)
}

// ReadField implements Fielded: a bad label file is the sample's error
// (ErrCorrupt, naming the file, the line and the field).
func (d *YOLODataset) ReadField(i, id int, buf []byte) ([]byte, error) {
	if id == fieldIDYOLO {
		b, err := d.json(i)
		if err != nil {
			return nil, err
		}
		return append(buf[:0], b...), nil
	}
	return d.ImageFolder.ReadField(i, id, buf)
}

// isYOLOConfig says whether an --annotations file is a YOLO dataset YAML.
func isYOLOConfig(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}

// OpenAnnotated opens the images under dir with the annotations at
// path: a YOLO dataset YAML (.yaml, .yml) or a COCO annotations file.
func OpenAnnotated(dir, path string) (Dataset, error) {
	if isYOLOConfig(path) {
		return OpenYOLO(dir, path)
	}
	return OpenCOCO(dir, path)
}

// labelName names a label file in messages without the server's paths:
// from its last "labels" component on (labels/train/x.txt), else
// relative to dir.
func labelName(dir, lp string) string {
	lp = filepath.ToSlash(lp)
	if i := strings.LastIndex(lp, "/labels/"); i >= 0 {
		return lp[i+1:]
	}
	rel, err := filepath.Rel(dir, filepath.FromSlash(lp))
	if err != nil {
		return filepath.Base(lp)
	}
	return filepath.ToSlash(rel)
}

// SourceTargets implements Targeted: each label's box (normalized cx, cy,
// w, h) in pixels of the w x h image (yoloToXYXY), its class the label;
// the image id is the sample's index. YOLO has no crowds.
func (d *YOLODataset) SourceTargets(i, w, h int, t *Instances) error {
	return d.sourceTargets(i, w, h, t, yoloToXYXY, false)
}

// UltralyticsTargets is SourceTargets with ultralytics' arithmetic for
// the boxes (Instances' convert_bbox("xyxy") then denormalize: cx -+ w/2
// in float32, then times the w x h image's sides), for the YOLO family's
// ops, which hand it the loaded image's size: its labels' very bits. A
// segment line's polygon comes too, as ultralytics' Instances holds it
// (yoloSegments).
func (d *YOLODataset) UltralyticsTargets(i, w, h int, t *Instances) error {
	return d.sourceTargets(i, w, h, t, ultralyticsXYXY, true)
}

// yoloSegments sets t's segments from the image's labels ls (segment
// lines: each has its polygon) as ultralytics' YOLODataset.update_labels_info
// and denormalize make them: the normalized polygons resampled to one
// length (det.SegmentPoints of the longest), then x times w and y times h
// in float32.
func yoloSegments(ls []annot.YOLOInstance, w, h int, t *Instances) {
	longest := 0
	for k := range ls {
		if ls[k].Polygon == nil {
			return // box lines: no segments (ParseYOLOLabels gives all or none)
		}
		longest = max(longest, len(ls[k].Polygon)/2)
	}
	n := det.SegmentPoints(longest)
	fw, fh := float32(w), float32(h)
	for k := range ls {
		poly := ls[k].Polygon
		s := make([][2]float32, len(poly)/2)
		for j := range s {
			s[j] = [2]float32{poly[2*j], poly[2*j+1]}
		}
		s = det.ResampleSegment(s, n) // s itself when it has n points: a copy still
		for j := range s {
			s[j] = [2]float32{s[j][0] * fw, s[j][1] * fh}
		}
		t.Segments = append(t.Segments, s)
	}
}

// ultralyticsXYXY is a normalized cx, cy, w, h box as ultralytics makes it
// XYXY in pixels of a w x h image.
func ultralyticsXYXY(b [4]float32, w, h int) [4]float32 {
	fw, fh := float32(w), float32(h)
	hw, hh := float32(b[2]/2), float32(b[3]/2) // the halves rounded: never fused into the sums
	return [4]float32{(b[0] - hw) * fw, (b[1] - hh) * fh, (b[0] + hw) * fw, (b[1] + hh) * fh}
}

func (d *YOLODataset) sourceTargets(i, w, h int, t *Instances, xyxy func([4]float32, int, int) [4]float32, segs bool) error {
	ls, err := d.Labels(i)
	if err != nil {
		return err // an annotationError already
	}
	t.ImageID = int64(i)
	t.P = d.cfg.KptShape[0]
	if segs {
		yoloSegments(ls, w, h, t)
	}
	for k := range ls {
		t.Add(xyxy(ls[k].Box, w, h), int64(ls[k].Class), false)
		if t.WantMasks {
			if err := t.addYOLOMask(ls[k].Polygon, w, h); err != nil {
				lp := annot.LabelPath(filepath.Join(d.dir, filepath.FromSlash(d.Name(i))))
				return &annotationError{&annot.SampleError{File: labelName(d.dir, lp), Annotation: fmt.Sprintf("instance %d", k), Field: "polygon", Err: err}}
			}
		}
		if t.P == 0 {
			continue
		}
		if err := t.addYOLOPoints(ls[k].Keypoints, w, h); err != nil {
			return &annotationError{&annot.SampleError{File: d.labelFile(i), Annotation: fmt.Sprintf("instance %d", k), Field: "keypoints", Err: err}}
		}
	}
	return nil
}

// labelFile names image i's label file in messages.
func (d *YOLODataset) labelFile(i int) string {
	if d.lnames != nil {
		return d.lnames[i]
	}
	return labelName(d.dir, annot.LabelPath(filepath.Join(d.dir, filepath.FromSlash(d.Name(i)))))
}

// Read implements Dataset: the image's bytes, from the directory or the
// store.
func (d *YOLODataset) Read(i int, buf []byte) ([]byte, error) {
	if d.imgs == nil {
		return d.ImageFolder.Read(i, buf)
	}
	if i < 0 || i >= d.Len() {
		return nil, fmt.Errorf("%w: sample index %d out of range [0, %d)", ErrUnsupported, i, d.Len())
	}
	return d.imgs.read(i, d.Name(i), d.maxSize, buf)
}

// Close implements Dataset.
func (d *YOLODataset) Close() error {
	if d.imgs != nil {
		return d.imgs.close()
	}
	return d.ImageFolder.Close()
}

// addYOLOMask appends a segment line's mask: its normalized polygon in
// pixels of the w x h image (x*W, y*H in float32, as ultralytics scales a
// segment), rasterized by pycocotools' polygon rasterizer (annot's, as
// for a COCO polygon; not ultralytics' cv2.fillPoly). A box line has no
// polygon: an error, masks need segments.
func (t *Instances) addYOLOMask(poly []float32, w, h int) error {
	if poly == nil {
		return fmt.Errorf("a box line has no mask: masks need a segment dataset (class x1 y1 x2 y2 ... a line)")
	}
	fw, fh := float32(w), float32(h)
	xy := make([]float64, len(poly))
	for j, v := range poly {
		f := fw
		if j%2 == 1 {
			f = fh
		}
		xy[j] = float64(float32(v * f))
	}
	r, err := annot.FromPolygon(xy, h, w)
	if err != nil {
		return err
	}
	t.addMask(r, true, h, w)
	return nil
}

// yoloToXYXY is a YOLO box (normalized cx, cy, w, h, float32) in pixels of
// a w x h image: each scaled in float32 (cx*W, cy*H, w*W, h*H), then
// torchvision's CXCYWH to XYXY (x1 = cx - w/2, x2 = x1 + w, in float32).
func yoloToXYXY(b [4]float32, w, h int) [4]float32 {
	fw, fh := float32(w), float32(h)
	// Each product converted: no multiply-add fused across them.
	cx, cy, bw, bh := float32(b[0]*fw), float32(b[1]*fh), float32(b[2]*fw), float32(b[3]*fh)
	x1, y1 := cx-float32(bw/2), cy-float32(bh/2) // bw/2 is bw*0.5: rounded, not fused
	return [4]float32{x1, y1, x1 + bw, y1 + bh}
}

// HasSegments says whether some image's label lines are polygons (a
// segment dataset's).
func (d *YOLODataset) HasSegments() bool {
	for _, ls := range d.labels {
		for k := range ls {
			if ls[k].Polygon != nil {
				return true
			}
		}
	}
	return false
}

// FileSize implements FileSizer: the indexed size of a directory's file
// (not known for a store's).
func (d *YOLODataset) FileSize(i int) (int64, bool) {
	if d.imgs != nil {
		return 0, false
	}
	return d.ImageFolder.FileSize(i)
}
