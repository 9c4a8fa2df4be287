package dataset

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

// FieldCOCO is a COCO dataset's sample's annotations, as JSON: {"image":
// {...}, "annotations": [...]} (annot.COCO.JSON), each annotation as the
// file gives it with "label", its category's contiguous label.
const FieldCOCO = "coco"

const fieldIDCOCO = 0

// COCODataset is a directory of images with a COCO annotations file
// (`stoker serve --dataset NAME=DIR --annotations NAME=FILE`): its samples
// are the file's images, sorted by id (torchvision's CocoDetection order),
// each read from DIR/file_name; each sample's annotations are its field
// "coco". Labels are -1 (the targets are the annotations); Classes are the
// categories' names by contiguous label. The fingerprint covers the
// annotations file's bytes and every image's name and size.
type COCODataset struct {
	root    *os.Root
	ann     *annot.COCO
	sizes   []int64
	maxSize int64
	fp      string
	classes []string
	// rel are the images' paths under root where a file_name is absolute
	// (nil when none is): what Read opens.
	rel []string
	// imgs reads the images from object storage (nil: from root).
	imgs *storeImages
	// annSum is the annotations file's hex SHA-256.
	annSum string
	// annName is the annotations file's base name, for messages.
	annName string
	// masks is what its annotations say of its instance masks' work.
	masks MaskStats
}

var (
	_ Dataset = (*COCODataset)(nil)
	_ Fielded = (*COCODataset)(nil)
)

// OpenCOCO opens the images under dir named by the COCO annotations file
// at annotations. A file that is not COCO is refused (annot.ErrNotCOCO,
// saying what was expected), as is an image the file names that is not
// under dir (the first few named): a file for another directory is a
// mistake to say at start, not sample by sample.
func OpenCOCO(dir, annotations string) (*COCODataset, error) { return openCOCO(dir, annotations, 0) }

// openCOCO is OpenCOCO with the parse within budget (0: none): the file
// is read as openLocalFile reads one, at most cocoFileBound(budget)
// bytes.
func openCOCO(dir, annotations string, budget int64) (*COCODataset, error) {
	max, over := cocoFileBound(budget)
	rc, err := openLocalFile(annotations, "annotations "+annotations, max, over)
	if err != nil {
		return nil, fmt.Errorf("annotations: %w", err)
	}
	defer rc.Close()
	c, sum, err := parseCOCO(filepath.Base(annotations), rc)
	if err != nil {
		return nil, err
	}
	return cocoInDir(dir, filepath.Base(annotations), c, sum)
}

// parseCOCO reads a COCO annotations file from r, and the SHA-256 of all
// its bytes.
func parseCOCO(name string, r io.Reader) (*annot.COCO, string, error) {
	h := sha256.New()
	er := &readErr{r: r}
	c, err := annot.ReadCOCO(name, io.TeeReader(bufio.NewReaderSize(er, 1<<20), h))
	if errors.Is(er.err, ErrTooLarge) {
		return nil, "", er.err // the bound of the file's reader (boundedFile): not a JSON error
	}
	if err != nil {
		// annot.ErrNotCOCO, or a file that breaks COCO's structure.
		return nil, "", fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	if _, err := io.Copy(h, r); err != nil { // what the parser did not need to read
		return nil, "", err
	}
	return c, hex.EncodeToString(h.Sum(nil)), nil
}

// readErr is r, keeping the error a read of it returned.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// newCOCODataset is the dataset of c, whose file annName's SHA-256 is sum, before
// its images are found: the hash its fingerprint is made of, to which
// each image's name and size is added, in the file's order.
func newCOCODataset(c *annot.COCO, annName, sum string) (*COCODataset, indexHash) {
	d := &COCODataset{ann: c, sizes: make([]int64, c.Len()), maxSize: DefaultMaxFileSize, annSum: sum, annName: annName}
	for _, ct := range c.Categories() {
		d.classes = append(d.classes, ct.Name)
	}
	d.masks = cocoMaskStats(c)
	ix := newIndexHash("coco", d.classes)
	ix.str(sum)
	return d, ix
}

// cocoInDir is the dataset of c with its images under the local directory
// dir.
func cocoInDir(dir, annName string, c *annot.COCO, sum string) (*COCODataset, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	d, ix := newCOCODataset(c, annName, sum)
	d.root = root
	if err := d.underRoot(dir); err != nil {
		root.Close()
		return nil, err
	}
	var missing []string
	for i := range c.Len() {
		name := c.Image(i).FileName
		st, err := root.Stat(d.file(i))
		if err != nil || !st.Mode().IsRegular() {
			missing = append(missing, name)
			continue
		}
		d.sizes[i] = st.Size()
		ix.add(name, st.Size(), -1)
	}
	if len(missing) > 0 {
		root.Close()
		return nil, errMissingImages(missing, c.Len(), annName, dir)
	}
	d.fp = ix.sum()
	return d, nil
}

// underRoot takes the absolute file_names (torchvision's CocoDetection
// opens os.path.join(root, file_name), which is the file_name itself when
// it is absolute) as their paths under dir; one outside dir is refused,
// saying why: the server reads only what is under a dataset's root.
func (d *COCODataset) underRoot(dir string) error {
	var bases []string
	for i := range d.ann.Len() {
		name := d.ann.Image(i).FileName
		if !filepath.IsAbs(name) {
			continue
		}
		if bases == nil {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			bases = append(bases, abs)
			if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
				bases = append(bases, real)
			}
			d.rel = make([]string, d.ann.Len())
		}
		for _, b := range bases {
			if r, err := filepath.Rel(b, filepath.Clean(name)); err == nil && filepath.IsLocal(r) {
				d.rel[i] = r
				break
			}
		}
		if d.rel[i] == "" {
			return fmt.Errorf("%w: %s: image %d's file_name %s is absolute and not under the dataset's directory %s: the server reads only the files under it (give file_names relative to it, or serve the directory that holds them)",
				ErrUnsupported, d.annName, d.ann.Image(i).ID, name, bases[0])
		}
	}
	return nil
}

// file is the path under root of image i: its file_name, or the path under
// root of an absolute one.
func (d *COCODataset) file(i int) string {
	if d.rel != nil && d.rel[i] != "" {
		return d.rel[i]
	}
	return d.ann.Image(i).FileName
}

// errMissingImages refuses an annotations file that names images that are
// not under dir, the first few named.
func errMissingImages(missing []string, n int, annName, dir string) error {
	nMissing, more := len(missing), ""
	if nMissing > 3 {
		missing, more = missing[:3], ", ..."
	}
	return fmt.Errorf("%w: %d of the %d images that %s names are not files under %s (%s%s): is it the annotations of another directory?",
		ErrUnsupported, nMissing, n, annName, dir, strings.Join(missing, ", "), more)
}

// ImageBound is the largest width and the largest height its annotations
// give its images: the most a sample's image is where the files are what
// the annotations say (a mask must be its image's size).
func (d *COCODataset) ImageBound() (w, h int) {
	for i := range d.ann.Len() {
		im := d.ann.Image(i)
		w, h = max(w, im.Width), max(h, im.Height)
	}
	return w, h
}

// Annotations is the parsed annotations file.
func (d *COCODataset) Annotations() *annot.COCO { return d.ann }

// AnnotationBytes is about what the parsed annotations hold in memory,
// for the memory budget.
func (d *COCODataset) AnnotationBytes() int64 { return d.ann.Bytes() }

// Layout implements the format name servers report.
func (d *COCODataset) Layout() string { return "coco" }

// SetMaxFileSize caps the image files Read reads.
func (d *COCODataset) SetMaxFileSize(n int64) { d.maxSize = n }

// Len implements Dataset.
func (d *COCODataset) Len() int { return d.ann.Len() }

// Label implements Dataset: -1, the targets are the annotations.
func (d *COCODataset) Label(i int) int64 { return -1 }

// Classes implements Dataset: the categories' names by contiguous label.
func (d *COCODataset) Classes() []string { return d.classes }

// LabelBound is one past the largest label its targets carry: the largest
// category id (the labels' default, torchvision's wrapper's), or with
// contiguous labels the categories' count.
func (d *COCODataset) LabelBound(contiguous bool) int64 {
	if contiguous {
		return int64(len(d.classes))
	}
	var most int64 = -1
	for _, c := range d.ann.Categories() {
		most = max(most, c.ID)
	}
	return most + 1
}

// Name implements Dataset.
func (d *COCODataset) Name(i int) string { return d.ann.Image(i).FileName }

// Fingerprint implements Dataset.
func (d *COCODataset) Fingerprint() string { return d.fp }

// Close implements Dataset.
func (d *COCODataset) Close() error {
	if d.imgs != nil {
		return d.imgs.close()
	}
	return d.root.Close()
}

// Read implements Dataset: the image's bytes, as an ImageFolder reads
// them.
func (d *COCODataset) Read(i int, buf []byte) ([]byte, error) {
	if i < 0 || i >= d.Len() {
		return nil, fmt.Errorf("%w: sample index %d out of range [0, %d)", ErrUnsupported, i, d.Len())
	}
	name := d.Name(i)
	if d.imgs != nil {
		return d.imgs.read(i, name, d.maxSize, buf)
	}
	return readIndexed(d.root, d.file(i), name, d.sizes[i], d.maxSize, buf)
}

// readIndexed reads the image at file under root (named name in
// messages), indexed at size bytes, through the cap max: without
// blocking, a regular file, the size it had when the dataset opened.
func readIndexed(root *os.Root, file, name string, size, max int64, buf []byte) ([]byte, error) {
	f, err := root.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(root, name, "dataset root", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, stripPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsupported, name)
	}
	if st.Size() != size {
		return nil, fmt.Errorf("%w: %s changed since the dataset was indexed: %d bytes, indexed at %d (reopen the dataset to take the change)", ErrCorrupt, name, st.Size(), size)
	}
	return readCapped(f, st.Size(), max, name, buf)
}

// FieldID implements Fielded: "coco", "path" (the file_name) and
// "__key__" (it without its extension).
func (d *COCODataset) FieldID(name string) (int, bool) {
	switch name {
	case FieldCOCO:
		return fieldIDCOCO, true
	case FieldPath:
		return fieldIDPath, true
	case FieldKey:
		return fieldIDKey, true
	}
	return 0, false
}

// FieldNames implements Fielded.
func (d *COCODataset) FieldNames() []string {
	return []string{FieldCOCO, FieldPath, FieldKey, FieldSource}
}

// FieldSize implements Fielded. A sample whose annotations are malformed
// has a "coco" of size 0, and reading it is the sample's error.
func (d *COCODataset) FieldSize(i, id int) int64 {
	switch id {
	case fieldIDCOCO:
		b, err := d.ann.JSON(i)
		if err != nil {
			return 0
		}
		return int64(len(b))
	case fieldIDPath:
		return int64(len(d.Name(i)))
	case fieldIDKey:
		return int64(len(keyOfPath(d.Name(i))))
	}
	return -1
}

// ReadField implements Fielded. A malformed annotation of the sample is
// its error (ErrCorrupt, naming the file, the annotation and the field).
func (d *COCODataset) ReadField(i, id int, buf []byte) ([]byte, error) {
	switch id {
	case fieldIDCOCO:
		b, err := d.ann.JSON(i)
		if err != nil {
			return nil, &annotationError{err}
		}
		return append(buf[:0], b...), nil
	case fieldIDPath:
		return append(buf[:0], d.Name(i)...), nil
	case fieldIDKey:
		return append(buf[:0], keyOfPath(d.Name(i))...), nil
	}
	return nil, fmt.Errorf("%w: sample %s has no such field", ErrUnsupported, d.Name(i))
}

// annotationError is a sample's malformed annotation: bad input of that
// sample (ErrCorrupt), in the words of annot.SampleError.
type annotationError struct{ err error }

func (e *annotationError) Error() string        { return e.err.Error() }
func (e *annotationError) Unwrap() error        { return e.err }
func (e *annotationError) Is(target error) bool { return target == ErrCorrupt }

// SourceTargets implements Targeted: the image's annotations, bbox XYWH
// to XYXY as torchvision's CocoDetection wrapper converts it (float32),
// crowds kept; the image id is COCO's.
func (d *COCODataset) SourceTargets(i, w, h int, t *Instances) error {
	s, err := d.ann.Sample(i)
	if err != nil {
		return &annotationError{err}
	}
	t.ImageID = s.Image.ID
	t.P = d.ann.Keypoints()
	if t.WantMasks && (s.Image.Width != w || s.Image.Height != h) {
		return &annotationError{&annot.SampleError{File: d.annName, Annotation: fmt.Sprintf("image %d %q", s.Image.ID, s.Image.FileName), Field: "segmentation",
			Err: fmt.Errorf("the file says %dx%d and the image is %dx%d: its masks would be of another size", s.Image.Width, s.Image.Height, w, h)}}
	}
	for k := range s.Instances {
		in := &s.Instances[k]
		label := in.CategoryID // torchvision's wrapper's: the file's id
		if t.ContiguousLabels {
			label = int64(in.Label)
		}
		t.Add(xywhToXYXY(in.BBox), label, in.IsCrowd)
		t.addCOCOPoints(in.Keypoints)
		if t.WantMasks {
			r, ok, err := d.ann.Mask(&s, in)
			if err != nil {
				return &annotationError{err}
			}
			t.addMask(r, ok, h, w)
		}
	}
	return nil
}

// xywhToXYXY is torchvision's XYWH to XYXY of a box made from Python
// floats (torch.tensor: float32): x2 = x1 + w in float32.
func xywhToXYXY(b [4]float64) [4]float32 {
	x, y := float32(b[0]), float32(b[1])
	return [4]float32{x, y, x + float32(b[2]), y + float32(b[3])}
}

// FileSize implements FileSizer: the indexed size of a directory's file
// (not known for a store's).
func (d *COCODataset) FileSize(i int) (int64, bool) {
	if d.imgs != nil || i < 0 || i >= len(d.sizes) {
		return 0, false
	}
	return capped(d.sizes[i], d.maxSize), true
}

// MaskStats is what a dataset's annotations say, before any sample is
// made, of the work of its images' instance masks, which is each
// instance's extent (the bounding box of its set pixels in its image:
// pipeline/targets' AppendMasks) and the canvas' rows and columns, not
// the canvas: over the images, the mean and the most of the instances an
// image has, of their extents' pixels summed, and of that sum over the
// image's pixels (its cover: the share of the output each instance's
// runs reach, summed). The extents are the annotations' boxes, clamped
// to the image (at least a pixel each): a box that lies smaller than its
// polygon is caught where the masks are made, by their bound
// (targets.MaxInstancePixels) and by the job's measured CPU. Known is
// false where the dataset cannot say (its annotations are read sample by
// sample): the cost model prices a nominal image then.
type MaskStats struct {
	Known                       bool
	MeanInstances, MaxInstances float64
	MeanExtent, MaxExtent       float64
	MeanCover, MaxCover         float64
	// Worst is the image of the largest extent (its file name) and its
	// instances, for a refusal's message.
	Worst          string
	WorstInstances int
}

// MaskStatser is a dataset whose annotations say what its masks' work
// is (MaskStats): COCO's.
type MaskStatser interface{ MaskStats() MaskStats }

// MaskStats implements MaskStatser.
func (d *COCODataset) MaskStats() MaskStats { return d.masks }

// cocoMaskStats is c's images' MaskStats, from their annotations'
// boxes; a sample whose annotations are malformed is left out (it fails
// as a sample).
func cocoMaskStats(c *annot.COCO) MaskStats {
	var m MaskStats
	n := 0
	for i := range c.Len() {
		s, err := c.Sample(i)
		if err != nil {
			continue
		}
		w, h := float64(s.Image.Width), float64(s.Image.Height)
		ext := 0.0
		for _, in := range s.Instances {
			b := in.BBox
			x0, y0 := min(max(b[0], 0), w), min(max(b[1], 0), h)
			x1, y1 := min(max(b[0]+b[2], 0), w), min(max(b[1]+b[3], 0), h)
			ext += max(float64((x1-x0)*(y1-y0)), 1)
		}
		k := float64(len(s.Instances))
		cover := 0.0
		if w*h > 0 {
			cover = ext / (w * h)
		}
		n++
		m.MeanInstances += k
		m.MeanExtent += ext
		m.MeanCover += cover
		m.MaxInstances = max(m.MaxInstances, k)
		m.MaxCover = max(m.MaxCover, cover)
		if ext > m.MaxExtent {
			m.MaxExtent, m.Worst, m.WorstInstances = ext, s.Image.FileName, len(s.Instances)
		}
	}
	if n > 0 {
		m.Known = true
		m.MeanInstances /= float64(n)
		m.MeanExtent /= float64(n)
		m.MeanCover /= float64(n)
	}
	return m
}
