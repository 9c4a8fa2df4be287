package dataset

// ConvDataset: a vision-language fine-tuning set as its repositories write
// it, a JSON file listing conversations and the images they name, in
// LLaVA's layout ([{"id": ..., "image": "coco/train2017/1.jpg",
// "conversations": [...]}, ...]) or LLaMA-Factory's ShareGPT layout
// ([{"messages": [...], "images": ["a.jpg"]}, ...]), the images under the
// dataset's directory (`stoker serve --dataset NAME=DIR --annotations
// NAME=FILE`).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// FieldJSON is a conversation dataset's sample's record, as the file
// gives it (its "conversations" or "messages", its "id", its images'
// names, and whatever else the record holds).
const FieldJSON = "json"

const fieldIDJSON = 0

// maxConvRecord bounds one record of a conversation file: a
// conversation of 16 MiB is not a training sample.
const maxConvRecord = 16 << 20

// ConvDataset is a conversation dataset: a sample is one image of a
// record, read from DIR/its path; a record of several images is as many
// samples, consecutive in its order (Grouped: a job plans records and
// serves each whole, its images together in one batch). Every image's
// field "json" is its record (the trainer's tokenizer takes the
// conversation from it). Labels are -1, there are no classes. Records of
// no image (text alone) or of more than MaxRecordImages are left out
// when it opens, counted and logged with the first few ids. The
// fingerprint covers the file's bytes and every image's name and size.
type ConvDataset struct {
	root *os.Root
	// file is the conversation file, open: each record is read from it
	// when a batch asks (its offset and length in recs), not kept.
	file *os.File
	recs [][2]int64
	// first is each record's first sample (and, last, Len()); rec is each
	// sample's record.
	first   []int32
	rec     []int32
	most    int
	names   []string
	sizes   []int64
	maxSize int64
	fp      string
	// annSum is the file's hex SHA-256; m its manifest (stoker index),
	// nil without one, and obj each image's object in it (or in imgs).
	annSum string
	m      *Manifest
	obj    []int32
	// A file and images in object storage: the file's store and object
	// (its records read back at its version), the images' objects.
	annSt  source.Store
	annObj source.Object
	imgs   *storeImages
	// Left out: records without an image, records of more than
	// MaxRecordImages.
	TextOnly, MultiImage int
	annName              string
}

// MaxRecordImages bounds one record's images: a batch holds a record
// whole, so a job's batch may hold batch_size times its dataset's largest
// record of images.
const MaxRecordImages = 64

// Grouped is a Dataset whose samples are the images of records (a
// conversation file's): record r's images are samples [first, first+n) of
// Record(r), in the record's order, and every sample is one record's.
type Grouped interface {
	// Records is how many records there are.
	Records() int
	// Record is record r's first sample and its number of images.
	Record(r int) (first, n int)
	// RecordOf is sample i's record.
	RecordOf(i int) int
	// MostImages is the most images a record has.
	MostImages() int
}

var (
	_ Dataset    = (*ConvDataset)(nil)
	_ Fielded    = (*ConvDataset)(nil)
	_ Grouped    = (*ConvDataset)(nil)
	_ Prefetcher = (*ConvDataset)(nil)
)

// IsConversationFile reports whether the JSON file at path is a list (a
// conversation dataset's) rather than an object (COCO's): its first byte
// that is not white space, within its first 4 KiB, is '['. It opens
// without blocking and reads only a regular file (a FIFO or a device is
// left to the COCO path, which refuses it saying why).
func IsConversationFile(path string) bool {
	f, st, err := annot.OpenStat(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if !st.Mode().IsRegular() {
		return false
	}
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	return opensList(head[:n])
}

// opensList reports whether a JSON file's first bytes open a list: its
// first byte past a UTF-8 byte order mark and white space is '['.
func opensList(head []byte) bool {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	head = bytes.TrimLeft(head, " \t\r\n")
	return len(head) > 0 && head[0] == '['
}

// isConversationObject is IsConversationFile of the annotations object at
// the URL loc: its first 4 KiB read.
func isConversationObject(ctx context.Context, loc string, o sourceOptions) bool {
	st, obj, err := openAnnotationsObject(ctx, loc, o, math.MaxInt64, "")
	if err != nil {
		return false
	}
	defer st.Close()
	head := make([]byte, min(obj.Size, 4096))
	return st.ReadRange(ctx, obj, 0, head) == nil && opensList(head)
}

// convRecord is what ConvDataset reads of a record: its images (LLaVA's
// "image", a name or a list; ShareGPT's "images"), its id, and whether it
// holds a conversation.
type convRecord struct {
	ID            json.RawMessage `json:"id"`
	Image         json.RawMessage `json:"image"`
	Images        json.RawMessage `json:"images"`
	Conversations json.RawMessage `json:"conversations"`
	Messages      json.RawMessage `json:"messages"`
}

// images are a record's image names: "image" (a string or a list of
// them), else "images"; null or absent: none.
func (r *convRecord) images() ([]string, error) {
	raw := r.Image
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = r.Images
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("its images are %.40s: want a file name or a list of them", raw)
	}
	return list, nil
}

// OpenConversations opens the conversation file at ann (at most max
// bytes; over says what bounds it) over the images under dir. A record that is not an object, has
// no "conversations" or "messages", or names an image outside dir or
// missing refuses the file, naming the record (the first few missing).
func OpenConversations(dir, ann string, max int64, over string, lg *slog.Logger) (*ConvDataset, error) {
	return openConversations(context.Background(), dir, ann, max, over, sourceOptions{log: lg}, false)
}

// openConversations is OpenConversations, the images' sizes taken from
// the manifest o names or the one beside them (withManifest; stoker
// index) instead of looked up one by one.
func openConversations(ctx context.Context, dir, ann string, max int64, over string, o sourceOptions, withManifest bool) (*ConvDataset, error) {
	lg := o.log
	name := path.Base(filepath.ToSlash(ann))
	var rc io.ReadCloser
	var annSt source.Store
	var annObj source.Object
	var err error
	if source.IsRemote(ann) {
		if annSt, annObj, err = openAnnotationsObject(ctx, ann, o, max, over); err != nil {
			return nil, err
		}
		r, err := annSt.NewReader(ctx, annObj, 0)
		if err != nil {
			annSt.Close()
			return nil, fmt.Errorf("annotations %s: %w", ann, err)
		}
		rc = &storeFile{Reader: io.LimitReader(r, annObj.Size), rc: r, st: nopCloser{annSt}}
	} else if rc, err = openLocalFile(ann, name, max, over); err != nil {
		return nil, err
	}
	defer rc.Close()
	done := false
	defer func() {
		if !done && annSt != nil {
			annSt.Close()
		}
	}()
	h := sha256.New()
	dec := json.NewDecoder(io.TeeReader(bufio.NewReaderSize(rc, 1<<20), h))
	bad := func(format string, a ...any) (*ConvDataset, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrUnsupported, name, fmt.Sprintf(format, a...))
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return bad("not a conversation file: want a JSON list of records (LLaVA's {\"image\", \"conversations\"} or ShareGPT's {\"messages\", \"images\"})")
	}
	d := &ConvDataset{annName: name, maxSize: DefaultMaxFileSize}
	var textOnly, multi []string
	for k := 0; dec.More(); k++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, ErrTooLarge) {
				return nil, err
			}
			return bad("record %d: %v", k, err)
		}
		if len(raw) > maxConvRecord {
			return bad("record %d is %d bytes: the limit is %d", k, len(raw), maxConvRecord)
		}
		var r convRecord
		if len(raw) == 0 || raw[0] != '{' {
			return bad("record %d is %.40s: want an object", k, raw)
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return bad("record %d: %v", k, err)
		}
		if len(r.Conversations) == 0 && len(r.Messages) == 0 && k == 0 { // a list, but not of conversations: neither layout
			return nil, fmt.Errorf("%w: %w: %s: the top level is a list; want a JSON object with \"images\", \"annotations\" and \"categories\" arrays (COCO's), or a list of conversation records (LLaVA's {\"image\", \"conversations\"} or ShareGPT's {\"messages\", \"images\"}): record 0 (id %s) has neither \"conversations\" nor \"messages\"",
				ErrUnsupported, annot.ErrNotCOCO, name, orNone(r.ID))
		}
		if len(r.Conversations) == 0 && len(r.Messages) == 0 {
			return bad("record %d (id %s) has neither \"conversations\" (LLaVA) nor \"messages\" (ShareGPT)", k, orNone(r.ID))
		}
		imgs, err := r.images()
		if err != nil {
			return bad("record %d (id %s): %v", k, orNone(r.ID), err)
		}
		switch {
		case len(imgs) == 0:
			textOnly = append(textOnly, fmt.Sprintf("%d (id %s)", k, orNone(r.ID)))
			continue
		case len(imgs) > MaxRecordImages:
			multi = append(multi, fmt.Sprintf("%d (id %s, %d images)", k, orNone(r.ID), len(imgs)))
			continue
		}
		for _, im := range imgs {
			img := filepath.ToSlash(im)
			if img == "" || !filepath.IsLocal(filepath.FromSlash(img)) {
				return bad("record %d (id %s): image %q is not a path under the dataset's directory: the server reads only the files under it", k, orNone(r.ID), im)
			}
			d.rec = append(d.rec, int32(len(d.recs)))
			d.names = append(d.names, img)
		}
		d.first = append(d.first, int32(len(d.names)-len(imgs)))
		if len(imgs) > d.most {
			d.most = len(imgs)
		}
		d.recs = append(d.recs, [2]int64{dec.InputOffset() - int64(len(raw)), int64(len(raw))})
	}
	d.first = append(d.first, int32(len(d.names)))
	if _, err := dec.Token(); err != nil { // the closing ']'
		return bad("the list does not end: %v", err)
	}
	if _, err := io.Copy(h, dec.Buffered()); err != nil {
		return nil, err
	}
	if _, err := io.Copy(h, rc); err != nil { // past what the decoder needed
		return nil, err
	}
	if len(d.recs) == 0 {
		return bad("no record with an image (%d without an image, %d of more than %d)", len(textOnly), len(multi), MaxRecordImages)
	}
	if annSt != nil {
		d.annSt, d.annObj = annSt, annObj
	} else {
		var st os.FileInfo
		if d.file, st, err = annot.OpenStat(ann); err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			d.file.Close()
			return bad("not a regular file (%v)", st.Mode().Type())
		}
	}
	done = true // d.Close closes what is open from here
	d.annSum = hex.EncodeToString(h.Sum(nil))
	d.sizes = make([]int64, len(d.names))
	if err := d.openImages(ctx, dir, o, withManifest); err != nil {
		d.Close()
		return nil, err
	}
	fp := sha256.New()
	fp.Write(h.Sum(nil))
	for i, n := range d.names {
		fp.Write([]byte(n))
		fp.Write(binary.LittleEndian.AppendUint64(nil, uint64(d.sizes[i])))
	}
	d.fp = hex.EncodeToString(fp.Sum(nil))
	d.TextOnly, d.MultiImage = len(textOnly), len(multi)
	if len(textOnly)+len(multi) > 0 {
		lg.Warn(fmt.Sprintf("%s: %d of %d records left out: %d without an image (%s), %d of more than "+fmt.Sprint(MaxRecordImages)+" images (%s)",
			name, len(textOnly)+len(multi), len(textOnly)+len(multi)+len(d.recs), len(textOnly), firstFew(textOnly), len(multi), firstFew(multi)),
			"file", name, "text_only", len(textOnly), "multi_image", len(multi))
	}
	return d, nil
}

// fromManifest takes the images' sizes from the conversation manifest
// o names, or the one beside the images (used: false, without an error,
// when there is none, or the one beside them is of another file): its
// images are the file's, and a sample of them is checked unchanged
// (checkFresh).
func (d *ConvDataset) fromManifest(ctx context.Context, dir string, o sourceOptions) (used bool, err error) {
	if o.manifest == "" && !source.IsRemote(dir) {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(ManifestName))); err != nil {
			return false, nil
		}
	}
	st, m, where, err := loadAnnotatedManifest(ctx, dir, o)
	if err != nil || m == nil {
		return false, err
	}
	defer func() {
		if !used || err != nil || !source.IsRemote(dir) {
			st.Close()
		}
	}()
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s (run `stoker index %s --annotations FILE` again)", ErrManifest, where, fmt.Sprintf(format, a...), dir)
	}
	if o.manifest == "" && (m.Layout != LayoutConversations || m.AnnotationsSHA256 != d.annSum) {
		o.log.Info("the manifest beside the images is of other annotations: looking the images up", "manifest", where)
		return false, nil
	}
	switch {
	case m.Layout != LayoutConversations:
		return false, bad("a manifest of a %s dataset, not of a conversation file's images", m.Layout)
	case m.AnnotationsSHA256 != d.annSum:
		return false, bad("made with another conversation file (SHA-256 %s; %s's is %s)", m.AnnotationsSHA256, d.annName, d.annSum)
	}
	if err := checkOwner(m, st, dir, o.manifest != ""); err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrManifest, where, err)
	}
	index := make(map[string]int32, m.NumObjects())
	for i := range m.NumObjects() {
		index[m.key(i)] = int32(i)
	}
	d.obj = make([]int32, len(d.names))
	for i, n := range d.names {
		k, ok := index[n]
		if !ok {
			return false, bad("image %s of the file is not in it", n)
		}
		d.obj[i], d.sizes[i] = k, m.Object(int(k)).Size
	}
	if err := checkFresh(ctx, st, m, where, o.log); err != nil {
		return false, err
	}
	if source.IsRemote(dir) { // the images read at the manifest's versions
		objs := make([]source.Object, m.NumObjects())
		for k := range objs {
			objs[k] = m.Object(k)
		}
		if d.imgs, err = newStoreImages(st, o.ranges(st), objs); err != nil {
			return false, err
		}
		d.imgs.stale = "the manifest " + where + " is stale: run `stoker index " + dir + " --annotations FILE` again"
	}
	d.m = m
	o.log.Info("conversation images opened from their manifest", "manifest", where, "images", m.NumObjects(), "sizes", m.HasImageSizes())
	return true, nil
}

// openImages finds the images the records name: under the local
// directory dir (each looked up, or their sizes taken from the manifest:
// fromManifest), or in the store at the URL dir (from its manifest, else
// one listing of it: each image the object whose key is its path), read
// at their versions. The first few missing are named.
func (d *ConvDataset) openImages(ctx context.Context, dir string, o sourceOptions, withManifest bool) error {
	if !source.IsRemote(dir) {
		var err error
		if d.root, err = os.OpenRoot(dir); err != nil {
			return err
		}
	}
	if withManifest {
		if used, err := d.fromManifest(ctx, dir, o); err != nil || used {
			return err
		}
	}
	var missing []string
	if source.IsRemote(dir) {
		st, err := source.Open(context.WithoutCancel(ctx), dir, o.store...)
		if err != nil {
			return err
		}
		index := make(map[string]int32, len(d.names))
		for _, n := range d.names {
			if _, ok := index[n]; !ok {
				index[n] = -1
			}
		}
		var objs []source.Object
		if err := st.List(ctx, "", func(obj source.Object) error {
			if k, ok := index[obj.Key]; ok && k < 0 {
				index[obj.Key] = int32(len(objs))
				objs = append(objs, obj)
			}
			return nil
		}); err != nil {
			st.Close()
			return err
		}
		d.obj = make([]int32, len(d.names))
		for i, n := range d.names {
			if d.obj[i] = index[n]; d.obj[i] < 0 {
				missing = append(missing, n)
				continue
			}
			d.sizes[i] = objs[d.obj[i]].Size
		}
		if len(missing) > 0 {
			st.Close()
			return errMissingImages(missing, len(d.names), d.annName, st.String())
		}
		if d.imgs, err = newStoreImages(st, o.ranges(st), objs); err != nil {
			st.Close()
			return err
		}
		o.log.Info("conversation images listed", "source", st.String(), "images", len(objs))
		return nil
	}
	for i, n := range d.names {
		st, err := d.root.Stat(filepath.FromSlash(n))
		if err != nil || !st.Mode().IsRegular() {
			missing = append(missing, n)
			continue
		}
		d.sizes[i] = st.Size()
	}
	if len(missing) > 0 {
		return errMissingImages(missing, len(d.names), d.annName, dir)
	}
	return nil
}

// nopCloser is a store whose Close does nothing: the conversation file's
// store, read as a stream at open and kept for its records.
type nopCloser struct{ source.Store }

func (nopCloser) Close() error { return nil }

// KnowsImageSizes reports whether the dataset has its images' sizes
// from its manifest (stoker index --annotations FILE --sizes).
func (d *ConvDataset) KnowsImageSizes() bool { return d.m != nil && d.m.HasImageSizes() }

// ImageSize is sample i's image's width and height from the manifest; ok
// is false where it does not know them.
func (d *ConvDataset) ImageSize(i int) (w, h int, ok bool) {
	if d.m == nil {
		return 0, 0, false
	}
	return d.m.ImageSize(int(d.obj[i]))
}

// indexConversations is IndexAnnotated's manifest of the conversation
// file ann over the images under dir (a local directory): each image
// once, in the order the file first names it, with its size and
// modification time (and, with --sizes, its width and height), and the
// file's SHA-256.
func indexConversations(ctx context.Context, dir, ann string, opts []SourceOption) (*Manifest, error) {
	o := newSourceOptions(opts)
	max, over := cocoFileBound(o.annBudget)
	d, err := openConversations(ctx, dir, ann, max, over, o, false)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	m := &Manifest{Layout: LayoutConversations, AnnotationsSHA256: d.annSum}
	if d.imgs != nil { // in a store: its objects as listed, in the order the file first names them
		m.Root = d.imgs.st.String()
		for _, obj := range d.imgs.objs {
			m.AddSample(ManifestSample{Object: m.AddObject(obj), Size: obj.Size, Label: -1})
		}
		if err := sizeIndexed(ctx, m, opts, d.imgs.st.NewReader); err != nil {
			return nil, err
		}
		return m, m.check()
	}
	if m.Root, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(d.names))
	for _, n := range d.names {
		if seen[n] {
			continue
		}
		seen[n] = true
		fi, err := d.root.Stat(filepath.FromSlash(n))
		if err != nil {
			return nil, err
		}
		obj := source.Object{Key: n, Size: fi.Size(), ModTime: fi.ModTime()}
		m.AddSample(ManifestSample{Object: m.AddObject(obj), Size: obj.Size, Label: -1})
	}
	if err := sizeIndexed(ctx, m, opts, rootOpener(d.root)); err != nil {
		return nil, err
	}
	return m, m.check()
}

// orNone is a record's id for messages: its JSON, or "none".
func orNone(id json.RawMessage) string {
	if len(id) == 0 {
		return "none"
	}
	if len(id) > 40 {
		return string(id[:40]) + "…"
	}
	return string(id)
}

// firstFew is up to 3 of list, then how many more.
func firstFew(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	if len(list) <= 3 {
		return strings.Join(list, ", ")
	}
	return strings.Join(list[:3], ", ") + fmt.Sprintf(" and %d more", len(list)-3)
}

// AnnotationBytes is what the dataset keeps of its file: each record's
// offset, length and first image, each image's name, size, record and
// object in the manifest.
func (d *ConvDataset) AnnotationBytes() int64 {
	n := int64(len(d.recs))*(16+4) + int64(len(d.names))*(8+16+4+4)
	for _, s := range d.names {
		n += int64(len(s))
	}
	return n
}

// Layout is "conversations".
func (d *ConvDataset) Layout() string { return "conversations" }

// SetMaxFileSize bounds an image's size.
func (d *ConvDataset) SetMaxFileSize(n int64) { d.maxSize = n }

// Len implements Dataset: the records' images.
func (d *ConvDataset) Len() int { return len(d.names) }

// Records implements Grouped.
func (d *ConvDataset) Records() int { return len(d.recs) }

// Record implements Grouped.
func (d *ConvDataset) Record(r int) (first, n int) {
	return int(d.first[r]), int(d.first[r+1] - d.first[r])
}

// RecordOf implements Grouped.
func (d *ConvDataset) RecordOf(i int) int { return int(d.rec[i]) }

// MostImages implements Grouped.
func (d *ConvDataset) MostImages() int { return d.most }

// Label implements Dataset: -1 (a conversation has no class).
func (d *ConvDataset) Label(i int) int64 { return -1 }

// Classes implements Dataset: none.
func (d *ConvDataset) Classes() []string { return nil }

// Name implements Dataset: the record's image.
func (d *ConvDataset) Name(i int) string { return d.names[i] }

// Fingerprint implements Dataset.
func (d *ConvDataset) Fingerprint() string { return d.fp }

// Close implements Dataset.
func (d *ConvDataset) Close() error {
	var errs []error
	if d.root != nil {
		errs = append(errs, d.root.Close())
	}
	if d.file != nil {
		errs = append(errs, d.file.Close())
	}
	if d.annSt != nil {
		errs = append(errs, d.annSt.Close())
	}
	if d.imgs != nil {
		errs = append(errs, d.imgs.close())
	}
	return errors.Join(errs...)
}

// Read implements Dataset: the record's image, from the dataset's
// directory.
func (d *ConvDataset) Read(i int, buf []byte) ([]byte, error) {
	if i < 0 || i >= d.Len() {
		return nil, fmt.Errorf("%w: sample index %d out of range [0, %d)", ErrUnsupported, i, d.Len())
	}
	if d.imgs != nil {
		return d.imgs.read(int(d.obj[i]), d.names[i], d.maxSize, buf)
	}
	return readIndexed(d.root, filepath.FromSlash(d.names[i]), d.names[i], d.sizes[i], d.maxSize, buf)
}

// Prefetch implements Prefetcher: images in a store are hinted to its
// reads.
func (d *ConvDataset) Prefetch(indices []int64) {
	if d.imgs == nil {
		return
	}
	objs := make([]int64, 0, len(indices))
	for _, i := range indices {
		if i >= 0 && i < int64(len(d.obj)) {
			objs = append(objs, int64(d.obj[i]))
		}
	}
	d.imgs.prefetch(objs, d.maxSize)
}

// FieldID implements Fielded: "json" (the record), "path" (its image)
// and "__key__" (it without its extension).
func (d *ConvDataset) FieldID(name string) (int, bool) {
	switch name {
	case FieldJSON:
		return fieldIDJSON, true
	case FieldPath:
		return fieldIDPath, true
	case FieldKey:
		return fieldIDKey, true
	}
	return 0, false
}

// FieldNames implements Fielded.
func (d *ConvDataset) FieldNames() []string {
	return []string{FieldJSON, FieldPath, FieldKey, FieldSource}
}

// FieldSize implements Fielded.
func (d *ConvDataset) FieldSize(i, id int) int64 {
	switch id {
	case fieldIDJSON:
		return d.recs[d.rec[i]][1]
	case fieldIDPath:
		return int64(len(d.names[i]))
	case fieldIDKey:
		return int64(len(keyOfPath(d.names[i])))
	}
	return -1
}

// ReadField implements Fielded.
func (d *ConvDataset) ReadField(i, id int, buf []byte) ([]byte, error) {
	switch id {
	case fieldIDJSON:
		off, n := d.recs[d.rec[i]][0], d.recs[d.rec[i]][1]
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		var err error
		if d.annSt != nil { // at the version read at open: another is ErrChanged
			err = d.annSt.ReadRange(context.Background(), d.annObj, off, buf)
		} else {
			_, err = d.file.ReadAt(buf, off)
		}
		if err != nil || buf[0] != '{' || buf[n-1] != '}' {
			return nil, fmt.Errorf("%w: %s: record of %s changed since the dataset was opened (reopen it to take the change)", ErrCorrupt, d.annName, d.names[i])
		}
		return buf, nil
	case fieldIDPath:
		return append(buf[:0], d.names[i]...), nil
	case fieldIDKey:
		return append(buf[:0], keyOfPath(d.names[i])...), nil
	}
	return nil, fmt.Errorf("%w: sample %s has no such field", ErrUnsupported, d.names[i])
}
