package dataset

// A YOLO dataset's manifest (layout yolo, format version 6): a YOLO
// dataset in object storage has one label file an image, each a request
// at start (100 000 images at 20 ms and 8 at once: four minutes before the
// first batch). Its manifest holds, beside the images (as a COCO
// manifest's), every image's label file: its bytes, size and version, so
// that a server opens the dataset with one read of the manifest, a few
// look-ups to see it is fresh, and no request a label file.
//
// In the file, after the annotations' hash (the dataset YAML's):
//
//	labels: count (the samples'), then each sample's label file:
//	        1 if it has one (else 0, and nothing more), its size, its
//	        version, then its bytes (a varint length, then them; none
//	        when it is over annot.MaxLabelFile, its image's error)

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// manifestVersionYOLO is a YOLO manifest's format version; the others are
// written as before.
const manifestVersionYOLO = 6

func (m *Manifest) encodeLabels(e *encoder) {
	e.uint(uint64(len(m.labels)))
	for _, l := range m.labels {
		if !l.has {
			e.uint(0)
			continue
		}
		e.uint(1)
		e.uint(uint64(l.obj.Size))
		e.str(l.obj.Version)
		e.uint(uint64(len(l.data)))
		e.w.Write(l.data)
	}
}

// labels reads a YOLO manifest's label files, each bounded by
// annot.MaxLabelFile and by the bytes left.
func (d *decoder) labels(m *Manifest) {
	n := d.count("label files", 1)
	m.labels = make([]yoloLabel, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		var l yoloLabel
		if l.has = d.int("label file", 1) == 1; l.has {
			l.obj.Size = d.int("label file size", math.MaxInt64)
			l.obj.Version = d.string()
			size := d.int("label bytes", annot.MaxLabelFile)
			if d.err == nil && size > d.left {
				d.fail("label file of %d bytes, %d left", size, d.left)
			}
			if d.err == nil && size > 0 {
				l.data = make([]byte, size)
				if _, err := io.ReadFull(d.r, l.data); err != nil {
					d.fail("body cut short: %v", err)
				}
				d.left -= size
			}
		}
		m.labels = append(m.labels, l)
	}
}

// checkLabels holds a YOLO manifest to one label file a sample, each
// whole (its bytes its size) or, over annot.MaxLabelFile, without its
// bytes; the others have none.
func (m *Manifest) checkLabels() error {
	if m.Layout != LayoutYOLO {
		if m.labels != nil {
			return fmt.Errorf("%w: a %s manifest with label files", ErrManifest, m.Layout)
		}
		return nil
	}
	if len(m.labels) != m.Len() {
		return fmt.Errorf("%w: %d label files for %d images", ErrManifest, len(m.labels), m.Len())
	}
	for i, l := range m.labels {
		switch {
		case !l.has && (l.obj.Size != 0 || l.data != nil):
			return fmt.Errorf("%w: image %d has no label file, yet its bytes", ErrManifest, i)
		case l.has && l.obj.Size <= annot.MaxLabelFile && int64(len(l.data)) != l.obj.Size:
			return fmt.Errorf("%w: image %d's label file of %d bytes holds %d", ErrManifest, i, l.obj.Size, len(l.data))
		case l.has && l.obj.Size > annot.MaxLabelFile && l.data != nil:
			return fmt.Errorf("%w: image %d's label file is over %d bytes, yet its bytes are there", ErrManifest, i, annot.MaxLabelFile)
		}
	}
	return nil
}

// yoloFingerprint is the fingerprint of the YOLO dataset m describes, as
// YOLODataset computes it over the same YAML, images and label files.
func (m *Manifest) yoloFingerprint() string {
	h := newIndexHash(LayoutYOLO, m.Classes)
	sum, _ := hex.DecodeString(m.AnnotationsSHA256)
	h.str(string(sum))
	for i := range m.Len() {
		l := yoloLabel{}
		if i < len(m.labels) {
			l = m.labels[i]
		}
		hashLabel(h, m.key(i), m.objs.sizes[i], &l)
	}
	return h.sum()
}

// hashLabel adds the image key (of size bytes) with its label file l to h.
func hashLabel(h indexHash, key string, size int64, l *yoloLabel) {
	var sum [sha256.Size]byte
	switch {
	case !l.has:
		h.add(key, size, -1)
		return
	case l.obj.Size > annot.MaxLabelFile:
		sum = sha256.Sum256([]byte("version " + l.obj.Version))
	default:
		sum = sha256.Sum256(l.data)
	}
	h.add(key+"\x00"+string(sum[:]), size, l.obj.Size)
}

// openYOLOManifest opens the YOLO dataset in the store at dir, of the
// dataset YAML raw (named yamlName), from the manifest o names or the one
// beside the images; ok is false, without an error, when none is named
// and none is beside them, or the one beside them is of another dataset.
// The images are checked fresh as a manifest's are (checkFresh), and a
// few label files, spread over them, by their versions: one changed or
// gone refuses the manifest (its labels would be served as indexed).
func openYOLOManifest(ctx context.Context, dir, yamlName string, raw []byte, o sourceOptions) (_ *YOLODataset, ok bool, err error) {
	st, m, where, err := loadAnnotatedManifest(ctx, dir, o)
	if err != nil || m == nil {
		return nil, false, err
	}
	defer func() {
		if !ok || err != nil {
			st.Close()
		}
	}()
	ysum := sha256.Sum256(raw)
	sum := hex.EncodeToString(ysum[:])
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s (run `stoker index %s --annotations YAML` again)", ErrManifest, where, fmt.Sprintf(format, a...), dir)
	}
	if o.manifest == "" && (m.Layout != LayoutYOLO || m.AnnotationsSHA256 != sum) {
		o.log.Info("the manifest beside the images is of another dataset: listing them", "manifest", where)
		return nil, false, nil
	}
	cfg, err := annot.ParseYOLOConfig(yamlName, raw)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	switch {
	case m.Layout != LayoutYOLO:
		return nil, false, bad("a manifest of a %s dataset, not of a YOLO dataset's images", m.Layout)
	case m.AnnotationsSHA256 != sum:
		return nil, false, bad("made with another dataset YAML (SHA-256 %s; %s's is %s)", m.AnnotationsSHA256, yamlName, sum)
	case !slices.Equal(m.Classes, cfg.Names):
		return nil, false, bad("classes %v, the YAML's %v", m.Classes, cfg.Names)
	case m.Len() == 0:
		return nil, false, bad("no images")
	}
	if err := checkOwner(m, st, dir, o.manifest != ""); err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrManifest, where, err)
	}
	if err := checkFresh(ctx, st, m, where, o.log); err != nil {
		return nil, false, err
	}
	objs := make([]source.Object, m.Len())
	files, sizes := make([]string, m.Len()), make([]int64, m.Len())
	for i := range objs {
		objs[i] = m.Object(i)
		files[i], sizes[i] = objs[i].Key, objs[i].Size
	}
	d, h := newYOLODataset(cfg, raw, files, sizes)
	if !slices.Equal(d.files, files) {
		return nil, false, bad("its images are not in path order")
	}
	d.dir = st.String()
	urls, root := d.labelURLs()
	ls := m.labels
	for i := range ls {
		ls[i].obj.Key = urls[i][len(root)+1:]
	}
	if err := checkLabelsFresh(ctx, root, ls, o); err != nil {
		return nil, false, bad("%v", err)
	}
	d.setStoreLabels(&h, ls)
	if d.fp = h.sum(); d.fp != m.Fingerprint() {
		return nil, false, bad("its fingerprint is not its dataset's")
	}
	if d.imgs, err = newStoreImages(st, o.ranges(st), objs); err != nil {
		return nil, false, err
	}
	d.imgs.stale = "the manifest " + where + " is stale: run `stoker index " + dir + " --annotations YAML` again"
	o.log.Info("YOLO images and labels opened from their manifest", "source", dir, "manifest", where, "images", m.Len())
	return d, true, nil
}

// checkLabelsFresh looks up a few of the label files ls (spread over
// them; Key relative to root): one changed or gone since it was indexed
// is an error.
func checkLabelsFresh(ctx context.Context, root string, ls []yoloLabel, o sourceOptions) error {
	var has []int
	for i := range ls {
		if ls[i].has {
			has = append(has, i)
		}
	}
	k := min(len(has), freshChecks)
	if k == 0 {
		return nil
	}
	lst, err := source.Open(ctx, root, o.store...)
	if err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	defer lst.Close()
	bad := make([]error, k)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for j := range k {
		want := ls[has[j*len(has)/k]].obj
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			got, err := lst.Stat(ctx, want.Key)
			if err != nil {
				bad[j] = fmt.Errorf("label file %s: %w", want.Key, err)
				return
			}
			if want.Version == "" {
				// A store's version is what tells other bytes apart: a
				// label file without one cannot be held to the index.
				bad[j] = fmt.Errorf("label file %s has no version (ETag or generation)", want.Key)
				return
			}
			bad[j] = changed(want, got)
		})
	}
	wg.Wait()
	for _, err := range bad {
		if err != nil {
			return fmt.Errorf("a label file changed since it was indexed: %w", err)
		}
	}
	return nil
}

// indexYOLO is IndexAnnotated's manifest of the YOLO dataset of the
// images in the store at dir, with the dataset YAML at ann: its images and
// every label file listed and read as a start without a manifest reads
// them.
func indexYOLO(ctx context.Context, dir, ann string, opts []SourceOption) (*Manifest, error) {
	if !source.IsRemote(dir) {
		return nil, fmt.Errorf("%w: %s: a YOLO dataset on a disk is not indexed: its label files are read from the disk at start, faster than from a manifest; index it in its bucket", ErrUnsupported, dir)
	}
	ds, err := OpenAnnotatedSource(ctx, dir, ann, append(opts, func(o *sourceOptions) { o.manifest, o.keepLabels = "", true })...)
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	d := ds.(*YOLODataset)
	m := &Manifest{Layout: LayoutYOLO, Classes: d.cfg.Names, AnnotationsSHA256: d.yamlSum, Root: d.imgs.st.String(), labels: d.read}
	for _, obj := range d.imgs.objs {
		m.AddSample(ManifestSample{Object: m.AddObject(obj), Size: obj.Size, Label: -1})
	}
	for _, l := range m.labels {
		if l.has && l.obj.Version == "" {
			return nil, fmt.Errorf("%w: %s gives the label file %s no version (ETag or generation): a manifest could not tell it changed", ErrUnsupported, dir, l.obj.Key)
		}
	}
	if err := sizeIndexed(ctx, m, opts, d.imgs.st.NewReader); err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	if m.Fingerprint() != d.Fingerprint() {
		return nil, fmt.Errorf("index %s: the manifest's fingerprint is not the dataset's", dir)
	}
	return m, nil
}
