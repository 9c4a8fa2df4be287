package dataset

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// Layouts a Manifest describes, as Manifest.Layout names them.
const (
	LayoutImageFolder = "imagefolder"
	LayoutWebDataset  = "webdataset"
	// LayoutCOCO: the images a COCO annotations file names, an object
	// each, in the file's sample order (IndexAnnotated).
	LayoutCOCO = "coco"
	// LayoutYOLO: the images of a YOLO dataset in object storage, an
	// object each in path order, with their label files (manifest_yolo.go).
	LayoutYOLO = "yolo"
	// LayoutConversations: the images a conversation file names, an
	// object each (each image once, in the order the file first names
	// it), with the file's SHA-256 (convdataset.go): with their sizes
	// (--sizes), a batch_tokens job counts its tokens without reading a
	// header.
	LayoutConversations = "conversations"
)

// annotated reports whether the manifest's layout is of an annotations
// file's images (COCO's, YOLO's, a conversation file's): its SHA-256 is
// in the manifest, each sample an image whole.
func (m *Manifest) annotated() bool {
	return m.Layout == LayoutCOCO || m.Layout == LayoutYOLO || m.Layout == LayoutConversations
}

// ManifestName is where a dataset's manifest is kept beside its data,
// relative to the dataset's root: a dot-directory, which neither a listing
// of the dataset (source.Store.List) nor ImageFolder's walk takes for data.
const ManifestName = ".stoker/manifest"

// Manifest is a dataset's index, made once (stoker index) so that a server
// starts without listing a bucket or reading its shards: the objects with
// their versions, and the samples as byte ranges of them with their
// labels. Objects and samples are held in flat tables (a million samples
// cost tens of megabytes, not hundreds); build one with AddObject and
// AddSample, read it with Object and Sample.
type Manifest struct {
	// Root is what was indexed: a store's URL (s3://bucket/prefix/) or a
	// local directory's absolute path.
	Root string
	// Layout is LayoutImageFolder or LayoutWebDataset.
	Layout string
	// Classes name the labels of an ImageFolder; a WebDataset's classes
	// are "0".."max label", as OpenWebDataset has them, and are not kept.
	// A COCO manifest's are its categories' names by contiguous label.
	Classes []string
	// AnnotationsSHA256 is the hex SHA-256 of the annotations file a COCO
	// manifest was made with: in its fingerprint, and a file that is not
	// that one is refused with the manifest.
	AnnotationsSHA256 string
	// labels are a YOLO manifest's label files, one an image
	// (manifest_yolo.go).
	labels []yoloLabel

	objs    objectTable
	samples sampleTable
	bad     bool // a sample added out of range
	// fields holds a WebDataset's samples' other members (AddSample's
	// Fields); noFields says the manifest recorded none (a manifest of an
	// older stoker: its samples' fields are not known). wfields answers
	// for them once check has run.
	fields   fieldTable
	noFields bool
	wfields  wdsFields
	// sizes are each sample's image width and height (0, 0: unknown),
	// or nil: none recorded (manifest_file.go, stoker index --sizes).
	sizes []uint32
	// recs are a WebDataset's records of several images, grouped by
	// their members' names once check has run (webdataset_records.go);
	// nil where every sample is an image of its own.
	recs *wdsRecords
}

// ManifestSample is one sample: the bytes [Off, Off+Size) of an object
// (all of it in an ImageFolder; a member's data inside a tar shard), with
// its label and, inside a shard, the member's name.
type ManifestSample struct {
	Object    int
	Off, Size int64
	// Label is the class, or -1 in an unlabelled WebDataset (no .cls).
	Label  int64
	Member string
	// Hash is the SHA-256 of the sample's bytes where its object has no
	// version (a store that gives none: IndexStore reads and hashes what
	// it lists without one), nil elsewhere: a read is then checked
	// against it.
	Hash []byte
	// NoImage: a key of an unlabelled WebDataset that has members but no
	// image (Member is the key, Off and Size 0); reading it fails.
	NoImage bool
	// Fields are a WebDataset sample's other members (not its image or
	// its .cls), each a range of the same shard.
	Fields []ManifestField
	// ClsOff and ClsSize are a labelled WebDataset sample's .cls member:
	// its bytes in the same shard, read beside the image and checked
	// against Label, so that a manifest cannot relabel a sample (ClsSize
	// 0: none).
	ClsOff, ClsSize int64
}

// ManifestField is a member of a WebDataset sample's key: its extension
// (the field's name) and its bytes in the shard.
type ManifestField struct {
	Ext       string
	Off, Size int64
}

// objectTable holds objects column by column, their strings back to back
// (a strings.Builder's String is a view, not a copy, and the bytes it
// shows never change as it grows).
type objectTable struct {
	keys   strings.Builder
	keyEnd []uint32
	sizes  []int64
	vers   strings.Builder
	verEnd []uint32
	mtimes []int64 // Unix nanoseconds; 0: none
}

// sampleTable holds samples column by column.
type sampleTable struct {
	obj      []int32
	off      []int64
	size     []int64
	label    []int32
	mems     strings.Builder
	memEnd   []uint32
	maxLabel int64
	// unlabelled counts the samples of label -1; noImage holds those
	// without an image (nil: none).
	unlabelled int
	noImage    map[int32]bool
	// hashes holds each sample's Hash, sha256.Size bytes a sample (zeros:
	// none), or is nil when no sample has one.
	hashes []byte
	// clsOff and clsSize are each sample's .cls member (size 0: none), or
	// nil when no sample has one.
	clsOff, clsSize []int64
}

// maxStrings bounds the bytes of a table's strings (their ends are
// uint32).
const maxStrings = 1<<32 - 1

// AddObject appends o and returns its index.
func (m *Manifest) AddObject(o source.Object) int {
	t := &m.objs
	t.keys.WriteString(o.Key)
	t.keyEnd = append(t.keyEnd, uint32(t.keys.Len()))
	t.sizes = append(t.sizes, o.Size)
	t.vers.WriteString(o.Version)
	t.verEnd = append(t.verEnd, uint32(t.vers.Len()))
	var mt int64
	if !o.ModTime.IsZero() {
		mt = o.ModTime.UnixNano()
	}
	t.mtimes = append(t.mtimes, mt)
	return len(t.sizes) - 1
}

// AddSample appends s.
func (m *Manifest) AddSample(s ManifestSample) {
	t := &m.samples
	if s.Object < 0 || s.Object > math.MaxInt32 || s.Label < -1 || s.Label >= maxClasses {
		m.bad = true // and check says so
	}
	if s.Label < 0 {
		t.unlabelled++
	}
	if s.NoImage {
		if t.noImage == nil {
			t.noImage = map[int32]bool{}
		}
		t.noImage[int32(len(t.obj))] = true
	}
	for _, f := range s.Fields {
		if m.fields.add(f.Ext, f.Off, f.Size) != nil {
			m.bad = true
		}
	}
	m.fields.next()
	t.obj = append(t.obj, int32(s.Object))
	t.off = append(t.off, s.Off)
	t.size = append(t.size, s.Size)
	t.label = append(t.label, int32(s.Label))
	t.mems.WriteString(s.Member)
	t.memEnd = append(t.memEnd, uint32(t.mems.Len()))
	t.maxLabel = max(t.maxLabel, s.Label)
	if s.ClsSize != 0 && t.clsSize == nil {
		t.clsOff, t.clsSize = make([]int64, len(t.obj)-1, len(t.obj)), make([]int64, len(t.obj)-1, len(t.obj))
	}
	if t.clsSize != nil {
		t.clsOff, t.clsSize = append(t.clsOff, s.ClsOff), append(t.clsSize, s.ClsSize)
	}
	switch {
	case len(s.Hash) != 0 && len(s.Hash) != sha256.Size:
		m.bad = true
	case len(s.Hash) != 0 && t.hashes == nil:
		t.hashes = make([]byte, sha256.Size*(len(t.obj)-1), sha256.Size*len(t.obj))
		fallthrough
	case t.hashes != nil:
		t.hashes = append(t.hashes, make([]byte, sha256.Size)...)
		copy(t.hashes[len(t.hashes)-sha256.Size:], s.Hash)
	}
}

// cls is sample i's .cls member (size 0: none).
func (m *Manifest) cls(i int) (off, size int64) {
	t := &m.samples
	if t.clsSize == nil {
		return 0, 0
	}
	return t.clsOff[i], t.clsSize[i]
}

// hash is sample i's content hash, nil when it has none.
func (m *Manifest) hash(i int) []byte {
	t := &m.samples
	if t.hashes == nil {
		return nil
	}
	h := t.hashes[i*sha256.Size : (i+1)*sha256.Size]
	if [sha256.Size]byte(h) == ([sha256.Size]byte{}) {
		return nil
	}
	return h
}

// check says whether the manifest is one a dataset can be made of: every
// sample a range of an object, the samples of one object together, every
// label a class. A Manifest read from a file is outside input. For a
// WebDataset it sets the classes, "0".."max label".
func (m *Manifest) check() error {
	o, s := &m.objs, &m.samples
	if o.keys.Len() > maxStrings || o.vers.Len() > maxStrings || s.mems.Len() > maxStrings {
		return fmt.Errorf("%w: more than 4 GiB of names", ErrManifest)
	}
	if m.bad {
		return fmt.Errorf("%w: a sample's object or label is out of range, or its hash not a SHA-256", ErrManifest)
	}
	if err := m.checkSizes(); err != nil {
		return err
	}
	if s.hashes != nil && len(s.hashes) != sha256.Size*len(s.obj) {
		return fmt.Errorf("%w: %d bytes of hashes for %d samples", ErrManifest, len(s.hashes), len(s.obj))
	}
	switch m.Layout {
	case LayoutImageFolder, LayoutWebDataset, LayoutCOCO, LayoutYOLO, LayoutConversations:
	default:
		return fmt.Errorf("%w: layout %q (want %s or %s)", ErrManifest, m.Layout, LayoutImageFolder, LayoutWebDataset)
	}
	nobj := len(o.sizes)
	for i, sz := range o.sizes {
		if sz < 0 {
			return fmt.Errorf("%w: object %d has size %d", ErrManifest, i, sz)
		}
	}
	prev := int32(0)
	for i := range s.obj {
		ob, off, size, label := s.obj[i], s.off[i], s.size[i], s.label[i]
		switch {
		case int(ob) >= nobj:
			return fmt.Errorf("%w: sample %d is in object %d of %d", ErrManifest, i, ob, nobj)
		case ob < prev:
			return fmt.Errorf("%w: sample %d is in object %d, after samples of object %d", ErrManifest, i, ob, prev)
		case off < 0 || size < 0 || off > o.sizes[ob]-size:
			return fmt.Errorf("%w: sample %d is bytes [%d, +%d) of an object of %d", ErrManifest, i, off, size, o.sizes[ob])
		case m.Layout == LayoutImageFolder && int(label) >= len(m.Classes):
			return fmt.Errorf("%w: sample %d has label %d of %d classes", ErrManifest, i, label, len(m.Classes))
		}
		prev = ob
	}
	if m.Layout == LayoutWebDataset {
		return m.checkWebDataset()
	}
	if m.annotated() {
		return m.checkCOCO()
	}
	if s.unlabelled > 0 || len(s.noImage) > 0 || m.fields.end != nil {
		return fmt.Errorf("%w: an ImageFolder's samples are labelled images with no other members", ErrManifest)
	}
	return m.checkFolders()
}

// checkWebDataset checks a WebDataset's labels (all of them, or none)
// and fields (each a range of its sample's shard), sets its classes,
// "0".."max label", and readies its fields.
func (m *Manifest) checkWebDataset() error {
	s, t := &m.samples, &m.fields
	n := len(s.obj)
	if s.unlabelled != 0 && s.unlabelled != n {
		return fmt.Errorf("%w: %d of %d samples have no label: a WebDataset's samples are all labelled or none", ErrManifest, s.unlabelled, n)
	}
	if s.unlabelled == 0 && len(s.noImage) > 0 {
		return fmt.Errorf("%w: a labelled WebDataset's sample without an image", ErrManifest)
	}
	if t.n != n {
		return fmt.Errorf("%w: fields of %d samples for %d", ErrManifest, t.n, n)
	}
	if s.unlabelled == 0 && n > 0 {
		// Each label is checked against its sample's .cls as it is read:
		// a manifest without their places (an older stoker's) would be
		// believed alone.
		if s.clsSize == nil {
			return fmt.Errorf("%w: it gives no .cls member for its WebDataset samples, so their labels could not be checked against the shards (a manifest of an older stoker): run `stoker index` again", ErrManifest)
		}
		for i := range n {
			sz := m.objs.sizes[s.obj[i]]
			if off, size := s.clsOff[i], s.clsSize[i]; size <= 0 || size > maxClsBytes || off < tarBlock || off > sz-size {
				return fmt.Errorf("%w: sample %d's .cls member is bytes [%d, +%d) of an object of %d", ErrManifest, i, off, size, sz)
			}
		}
	}
	if t.end != nil {
		for i := range n {
			sz := m.objs.sizes[s.obj[i]]
			for k := range t.entries(i) {
				_, off, size := t.entry(i, k)
				if off < 0 || size < 0 || off > sz-size {
					return fmt.Errorf("%w: sample %d's field %d is bytes [%d, +%d) of an object of %d", ErrManifest, i, k, off, size, sz)
				}
			}
		}
	}
	m.wfields = wdsFields{t: t, labelled: s.unlabelled == 0, imageExts: map[string]bool{}}
	for i := range n {
		if s.noImage[int32(i)] {
			// An older stoker took a record's images (KEY.0.jpg, ...)
			// for fields of a key without an image.
			for k := range t.entries(i) {
				if ext, _, _ := t.entry(i, k); isNumberedImage(ext) {
					return fmt.Errorf("%w: sample %d, %s, has numbered images (%s.%s) as fields, as an older stoker indexed a record of several images: run `stoker index` again",
						ErrManifest, i, errs.Clip(m.name(i), 256), errs.Clip(cut(&s.mems, s.memEnd, i), 256), ext)
				}
			}
			continue
		}
		if _, ext, ok := keyOfMember(cut(&s.mems, s.memEnd, i)); ok && !m.wfields.imageExts[ext] {
			if _, err := t.intern(ext); err != nil {
				return fmt.Errorf("%w: %v", ErrManifest, err)
			}
			m.wfields.imageExts[ext] = true
		}
	}
	recs, err := groupRecords(n, func(i int) int32 { return s.obj[i] }, func(i int) string { return cut(&s.mems, s.memEnd, i) })
	if err != nil {
		return fmt.Errorf("%w: %v", ErrManifest, err)
	}
	m.recs = recs
	m.Classes = []string{}
	if s.unlabelled > 0 {
		return nil // no classes
	}
	m.Classes = make([]string, 0, s.maxLabel+1)
	for i := int64(0); i <= s.maxLabel; i++ {
		m.Classes = append(m.Classes, strconv.FormatInt(i, 10))
	}
	return nil
}

// checkCOCO checks a COCO or YOLO manifest: an image a whole object
// each, in object order, unlabelled, with its annotations file's SHA-256
// (a YOLO manifest's: its dataset YAML's), and a YOLO manifest's label
// files (checkLabels).
func (m *Manifest) checkCOCO() error {
	s := &m.samples
	if len(m.AnnotationsSHA256) != 2*sha256.Size || strings.Trim(m.AnnotationsSHA256, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: a %s manifest's annotations SHA-256 is %q", ErrManifest, m.Layout, errs.Clip(m.AnnotationsSHA256, 80))
	}
	if s.unlabelled != len(s.obj) || len(s.noImage) > 0 || m.fields.end != nil || s.hashes != nil || s.clsSize != nil {
		return fmt.Errorf("%w: a %s manifest's samples are unlabelled images with no other members", ErrManifest, m.Layout)
	}
	for i := range s.obj {
		if int(s.obj[i]) != i || s.off[i] != 0 || s.size[i] != m.objs.sizes[i] {
			return fmt.Errorf("%w: sample %d of a %s manifest is not object %d whole", ErrManifest, i, m.Layout, i)
		}
	}
	return m.checkLabels()
}

// checkFolders holds an ImageFolder's labels to its keys, as
// torchvision's ImageFolder makes them: the classes are the top folders,
// sorted, each with an image, and a sample's label is its key's folder's
// index among them. A manifest is outside input (its checksum is not
// keyed): labels that say otherwise are refused, not trained on.
func (m *Manifest) checkFolders() error {
	for i, c := range m.Classes {
		switch {
		case c == "" || strings.ContainsRune(c, '/') || strings.HasPrefix(c, "."):
			return fmt.Errorf("%w: class %d, %q, is not a folder name", ErrManifest, i, errs.Clip(c, 64))
		case i > 0 && m.Classes[i-1] >= c:
			return fmt.Errorf("%w: classes %q and %q out of order: an ImageFolder's classes are its folders, sorted", ErrManifest,
				errs.Clip(m.Classes[i-1], 64), errs.Clip(c, 64))
		}
	}
	seen := make([]bool, len(m.Classes))
	t := &m.samples
	for i := range t.obj {
		key, label := m.key(int(t.obj[i])), t.label[i]
		folder, _, ok := strings.Cut(key, "/")
		if !ok || folder != m.Classes[label] {
			return fmt.Errorf("%w: sample %d, %s, has label %d (class %q), not its folder's class: an ImageFolder's label is the class folder its image is in",
				ErrManifest, i, errs.Clip(key, 256), label, errs.Clip(m.Classes[label], 64))
		}
		seen[label] = true
	}
	for i, ok := range seen {
		if !ok {
			return fmt.Errorf("%w: class %q has no image: an ImageFolder's classes are the folders its images are in", ErrManifest, errs.Clip(m.Classes[i], 64))
		}
	}
	return nil
}

// NumObjects is the number of objects.
func (m *Manifest) NumObjects() int { return len(m.objs.sizes) }

// Object is object i, as it was indexed.
func (m *Manifest) Object(i int) source.Object {
	t := &m.objs
	o := source.Object{Key: cut(&t.keys, t.keyEnd, i), Size: t.sizes[i], Version: cut(&t.vers, t.verEnd, i)}
	if mt := t.mtimes[i]; mt != 0 {
		o.ModTime = time.Unix(0, mt)
	}
	return o
}

// Len is the number of samples.
func (m *Manifest) Len() int { return len(m.samples.obj) }

// Sample is sample i.
func (m *Manifest) Sample(i int) ManifestSample {
	t := &m.samples
	ms := ManifestSample{Object: int(t.obj[i]), Off: t.off[i], Size: t.size[i], Label: int64(t.label[i]),
		Member: cut(&t.mems, t.memEnd, i), Hash: m.hash(i), NoImage: t.noImage[int32(i)]}
	ms.ClsOff, ms.ClsSize = m.cls(i)
	for k := range m.fields.entries(i) {
		ext, off, size := m.fields.entry(i, k)
		ms.Fields = append(ms.Fields, ManifestField{Ext: ext, Off: off, Size: size})
	}
	return ms
}

// name is sample i's name in messages and in the fingerprint: its
// object's key, and inside a shard "key/member", as the local datasets
// name their samples.
func (m *Manifest) name(i int) string {
	key := m.key(int(m.samples.obj[i]))
	if mem := cut(&m.samples.mems, m.samples.memEnd, i); mem != "" {
		return key + "/" + mem
	}
	return key
}

func (m *Manifest) key(i int) string { return cut(&m.objs.keys, m.objs.keyEnd, i) }

// cut is string i of a column.
func cut(b *strings.Builder, ends []uint32, i int) string {
	start := uint32(0)
	if i > 0 {
		start = ends[i-1]
	}
	return b.String()[start:ends[i]]
}

// Fingerprint is the fingerprint of the dataset the manifest describes:
// the hash Open's ImageFolder and WebDataset compute over the same names,
// sizes, labels and (for an ImageFolder) classes, so that a manifest of a
// directory, the directory scanned, and the same files in a bucket all
// agree. Versions are not in it: they are checked on every read.
func (m *Manifest) Fingerprint() string {
	var h indexHash
	switch m.Layout {
	case LayoutImageFolder:
		h = newIndexHash(LayoutImageFolder, m.Classes)
	case LayoutYOLO:
		return m.yoloFingerprint()
	case LayoutCOCO, LayoutConversations: // COCODataset's: the annotations' hash, then each image
		h = newIndexHash(m.Layout, m.Classes)
		h.str(m.AnnotationsSHA256)
	default:
		h = newIndexHash(LayoutWebDataset, nil)
	}
	// What indexHash.add hashes, sample by sample ("key" or "key/member",
	// its length first, then size and label), through one buffer: a
	// million samples, not a million allocations.
	t := &m.samples
	var buf []byte
	for i := range t.obj {
		key := m.key(int(t.obj[i]))
		mem := cut(&t.mems, t.memEnd, i)
		n := len(key)
		if mem != "" {
			n += 1 + len(mem)
		}
		buf = binary.LittleEndian.AppendUint64(buf[:0], uint64(n))
		buf = append(buf, key...)
		if mem != "" {
			buf = append(append(buf, '/'), mem...)
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(t.size[i]))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(t.label[i]))
		h.h.Write(buf)
	}
	return h.sum()
}
