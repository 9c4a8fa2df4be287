// Package annot reads the annotations of detection, segmentation and pose
// datasets: COCO's JSON (boxes, categories, crowds, polygons and
// run-length masks, keypoints) and the YOLO layout as ultralytics reads it
// (a label file beside each image, names in the dataset's YAML). Masks
// are rasterized exactly as pycocotools does (rle.go).
//
// What is malformed in one annotation (a box that is not 4 finite numbers,
// a polygon of fewer than 3 points, an unknown category, keypoints of the
// wrong length, a run-length mask of another size) is an error of that
// sample alone, naming the file and the field; a file that is not COCO
// at all is refused when it is opened. What a sample may hold is bounded
// (MaxInstances, MaxPolygonVertices, MaxRLECounts, MaxMaskPixels), and
// Bytes says what the parsed annotations hold in memory.
package annot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
)

// MaxInstances bounds the instances of one image (COCO has at most 93,
// LVIS about 700): an image with more is a per-sample error.
const MaxInstances = 4096

// MaxKeypoints bounds the keypoints of a category or an annotation
// (COCO's person has 17, COCO-WholeBody's 133; ultralytics' kpt_shape
// is bounded the same): a category with more refuses the file, an
// annotation with more fails its sample.
const MaxKeypoints = 1024

// MaxAnnotationsFile bounds an annotations file's size (COCO's
// instances_train2017.json is 448 MB).
const MaxAnnotationsFile = 4 << 30

// ErrNotCOCO is what Open returns (wrapped, saying what was expected) for
// a file that is not a COCO annotations file.
var ErrNotCOCO = errors.New("not a COCO annotations file")

// Image is an entry of COCO's "images".
type Image struct {
	ID       int64  `json:"id"`
	FileName string `json:"file_name"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
}

// Category is an entry of COCO's "categories"; Label is its contiguous
// label: its rank among the categories sorted by id, from 0.
type Category struct {
	ID            int64    `json:"id"`
	Name          string   `json:"name"`
	Supercategory string   `json:"supercategory,omitempty"`
	Keypoints     []string `json:"keypoints,omitempty"`
	Skeleton      [][]int  `json:"skeleton,omitempty"`
	Label         int      `json:"-"`
}

// Instance is one annotation of an image.
type Instance struct {
	ID         int64
	CategoryID int64 // as the file gives it
	Label      int   // contiguous: the category's Label
	// BBox is [x, y, width, height] in pixels, as COCO gives it; a
	// negative width or height is kept, as torchvision's CocoDetection
	// wrapper keeps it (x2 = x + w < x: a SanitizeBoundingBoxes drops it).
	BBox    [4]float64
	Area    float64
	IsCrowd bool
	// Segmentation is the annotation's "segmentation" as the file gives
	// it (polygons, or a run-length mask with counts as a list or a
	// string), checked when the file was read; nil when it has none.
	Segmentation json.RawMessage
	// Keypoints are (x, y, visibility) triplets; nil when it has none.
	Keypoints    []float64
	NumKeypoints int
}

// Sample is an image and its instances, in the order of the file.
type Sample struct {
	Image     Image
	Instances []Instance
}

// COCO is a parsed annotations file. Samples are the images sorted by id
// (torchvision's CocoDetection order). Safe for concurrent reads.
type COCO struct {
	name       string // the file's base name, for messages
	images     []Image
	byID       map[int64]int
	byFile     map[string]int
	categories []Category
	catByID    map[int64]int
	insts      [][]Instance
	errs       []error // per image: the first malformed annotation
	bytes      int64
	annots     int
	keypoints  int // the most keypoints of a category or an annotation
}

// SampleError is a malformed annotation: the error of one sample, naming
// the file, the annotation and the field.
type SampleError struct {
	File       string // the annotations file (its base name) or label file
	Annotation string // which annotation: "annotation 123", "line 4"
	Field      string // which field: "bbox", "segmentation", ...
	Err        error
}

func (e *SampleError) Error() string {
	return fmt.Sprintf("%s: %s: field %s: %v", e.File, e.Annotation, e.Field, e.Err)
}

func (e *SampleError) Unwrap() error { return e.Err }

// OpenCOCO reads the annotations file at path (see ReadCOCO).
// A file that is not regular (a FIFO, a device) or is over
// MaxAnnotationsFile is refused before it is read, and at most that many
// bytes are read.
func OpenCOCO(path string) (*COCO, error) {
	f, err := openRegular(path, MaxAnnotationsFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadCOCO(filepath.Base(path), &limited{f, MaxAnnotationsFile + 1})
}

// ReadCOCO reads a COCO annotations file from r, streaming: each entry
// of "images", "annotations" and "categories" is decoded alone, and what
// is kept of it is compact (an annotation's segmentation as its JSON
// bytes). name is the file's name, for messages. Anything that is not a
// JSON object with "images", "annotations" and "categories" arrays is
// refused (ErrNotCOCO), as are duplicate image or category ids and an
// annotation of an image the file does not list; a malformed annotation
// makes its image's sample an error (Sample).
func ReadCOCO(name string, r io.Reader) (*COCO, error) {
	c := &COCO{name: name, byID: map[int64]int{}, byFile: map[string]int{}, catByID: map[int64]int{}}
	dec := json.NewDecoder(bufio.NewReaderSize(&nanReader{r: r}, 1<<16))
	dec.UseNumber()
	notCOCO := func(why string, args ...any) error {
		return fmt.Errorf("%w: %s: %s; want a JSON object with \"images\" (id, file_name, width, height), \"annotations\" (id, image_id, category_id, bbox, ...) and \"categories\" (id, name) arrays, as COCO's instances_*.json or person_keypoints_*.json",
			ErrNotCOCO, name, fmt.Sprintf(why, args...))
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, notCOCO("not JSON (%v)", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, notCOCO("the top level is %v, not an object", describe(tok))
	}
	type rawAnn struct {
		ID           json.Number     `json:"id"`
		ImageID      json.Number     `json:"image_id"`
		CategoryID   json.Number     `json:"category_id"`
		BBox         json.RawMessage `json:"bbox"`
		Area         json.RawMessage `json:"area"`
		IsCrowd      json.RawMessage `json:"iscrowd"`
		Segmentation json.RawMessage `json:"segmentation"`
		Keypoints    json.RawMessage `json:"keypoints"`
		NumKeypoints json.RawMessage `json:"num_keypoints"`
	}
	// Each annotation is kept as its JSON bytes alone (one allocation)
	// until the categories, which COCO writes after the annotations, are
	// known; decoded into its fields then, its bytes let go as its
	// instance is made: the file is held about once (a field each took 2x
	// the file's memory at the parse's peak, for small annotations).
	var anns []json.RawMessage
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notCOCO("bad JSON at byte %d (%v)", dec.InputOffset(), err)
		}
		key, _ := tok.(string)
		seen[key] = true
		switch key {
		case "images", "annotations", "categories":
			if err := arrayStart(dec); err != nil {
				return nil, notCOCO("%q is not an array (%v)", key, err)
			}
			for n := 0; dec.More(); n++ {
				switch key {
				case "images":
					var im Image
					if err := dec.Decode(&im); err != nil {
						return nil, notCOCO("images[%d]: %v", n, err)
					}
					if _, dup := c.byID[im.ID]; dup {
						return nil, fmt.Errorf("%s: images[%d]: duplicate image id %d", name, n, im.ID)
					}
					// Each side bounded before the product, which could wrap.
					if im.Width < 1 || im.Height < 1 || im.Width > MaxMaskPixels || im.Height > MaxMaskPixels || im.Width*im.Height > MaxMaskPixels {
						return nil, fmt.Errorf("%s: images[%d] (id %d, %q): size %dx%d: want width and height at least 1, width*height at most %d", name, n, im.ID, im.FileName, im.Width, im.Height, MaxMaskPixels)
					}
					if im.FileName == "" {
						return nil, fmt.Errorf("%s: images[%d] (id %d): no file_name", name, n, im.ID)
					}
					c.byID[im.ID] = len(c.images)
					c.images = append(c.images, im)
				case "categories":
					var ct Category
					if err := dec.Decode(&ct); err != nil {
						return nil, notCOCO("categories[%d]: %v", n, err)
					}
					if _, dup := c.catByID[ct.ID]; dup {
						return nil, fmt.Errorf("%s: categories[%d]: duplicate category id %d", name, n, ct.ID)
					}
					if len(ct.Keypoints) > MaxKeypoints {
						return nil, fmt.Errorf("%s: categories[%d] (id %d): %d keypoints, more than the %d allowed", name, n, ct.ID, len(ct.Keypoints), MaxKeypoints)
					}
					c.keypoints = max(c.keypoints, len(ct.Keypoints))
					c.catByID[ct.ID] = len(c.categories)
					c.categories = append(c.categories, ct)
				case "annotations":
					var a json.RawMessage
					if err := dec.Decode(&a); err != nil {
						return nil, notCOCO("annotations[%d]: %v", n, err)
					}
					anns = append(anns, a)
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, notCOCO("bad JSON at byte %d (%v)", dec.InputOffset(), err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, notCOCO("bad JSON at byte %d (%v)", dec.InputOffset(), err)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, notCOCO("bad JSON at byte %d (%v)", dec.InputOffset(), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notCOCO("more after the top-level object (at byte %d)", dec.InputOffset())
	}
	for _, k := range []string{"images", "annotations", "categories"} {
		if !seen[k] {
			return nil, notCOCO("no %q", k)
		}
	}
	// Images by id; categories by id, their rank the contiguous label.
	order := make([]int, len(c.images))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return c.images[order[a]].ID < c.images[order[b]].ID })
	imgs := make([]Image, len(c.images))
	for i, o := range order {
		imgs[i] = c.images[o]
		c.byID[imgs[i].ID] = i
	}
	c.images = imgs
	for i, im := range c.images {
		if _, dup := c.byFile[im.FileName]; dup {
			return nil, fmt.Errorf("%s: image id %d: file_name %q is also another image's", name, im.ID, im.FileName)
		}
		c.byFile[im.FileName] = i
	}
	slices.SortFunc(c.categories, func(a, b Category) int {
		if a.ID < b.ID {
			return -1
		} else if a.ID > b.ID {
			return 1
		}
		return 0
	})
	for i := range c.categories {
		c.categories[i].Label = i
		c.catByID[c.categories[i].ID] = i
	}
	c.insts = make([][]Instance, len(c.images))
	c.errs = make([]error, len(c.images))
	for n := range anns {
		var a rawAnn // its fields are json.Number and json.RawMessage: no float64 conversion
		err := json.Unmarshal(anns[n], &a)
		anns[n] = nil // its bytes go as its instance is made
		if err != nil {
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) {
				return nil, notCOCO("annotations[%d]: %v", n, err)
			}
			// A field of the wrong type (id, image_id, category_id): the
			// annotation cannot be placed.
			return nil, fmt.Errorf("%s: annotations[%d]: field %s: %v", name, n, te.Field, err)
		}
		imID, err := a.ImageID.Int64()
		if err != nil {
			// The annotation cannot be placed: the file is refused.
			return nil, fmt.Errorf("%s: annotations[%d]: field image_id: %q: want an integer within int64", name, n, a.ImageID)
		}
		i, ok := c.byID[imID]
		if !ok {
			return nil, fmt.Errorf("%s: annotation %s (annotations[%d]): image_id %d is not among the file's images", name, a.ID, n, imID)
		}
		c.annots++
		if c.errs[i] != nil {
			continue
		}
		id, err := a.ID.Int64()
		if err != nil {
			// Its image's error: an id past int64 is never delivered as another.
			c.errs[i] = &SampleError{File: name, Annotation: fmt.Sprintf("annotations[%d] (image %d %q)", n, imID, c.images[i].FileName), Field: "id",
				Err: fmt.Errorf("%q: want an integer within int64", a.ID)}
			c.insts[i] = nil
			continue
		}
		if len(c.insts[i]) >= MaxInstances {
			c.errs[i] = &SampleError{File: name, Annotation: fmt.Sprintf("annotation %d", id), Field: "image_id",
				Err: fmt.Errorf("image %d has more than %d instances", imID, MaxInstances)}
			c.insts[i] = nil
			continue
		}
		inst, serr := c.instance(id, c.images[i], a.CategoryID, a.BBox, a.Area, a.IsCrowd, a.Segmentation, a.Keypoints, a.NumKeypoints)
		if serr != nil {
			c.errs[i] = serr
			c.insts[i] = nil
			continue
		}
		c.insts[i] = append(c.insts[i], inst)
		c.keypoints = max(c.keypoints, len(inst.Keypoints)/3)
	}
	c.bytes = int64(len(c.images))*64 + int64(len(c.categories))*96
	for i, im := range c.images {
		c.bytes += int64(len(im.FileName)) + 16
		for _, in := range c.insts[i] {
			c.bytes += instanceBytes(&in)
		}
	}
	return c, nil
}

func instanceBytes(in *Instance) int64 {
	return 128 + int64(len(in.Segmentation)) + 8*int64(len(in.Keypoints))
}

// finite32 says whether v is finite as a float32.
func finite32(v float64) bool { return !math.IsInf(float64(float32(v)), 0) && !math.IsNaN(v) }

// instance checks and converts one annotation of image im.
func (c *COCO) instance(id int64, im Image, catID json.Number, bbox, area, crowd, segm, kps, nkps json.RawMessage) (Instance, error) {
	bad := func(field string, format string, args ...any) error {
		return &SampleError{File: c.name, Annotation: fmt.Sprintf("annotation %d (image %d %q)", id, im.ID, im.FileName), Field: field, Err: fmt.Errorf(format, args...)}
	}
	in := Instance{ID: id}
	cat, err := catID.Int64()
	if err != nil {
		return in, bad("category_id", "%q is not an integer within int64", catID)
	}
	ci, ok := c.catByID[cat]
	if !ok {
		return in, bad("category_id", "%d is not among the file's categories", cat)
	}
	in.CategoryID, in.Label = cat, c.categories[ci].Label
	var b []float64
	if err := decodeNumbers(bbox, &b); err != nil || len(b) != 4 {
		return in, bad("bbox", "%s: want [x, y, width, height], 4 finite numbers", short(bbox))
	}
	// Targets are float32 (x2 = x + w in float32, as torchvision's
	// wrapper): a box finite in float64 but not there is refused, never
	// delivered as inf.
	if !finite32(b[0]) || !finite32(b[1]) || !finite32(b[2]) || !finite32(b[3]) ||
		!finite32(float64(float32(b[0])+float32(b[2]))) || !finite32(float64(float32(b[1])+float32(b[3]))) {
		return in, bad("bbox", "%s: past float32's range (the targets' boxes are float32)", short(bbox))
	}
	copy(in.BBox[:], b)
	if len(area) > 0 && string(area) != "null" {
		var a []float64
		if err := decodeNumbers(append(append([]byte("["), area...), ']'), &a); err != nil || len(a) != 1 || a[0] < 0 {
			return in, bad("area", "%s: want a finite number, at least 0", short(area))
		}
		in.Area = a[0]
	}
	if len(crowd) > 0 && string(crowd) != "null" {
		switch string(bytes.TrimSpace(crowd)) {
		case "0", "false":
		case "1", "true":
			in.IsCrowd = true
		default:
			return in, bad("iscrowd", "%s: want 0 or 1", short(crowd))
		}
	}
	if len(segm) > 0 && string(segm) != "null" && string(segm) != "[]" {
		if _, err := parseSegmentation(segm, im.Height, im.Width); err != nil {
			return in, bad("segmentation", "%v", err)
		}
		in.Segmentation = compactJSON(segm)
	}
	if len(kps) > 0 && string(kps) != "null" {
		var k []float64
		if err := decodeNumbers(kps, &k); err != nil {
			return in, bad("keypoints", "%s: want a list of finite numbers", short(kps))
		}
		want := len(c.categories[ci].Keypoints)
		if len(k) > 3*MaxKeypoints {
			return in, bad("keypoints", "%d numbers: more than the %d keypoints allowed", len(k), MaxKeypoints)
		}
		if len(k)%3 != 0 || (want > 0 && len(k) != 3*want) {
			if want > 0 {
				return in, bad("keypoints", "%d numbers: category %d has %d keypoints, want %d (x, y, v for each)", len(k), cat, want, 3*want)
			}
			return in, bad("keypoints", "%d numbers: want (x, y, v) triplets", len(k))
		}
		for j := 2; j < len(k); j += 3 {
			if v := k[j]; v != 0 && v != 1 && v != 2 {
				return in, bad("keypoints", "keypoint %d has visibility %v: want 0, 1 or 2", j/3, v)
			}
			if !finite32(k[j-2]) || !finite32(k[j-1]) {
				return in, bad("keypoints", "keypoint %d is (%v, %v): past float32's range (the targets' points are float32)", j/3, k[j-2], k[j-1])
			}
		}
		in.Keypoints = k
	}
	if len(nkps) > 0 && string(nkps) != "null" {
		n, err := strconv.Atoi(string(bytes.TrimSpace(nkps)))
		if err != nil || n < 0 {
			return in, bad("num_keypoints", "%s: want an integer, at least 0", short(nkps))
		}
		in.NumKeypoints = n
	}
	return in, nil
}

// parseSegmentation reads a segmentation (polygons, or a run-length mask
// with counts as a list or string) of an h x w image into its mask's
// parts: the polygons' masks or the one run-length mask.
func parseSegmentation(segm json.RawMessage, h, w int) ([]RLE, error) {
	s := bytes.TrimSpace(segm)
	if len(s) == 0 {
		return nil, nil
	}
	switch s[0] {
	case '[':
		var polys [][]float64
		if err := decodeNumbers(s, &polys); err != nil {
			return nil, fmt.Errorf("%s: want a list of polygons, each a list of finite numbers x0, y0, x1, y1, ...", short(s))
		}
		out := make([]RLE, 0, len(polys))
		for i, p := range polys {
			if len(p) < 6 || len(p)%2 != 0 {
				return nil, fmt.Errorf("polygon %d has %d coordinates: want an even count, at least 6 (3 points)", i, len(p))
			}
			if len(p)/2 > MaxPolygonVertices {
				return nil, fmt.Errorf("polygon %d has %d points, more than the %d allowed", i, len(p)/2, MaxPolygonVertices)
			}
			for j, v := range p {
				if math.Abs(v) > MaxCoordinate {
					return nil, fmt.Errorf("polygon %d coordinate %d is %v: want a magnitude at most %d", i, j, v, MaxCoordinate)
				}
			}
			out = append(out, RLE{}) // rasterized on demand (Mask)
		}
		return out, nil
	case '{':
		var m struct {
			Counts json.RawMessage `json:"counts"`
			Size   []int           `json:"size"`
		}
		if err := json.Unmarshal(s, &m); err != nil || len(m.Size) != 2 || len(m.Counts) == 0 {
			return nil, fmt.Errorf("%s: want a run-length mask {\"size\": [h, w], \"counts\": [...] or \"...\"}", short(s))
		}
		if m.Size[0] != h || m.Size[1] != w {
			return nil, fmt.Errorf("run-length mask of size %dx%d on an image of %dx%d", m.Size[0], m.Size[1], h, w)
		}
		var r RLE
		if m.Counts[0] == '"' {
			var str string
			if err := json.Unmarshal(m.Counts, &str); err != nil {
				return nil, fmt.Errorf("counts: %v", err)
			}
			var err error
			if r, err = FromString(str, h, w); err != nil {
				return nil, fmt.Errorf("counts: %v", err)
			}
		} else {
			var cnts []int64
			if err := json.Unmarshal(m.Counts, &cnts); err != nil {
				return nil, fmt.Errorf("counts: %s: want a list of run lengths or a compressed string", short(m.Counts))
			}
			if len(cnts) > MaxRLECounts {
				return nil, fmt.Errorf("counts: %d runs, more than the %d allowed", len(cnts), MaxRLECounts)
			}
			r = RLE{H: h, W: w, Counts: make([]uint32, len(cnts))}
			for i, v := range cnts {
				if v < 0 || v > math.MaxUint32 {
					return nil, fmt.Errorf("counts: run %d is %d", i, v)
				}
				r.Counts[i] = uint32(v)
			}
			if err := r.check(); err != nil {
				return nil, fmt.Errorf("counts: %v", err)
			}
		}
		return []RLE{r}, nil
	}
	return nil, fmt.Errorf("%s: want a list of polygons or a run-length mask", short(s))
}

// Mask is the instance's mask as one run-length mask of its image's size,
// as pycocotools' annToRLE: the union of its polygons, or its run-length
// mask (from a counts list or string). ok is false when it has no
// segmentation.
func (c *COCO) Mask(s *Sample, in *Instance) (RLE, bool, error) {
	r, ok, err := SegmentationMask(in.Segmentation, s.Image.Height, s.Image.Width)
	if err != nil {
		return RLE{}, false, &SampleError{File: c.name, Annotation: fmt.Sprintf("annotation %d (image %d %q)", in.ID, s.Image.ID, s.Image.FileName), Field: "segmentation", Err: err}
	}
	return r, ok, nil
}

// Len is the number of images (samples).
func (c *COCO) Len() int { return len(c.images) }

// Annotations is the number of annotations the file holds.
func (c *COCO) Annotations() int { return c.annots }

// Keypoints is the most keypoints of a category (its named keypoints) or
// of a well-formed annotation: the points each instance of the dataset's
// targets carries (P); 0 for a file without keypoints.
func (c *COCO) Keypoints() int { return c.keypoints }

// Categories are the categories sorted by id; Categories()[l] has label l.
func (c *COCO) Categories() []Category { return c.categories }

// Label is the contiguous label of category id.
func (c *COCO) Label(categoryID int64) (int, bool) {
	i, ok := c.catByID[categoryID]
	return i, ok
}

// Image is sample i's image (sorted by id).
func (c *COCO) Image(i int) Image { return c.images[i] }

// Index is the sample of the image with this id.
func (c *COCO) Index(imageID int64) (int, bool) {
	i, ok := c.byID[imageID]
	return i, ok
}

// IndexOfFile is the sample of the image with this file_name.
func (c *COCO) IndexOfFile(name string) (int, bool) {
	i, ok := c.byFile[name]
	return i, ok
}

// Sample is sample i: its image and instances, or the error of its first
// malformed annotation (a *SampleError).
func (c *COCO) Sample(i int) (Sample, error) {
	if c.errs[i] != nil {
		return Sample{Image: c.images[i]}, c.errs[i]
	}
	return Sample{Image: c.images[i], Instances: c.insts[i]}, nil
}

// Bytes is about what the parsed annotations hold in memory.
func (c *COCO) Bytes() int64 { return c.bytes }

// SampleBytes is about what sample i's instances hold.
func (c *COCO) SampleBytes(i int) int64 {
	var n int64
	for _, in := range c.insts[i] {
		n += instanceBytes(&in)
	}
	return n
}

// JSON is sample i as COCO JSON: {"image": {...}, "annotations": [...]},
// each annotation as the file gave it (less fields this package does not
// read), with "label" the contiguous label.
func (c *COCO) JSON(i int) ([]byte, error) {
	s, err := c.Sample(i)
	if err != nil {
		return nil, err
	}
	type ann struct {
		ID           int64           `json:"id"`
		ImageID      int64           `json:"image_id"`
		CategoryID   int64           `json:"category_id"`
		Label        int             `json:"label"`
		BBox         [4]float64      `json:"bbox"`
		Area         float64         `json:"area"`
		IsCrowd      int             `json:"iscrowd"`
		Segmentation json.RawMessage `json:"segmentation,omitempty"`
		Keypoints    []float64       `json:"keypoints,omitempty"`
		NumKeypoints *int            `json:"num_keypoints,omitempty"`
	}
	out := struct {
		Image       Image `json:"image"`
		Annotations []ann `json:"annotations"`
	}{Image: s.Image, Annotations: make([]ann, len(s.Instances))}
	for j, in := range s.Instances {
		a := ann{ID: in.ID, ImageID: s.Image.ID, CategoryID: in.CategoryID, Label: in.Label, BBox: in.BBox, Area: in.Area, Segmentation: in.Segmentation, Keypoints: in.Keypoints}
		if in.IsCrowd {
			a.IsCrowd = 1
		}
		if in.Keypoints != nil {
			n := in.NumKeypoints
			a.NumKeypoints = &n
		}
		out.Annotations[j] = a
	}
	return json.Marshal(out)
}

func arrayStart(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("found %s", describe(tok))
	}
	return nil
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return string(t)
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// decodeNumbers unmarshals numbers that must be finite: the nanReader
// turns NaN and the infinities into 1e999, which float64 refuses.
func decodeNumbers(b []byte, v any) error { return json.Unmarshal(b, v) }

// compactJSON is b without its spaces, in a slice of its own length (b
// itself when it has none).
func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil || buf.Len() == len(b) {
		return b
	}
	return bytes.Clone(buf.Bytes())
}

// short is b for a message, cut to 80 bytes.
func short(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}
