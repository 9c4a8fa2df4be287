package dataset

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// WebDataset is a set of tar shards in WebDataset layout: members that share
// a key (the path up to the first dot of the file name) make one sample,
// key.jpg|jpeg|png|webp (the image), key.cls (the label as decimal text)
// and any other members (key.txt, key.json: its fields, by extension).
// Shards are taken in name order and samples in tar order; they are read in
// place, never unpacked, so they must be plain tar files (compressed ones
// are refused, saying why). Classes are the label values seen, "0".."max".
// A labelled dataset (any .cls) needs every image's label: an image
// without a key.cls is refused, and a key without an image is no sample.
// An unlabelled one (no .cls at all: captions) has every key as a sample,
// label -1 and no classes; a key without an image fails when read.
// A key of numbered images, key.0.jpg, key.1.jpg, ... (a vision-language
// sample's), is a record of them (Grouped, as a conversation file's
// records are): each image a sample, in numeric order, named
// shard/key.<n>.jpg, with the key's label and fields (webdataset_records.go).
type WebDataset struct {
	shards  []*os.File
	names   []string // shard base names
	samples []wdsSample
	starts  []int // first sample of each shard with samples (ShardStarts)
	classes []string
	fields  wdsFields
	// recs are its records of several images (webdataset_records.go),
	// nil where every sample is an image of its own.
	recs    *wdsRecords
	maxSize int64
	fp      string
}

// clsForm says what a .cls member holds, for the messages that refuse one.
const clsForm = "a .cls member holds its sample's class index as decimal text, e.g. 7"

// maxClsBytes bounds a .cls member: a label is a few digits.
const maxClsBytes = 32

// parseCls is a .cls member's label, or an error saying what is wrong.
func parseCls(b []byte) (int64, error) {
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("label %q is not a non-negative integer (%s)", b, clsForm)
	}
	if v >= maxClasses {
		return 0, fmt.Errorf("label %d is over the limit of %d classes", v, maxClasses)
	}
	return v, nil
}

// maxClasses bounds WebDataset labels: the classes are "0".."max", one
// string each, so a label of 10^11 in a .cls would otherwise cost a
// hundred billion of them at Open.
const maxClasses = 1 << 20

type wdsSample struct {
	shard int32
	// noImage: a key of an unlabelled dataset without an image (name is
	// the key); reading it fails, naming what it has.
	noImage bool
	label   int64
	offset  int64
	size    int64
	name    string
	hash    []byte // SHA-256 of its bytes, where the scan hashed them
}

// wdsScanned is a key of a shard as scanShard found it: its image (if
// any), whether it has a label, and its other members.
type wdsScanned struct {
	wdsSample
	hasCls bool
	// clsOff and clsSize are its .cls member's bytes in the shard.
	clsOff, clsSize int64
	members         []wdsMember
	// images are a record's numbered images (KEY.0.jpg, KEY.1.jpg, ...)
	// in their order, the first its image above; none for a key of one
	// plain image (KEY.jpg).
	images []wdsImage
}

// wdsMember is a member of a key that is not its image or its label: a
// field.
type wdsMember struct {
	ext       string
	off, size int64
}

// OpenWebDataset indexes the shard at path, or every *.tar in the directory
// at path (names starting with a dot, such as macOS's "._x.tar", are not
// shards). Shards in a directory are opened through an os.Root, so a
// symbolic link among them that leads out of the directory is refused, as
// is any *.tar that is not a regular file (a FIFO, a directory): the whole
// Open fails rather than serve part of the data.
func OpenWebDataset(path string) (*WebDataset, error) { return openWebDataset(path, nil) }

// openWebDataset is OpenWebDataset, reporting the shards read to progress
// (when not nil).
func openWebDataset(path string, progress func(IndexProgress)) (*WebDataset, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var (
		names []string
		open  func(name string) (*os.File, error)
	)
	// Non-blocking, so a FIFO named *.tar is refused below instead of
	// blocking the open until a writer comes.
	const flags = os.O_RDONLY | syscall.O_NONBLOCK
	if st.IsDir() {
		root, err := os.OpenRoot(path)
		if err != nil {
			return nil, err
		}
		// Shards opened from the root stay open after it closes.
		defer root.Close()
		ents, err := fs.ReadDir(root.FS(), ".") // sorted by name
		if err != nil {
			return nil, err
		}
		var all []string
		for _, e := range ents {
			all = append(all, e.Name())
			if strings.HasSuffix(e.Name(), ".tar") && !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
		if z := compressedShards(all); len(z) > 0 {
			return nil, errCompressedShards(path, z)
		}
		open = func(name string) (*os.File, error) {
			f, err := root.OpenFile(name, flags, 0)
			if err != nil {
				return nil, openError(root, name, "dataset directory", err)
			}
			return f, nil
		}
	} else {
		names = []string{filepath.Base(path)}
		if compressedTool(path) != "" {
			return nil, errCompressedShards(path, names)
		}
		open = func(string) (*os.File, error) {
			f, err := os.OpenFile(path, flags, 0)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Base(path), stripPath(err))
			}
			return f, nil
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no .tar shards in %s", ErrUnsupported, path)
	}
	d := &WebDataset{maxSize: DefaultMaxFileSize}
	var scans [][]wdsScanned
	for si, name := range names {
		f, err := open(name)
		if err != nil {
			d.Close()
			return nil, err
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			d.Close()
			return nil, fmt.Errorf("%w: shard %s is not a regular file", ErrUnsupported, name)
		}
		d.shards = append(d.shards, f)
		d.names = append(d.names, name)
		got, err := indexShard(f, int32(si), name)
		if err != nil {
			d.Close()
			return nil, err
		}
		scans = append(scans, got)
		if progress != nil {
			progress(IndexProgress{Phase: "scan", Done: si + 1, Total: len(names)})
		}
	}
	t := &fieldTable{}
	ws := wdsFields{t: t, imageExts: map[string]bool{}}
	labelled, err := wdsSamples(scans, d.names, path, func(s *wdsScanned) error {
		if len(d.samples) == 0 || d.samples[len(d.samples)-1].shard != s.shard {
			d.starts = append(d.starts, len(d.samples))
		}
		d.samples = append(d.samples, s.wdsSample)
		if _, ext, ok := keyOfMember(s.name); ok && !s.noImage && !ws.imageExts[ext] {
			if _, err := t.intern(ext); err != nil {
				return err
			}
			ws.imageExts[ext] = true
		}
		for _, m := range s.members {
			if err := t.add(m.ext, m.off, m.size); err != nil {
				return err
			}
		}
		t.next()
		return nil
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	ws.labelled = labelled
	d.fields = ws
	if d.recs, err = groupRecords(len(d.samples), func(i int) int32 { return d.samples[i].shard },
		func(i int) string { return d.samples[i].name }); err != nil {
		d.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnsupported, path, err) // the scan placed them: not reached
	}
	h := newIndexHash("webdataset", nil)
	maxLabel := int64(-1)
	for _, s := range d.samples {
		maxLabel = max(maxLabel, s.label)
		h.add(d.names[s.shard]+"/"+s.name, s.size, s.label)
	}
	for i := int64(0); i <= maxLabel; i++ {
		d.classes = append(d.classes, strconv.FormatInt(i, 10))
	}
	d.fp = h.sum()
	return d, nil
}

// wdsSamples decides a WebDataset's samples from its shards' scans (in
// shard order), calling add for each sample in index order: labelled
// when any image has a .cls (every image must then have one, and a key
// without an image is no sample, as it always was), unlabelled otherwise
// (every key is a sample, label -1). A dataset without an image is
// refused; what names it in that message.
func wdsSamples(scans [][]wdsScanned, shards []string, what string, add func(*wdsScanned) error) (labelled bool, err error) {
	images := 0
	for _, sc := range scans {
		for i := range sc {
			if !sc[i].noImage {
				images++
				labelled = labelled || sc[i].hasCls
			}
		}
	}
	if images == 0 {
		return false, fmt.Errorf("%w: no samples (key.jpg|jpeg|png|webp, with key.cls for a labelled dataset) in %s", ErrUnsupported, what)
	}
	for si, sc := range scans {
		for i := range sc {
			s := &sc[i]
			switch {
			case labelled && s.noImage:
				continue
			case labelled && !s.hasCls:
				return labelled, errNoLabel(shards[si], s.key(), s.name)
			case !labelled:
				s.label = -1
			}
			if len(s.images) == 0 {
				if err := add(s); err != nil {
					return labelled, err
				}
				continue
			}
			// A record: each of its images a sample, with the record's
			// label and fields.
			for _, im := range s.images {
				one := *s
				one.offset, one.size, one.name, one.hash = im.offset, im.size, im.name, im.hash
				if err := add(&one); err != nil {
					return labelled, err
				}
			}
		}
	}
	return labelled, nil
}

// key is the sample's key.
func (s *wdsSample) key() string {
	if s.noImage {
		return s.name
	}
	key, _, _ := keyOfMember(s.name)
	return key
}

// Len implements Dataset.
func (d *WebDataset) Len() int { return len(d.samples) }

// Label implements Dataset.
func (d *WebDataset) Label(i int) int64 { return d.samples[i].label }

// Classes implements Dataset.
func (d *WebDataset) Classes() []string { return d.classes }

// Name implements Dataset.
func (d *WebDataset) Name(i int) string {
	s := &d.samples[i]
	return d.names[s.shard] + "/" + s.name
}

// Fingerprint implements Dataset.
func (d *WebDataset) Fingerprint() string { return d.fp }

// ShardStarts implements Sharded: samples are indexed shard by shard, in
// name order, so each shard's samples are a run of indices. A shard with no
// samples has no entry.
func (d *WebDataset) ShardStarts() []int { return d.starts }

// Read implements Dataset.
func (d *WebDataset) Read(i int, buf []byte) ([]byte, error) {
	if i < 0 || i >= len(d.samples) {
		return nil, fmt.Errorf("%w: sample index %d out of range [0, %d)", ErrUnsupported, i, len(d.samples))
	}
	s := &d.samples[i]
	if s.noImage {
		return nil, d.errNoImage(i)
	}
	return readCapped(io.NewSectionReader(d.shards[s.shard], s.offset, s.size), s.size, d.maxSize, d.Name(i), buf)
}

// errNoImage is the error of reading a key without an image.
func (d *WebDataset) errNoImage(i int) error {
	var exts []string
	for k := range d.fields.t.entries(i) {
		e, _, _ := d.fields.t.entry(i, k)
		exts = append(exts, e)
	}
	return errNoImage(d.Name(i), exts)
}

// errNoImage fails a sample that has members (exts) but no image.
func errNoImage(name string, exts []string) error {
	return fmt.Errorf("%w: sample %s has no image (.jpg, .jpeg, .png or .webp), only %s", ErrUnsupported, name, strings.Join(exts, ", "))
}

var _ Fielded = (*WebDataset)(nil)

// FieldID implements Fielded: "__key__", the members' extensions
// ("txt", "json", an image's own), and "cls" in a labelled dataset.
func (d *WebDataset) FieldID(name string) (int, bool) { return d.fields.fieldID(name) }

// FieldNames implements Fielded.
func (d *WebDataset) FieldNames() []string { return d.fields.fieldNames() }

// FieldSize implements Fielded.
func (d *WebDataset) FieldSize(i, id int) int64 {
	s := &d.samples[i]
	return d.fields.size(i, id, s.name, s.size, s.label)
}

// ReadField implements Fielded: a member's bytes, read from its shard
// (capped by the file cap, as an image is).
func (d *WebDataset) ReadField(i, id int, buf []byte) ([]byte, error) {
	s := &d.samples[i]
	if b, ok := d.fields.inline(id, s.name, s.label, buf); ok {
		return b, nil
	}
	off, size, ok := d.fields.where(i, id, s.name, s.offset, s.size)
	if !ok {
		return nil, fmt.Errorf("%w: sample %s has no such field", ErrUnsupported, d.Name(i))
	}
	return readCapped(io.NewSectionReader(d.shards[s.shard], off, size), size, d.maxSize, d.Name(i), buf)
}

// Close implements Dataset.
func (d *WebDataset) Close() error {
	for _, f := range d.shards {
		f.Close()
	}
	return nil
}

// errNoLabel refuses a sample whose image has no label beside it. The
// image is not at fault (ErrCorrupt would say it is): the dataset lacks
// what says its class, and serving it without one would train on a guess.
func errNoLabel(shard, key, image string) error {
	return fmt.Errorf("%w: shard %s: sample %s has an image (%s) but no label: a WebDataset sample's label is a "+
		"member %s.cls beside it in the same shard, holding its class index as decimal text (e.g. 7); "+
		"add a .cls member for every image (webdataset's TarWriter writes one from a sample's \"cls\" key), "+
		"or none at all for a dataset without classes (captions: its labels are then -1)",
		ErrUnsupported, shard, key, image, key)
}

// FileSize implements FileSizer: the tar member's size.
func (d *WebDataset) FileSize(i int) (int64, bool) {
	if i < 0 || i >= len(d.samples) || d.samples[i].noImage {
		return 0, false
	}
	return capped(d.samples[i].size, d.maxSize), true
}
