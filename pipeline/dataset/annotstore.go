package dataset

// Annotated datasets (COCO, YOLO) whose images, annotations file or label
// files are in object storage: listed once at start, each image read at
// its listed version through the server's Ranges (byte cache, read-ahead).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// OpenAnnotatedSource opens the images at dir, a local directory or an
// s3://, gs://, azblob:// URL of the prefix that holds them, with the
// annotations at ann, a local file or such a URL: a YOLO dataset YAML
// (.yaml, .yml) or a COCO annotations file, read as OpenAnnotated reads
// them, with the same samples, fields, targets and fingerprint as the
// same files on a disk. A COCO image's object is DIR/file_name, its key
// exactly the file's file_name; a YOLO image's label file is its
// annot.LabelPath within the bucket, every one listed and read at start.
// Each image is read at the version listed at start (an object replaced
// since is its sample's error, never other bytes), through the Ranges of
// WithRanges. Both local: OpenAnnotated.
//
// A COCO dataset, or a YOLO dataset in a bucket, may have a manifest
// (IndexAnnotated, `stoker index DIR --annotations FILE`): named by
// WithManifest, or beside the images (DIR/.stoker/manifest); the images
// are then not listed or looked up at start, and a YOLO dataset's label
// files not read (the manifest holds them: manifest_yolo.go). A named
// manifest made with other annotations (another SHA-256) is refused; one
// beside the images is then passed over (COCO's instances and
// person_keypoints files name the same images). A YOLO dataset on a disk
// has none: its label files are read from the disk at start.
func OpenAnnotatedSource(ctx context.Context, dir, ann string, opts ...SourceOption) (Dataset, error) {
	o := newSourceOptions(opts)
	if isConversations(ctx, ann, o) { // a JSON list: LLaVA's or ShareGPT's (convdataset.go)
		max, over := cocoFileBound(o.annBudget)
		return openConversations(ctx, dir, ann, max, over, o, true)
	}
	yolo := isYOLOConfig(ann)
	if yolo && o.manifest != "" && !source.IsRemote(dir) {
		return nil, fmt.Errorf("%w: manifest %s: a YOLO dataset on a disk has no manifest: its label files are read from the disk at start; serve it without one", ErrUnsupported, o.manifest)
	}
	beside := false
	if !yolo && o.manifest == "" && !source.IsRemote(dir) {
		_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(ManifestName)))
		beside = err == nil
	}
	if !source.IsRemote(dir) && !source.IsRemote(ann) && o.manifest == "" && !beside {
		if yolo {
			return OpenYOLO(dir, ann)
		}
		return openCOCO(dir, ann, o.annBudget)
	}
	name := path.Base(ann)
	if yolo {
		rc, err := openAnnotationsFile(ctx, ann, o, MaxDatasetYAML, " allowed")
		if err != nil {
			return nil, err
		}
		raw, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("annotations %s: %w", ann, err)
		}
		if !source.IsRemote(dir) {
			return yoloInDir(dir, name, raw)
		}
		if !o.keepLabels { // IndexAnnotated lists and reads them all
			d, ok, err := openYOLOManifest(ctx, dir, name, raw, o)
			if err != nil {
				return nil, err
			}
			if ok {
				return d, nil
			}
		}
		return openYOLOStore(ctx, dir, name, raw, o)
	}
	max, over := cocoFileBound(o.annBudget)
	rc, err := openAnnotationsFile(ctx, ann, o, max, over)
	if err != nil {
		return nil, err
	}
	c, sum, err := parseCOCO(name, rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	if o.manifest != "" || beside || source.IsRemote(dir) {
		d, ok, err := openCOCOManifest(ctx, dir, name, c, sum, o)
		if ok || err != nil {
			return d, err
		}
	}
	if !source.IsRemote(dir) {
		return cocoInDir(dir, name, c, sum)
	}
	return openCOCOStore(ctx, dir, name, c, sum, o)
}

// openCOCOManifest opens the COCO dataset of c (its file's SHA-256 sum)
// from the manifest o names or the one beside the images at dir; ok is
// false, without an error, when none is named and none is beside them.
func openCOCOManifest(ctx context.Context, dir, annName string, c *annot.COCO, sum string, o sourceOptions) (_ *COCODataset, ok bool, err error) {
	st, m, where, err := loadAnnotatedManifest(ctx, dir, o)
	if err != nil || m == nil {
		return nil, false, err
	}
	defer func() {
		if !ok || err != nil {
			st.Close()
		}
	}()
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s (run `stoker index %s --annotations FILE` again)", ErrManifest, where, fmt.Sprintf(format, a...), dir)
	}
	if o.manifest == "" && (m.Layout != LayoutCOCO || m.AnnotationsSHA256 != sum) {
		// Beside the images, of other annotations (COCO's instances and
		// person_keypoints files name the same images): not this one's.
		o.log.Info("the manifest beside the images is of other annotations: listing them", "manifest", where)
		return nil, false, nil
	}
	switch {
	case m.Layout != LayoutCOCO:
		return nil, false, bad("a manifest of a %s dataset, not of a COCO dataset's images", m.Layout)
	case m.AnnotationsSHA256 != sum:
		return nil, false, bad("made with other annotations (SHA-256 %s; the file's is %s)", m.AnnotationsSHA256, sum)
	case m.Len() != c.Len():
		return nil, false, bad("%d images, the annotations name %d", m.Len(), c.Len())
	}
	if err := checkOwner(m, st, dir, o.manifest != ""); err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrManifest, where, err)
	}
	for i := range c.Len() {
		if m.key(i) != c.Image(i).FileName {
			return nil, false, bad("image %d is %s, the annotations' %s", i, m.key(i), c.Image(i).FileName)
		}
	}
	if err := checkFresh(ctx, st, m, where, o.log); err != nil {
		return nil, false, err
	}
	d, _ := newCOCODataset(c, annName, sum)
	objs := make([]source.Object, m.Len())
	for i := range objs {
		objs[i] = m.Object(i)
		d.sizes[i] = objs[i].Size
	}
	d.fp = m.Fingerprint()
	if source.IsRemote(dir) {
		if d.imgs, err = newStoreImages(st, o.ranges(st), objs); err != nil {
			return nil, false, err
		}
		d.imgs.stale = "the manifest " + where + " is stale: run `stoker index " + dir + " --annotations FILE` again"
	} else {
		st.Close()
		if d.root, err = os.OpenRoot(dir); err != nil {
			return nil, false, err
		}
	}
	o.log.Info("COCO images opened from their manifest", "source", dir, "manifest", where, "images", m.Len())
	return d, true, nil
}

// IndexAnnotated indexes the COCO dataset of the images at dir (a local
// directory or a store's URL) with the annotations at ann, as
// OpenAnnotatedSource opens it: a manifest of layout coco listing each
// image's object in sample order, with the annotations file's SHA-256, so
// that its fingerprint is the dataset's and a changed annotations file
// refuses it. A YOLO dataset's (in a bucket) lists its images with their
// label files' bytes and versions, and its YAML's SHA-256 (indexYOLO). A
// YOLO dataset on a disk or a member's annotations are refused, saying
// why.
func IndexAnnotated(ctx context.Context, dir, ann string, opts ...SourceOption) (*Manifest, error) {
	if _, ok := MemberAnnotations(ann); ok {
		return nil, fmt.Errorf("%w: annotations %s are in the shards: index them without --annotations (the shards' manifest covers their members)", ErrUnsupported, ann)
	}
	if isYOLOConfig(ann) {
		return indexYOLO(ctx, dir, ann, opts)
	}
	if isConversations(ctx, ann, newSourceOptions(opts)) {
		return indexConversations(ctx, dir, ann, opts)
	}
	ds, err := OpenAnnotatedSource(ctx, dir, ann, append(opts, func(o *sourceOptions) { o.manifest = "" })...)
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	d := ds.(*COCODataset)
	if d.rel != nil {
		return nil, fmt.Errorf("%w: index %s: the annotations give absolute file_names, which a manifest (keyed by the path under the directory) does not take: serve the dataset without one, or give file_names relative to it", ErrUnsupported, dir)
	}
	m := &Manifest{Layout: LayoutCOCO, Classes: d.classes, AnnotationsSHA256: d.annSum}
	if d.imgs != nil {
		m.Root = d.imgs.st.String()
		for _, obj := range d.imgs.objs {
			m.AddSample(ManifestSample{Object: m.AddObject(obj), Size: obj.Size, Label: -1})
		}
	} else {
		if m.Root, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
		for i := range d.Len() {
			fi, err := d.root.Stat(d.Name(i))
			if err != nil {
				return nil, err
			}
			obj := source.Object{Key: d.Name(i), Size: fi.Size(), ModTime: fi.ModTime()}
			m.AddSample(ManifestSample{Object: m.AddObject(obj), Size: obj.Size, Label: -1})
		}
	}
	open := rootOpener(d.root)
	if d.imgs != nil {
		open = d.imgs.st.NewReader
	}
	if err := sizeIndexed(ctx, m, opts, open); err != nil {
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

// isConversations reports whether the annotations at ann (a local file
// or an object's URL) are a conversation file: a JSON list.
func isConversations(ctx context.Context, ann string, o sourceOptions) bool {
	if source.IsRemote(ann) {
		return isConversationObject(ctx, ann, o)
	}
	return IsConversationFile(ann)
}

// openAnnotationsFile opens the annotations at loc, a local file
// (openLocalFile) or an object's URL, of at most max bytes (over: the
// words after the bound in the message of a larger one), for one
// sequential read.
func openAnnotationsFile(ctx context.Context, loc string, o sourceOptions, max int64, over string) (io.ReadCloser, error) {
	if !source.IsRemote(loc) {
		rc, err := openLocalFile(loc, "annotations "+loc, max, over)
		if err != nil {
			return nil, fmt.Errorf("annotations: %w", err)
		}
		return rc, nil
	}
	st, obj, err := openAnnotationsObject(ctx, loc, o, max, over)
	if err != nil {
		return nil, err
	}
	rc, err := st.NewReader(ctx, obj, 0)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("annotations %s: %w", loc, err)
	}
	return &storeFile{Reader: io.LimitReader(rc, obj.Size), rc: rc, st: st}, nil
}

// openAnnotationsObject opens the store of the annotations object at the
// URL loc and looks it up (its version, to read it at), refusing one of
// more than max bytes (over: the words after the bound).
func openAnnotationsObject(ctx context.Context, loc string, o sourceOptions, max int64, over string) (source.Store, source.Object, error) {
	if u, err := url.Parse(loc); err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		// Never echoed: what follows the scheme may be a credential.
		scheme, _, _ := strings.Cut(loc, "://")
		return nil, source.Object{}, fmt.Errorf("annotations %s://...: an annotations URL takes no user, query or fragment (credentials come from the provider's standard chain)", scheme)
	}
	dir, base := splitURL(loc)
	if base == "" || strings.HasSuffix(dir, ":/") {
		return nil, source.Object{}, fmt.Errorf("annotations %s: want a file's URL, SCHEME://BUCKET/PATH/NAME", loc)
	}
	// The store outlives ctx: a conversation file's records are read from
	// it as batches ask.
	st, err := source.Open(context.WithoutCancel(ctx), dir, o.store...)
	if err != nil {
		return nil, source.Object{}, fmt.Errorf("annotations %s: %w", loc, err)
	}
	obj, err := st.Stat(ctx, base)
	if err == nil && obj.Size > max {
		err = fmt.Errorf("%w: %d bytes, over the %d%s", ErrTooLarge, obj.Size, max, over)
	}
	if err != nil {
		st.Close()
		return nil, source.Object{}, fmt.Errorf("annotations %s: %w", loc, err)
	}
	return st, obj, nil
}

// storeFile is an object read as a stream; closing it closes its store.
type storeFile struct {
	io.Reader
	rc io.ReadCloser
	st source.Store
}

func (f *storeFile) Close() error { return errors.Join(f.rc.Close(), f.st.Close()) }

// openCOCOStore is the dataset of c (its file's SHA-256 sum) with its
// images in the store at dirURL: each image the object whose key is its
// file_name, found by one listing.
func openCOCOStore(ctx context.Context, dirURL, annName string, c *annot.COCO, sum string, o sourceOptions) (*COCODataset, error) {
	start := time.Now()
	// The store outlives ctx, as OpenSource's does.
	st, err := source.Open(context.WithoutCancel(ctx), dirURL, o.store...)
	if err != nil {
		return nil, err
	}
	want := make(map[string]int, c.Len())
	for i := range c.Len() {
		want[c.Image(i).FileName] = i
	}
	objs := make([]source.Object, c.Len())
	found := make([]bool, c.Len())
	listed := 0
	err = st.List(ctx, "", func(obj source.Object) error {
		listed++
		if i, ok := want[obj.Key]; ok {
			objs[i], found[i] = obj, true
		}
		return nil
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	var missing []string
	for i, ok := range found {
		if !ok {
			missing = append(missing, c.Image(i).FileName)
		}
	}
	if len(missing) > 0 {
		st.Close()
		return nil, errMissingImages(missing, c.Len(), annName, st.String())
	}
	d, ix := newCOCODataset(c, annName, sum)
	for i := range objs {
		d.sizes[i] = objs[i].Size
		ix.add(objs[i].Key, objs[i].Size, -1)
	}
	d.fp = ix.sum()
	if d.imgs, err = newStoreImages(st, o.ranges(st), objs); err != nil {
		st.Close()
		return nil, err
	}
	o.log.Info("COCO images listed", "source", st.String(), "images", len(objs), "objects", listed, "took", time.Since(start).Round(time.Millisecond))
	return d, nil
}

// openYOLOStore is the YOLO dataset of the images in the store at dirURL
// (every image key below it, sorted), with the dataset YAML raw and each
// image's label file read from the bucket at start.
func openYOLOStore(ctx context.Context, dirURL, yamlName string, raw []byte, o sourceOptions) (*YOLODataset, error) {
	start := time.Now()
	cfg, err := annot.ParseYOLOConfig(yamlName, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	st, err := source.Open(context.WithoutCancel(ctx), dirURL, o.store...)
	if err != nil {
		return nil, err
	}
	byKey := map[string]source.Object{}
	var files []string
	var sizes []int64
	err = st.List(ctx, "", func(obj source.Object) error {
		if imageKey(obj.Key) {
			byKey[obj.Key] = obj
			files, sizes = append(files, obj.Key), append(sizes, obj.Size)
		}
		return nil
	})
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%w: no images under %s", ErrUnsupported, st)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	d, h := newYOLODataset(cfg, raw, files, sizes)
	d.dir = st.String()
	objs := make([]source.Object, len(d.files))
	for i, f := range d.files {
		objs[i] = byKey[f]
	}
	ls, err := d.readStoreLabels(ctx, o)
	if err != nil {
		st.Close()
		return nil, err
	}
	d.setStoreLabels(&h, ls)
	d.fp = h.sum()
	if o.keepLabels {
		d.read = ls
	}
	if d.imgs, err = newStoreImages(st, o.ranges(st), objs); err != nil {
		st.Close()
		return nil, err
	}
	o.log.Info("YOLO images listed and labels read", "source", st.String(), "images", len(objs), "took", time.Since(start).Round(time.Millisecond))
	return d, nil
}

// labelURL is the URL of the label file of the image key in the store at
// dirURL: annot.LabelPath of the image's path within its bucket (the
// bucket's name is no path component).
func labelURL(dirURL, key string) string {
	scheme, rest, _ := strings.Cut(dirURL, "://")
	bucket, prefix, _ := strings.Cut(rest, "/")
	p := "/" + key
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		p = "/" + prefix + p
	}
	return scheme + "://" + bucket + annot.LabelPath(p)
}

// yoloLabel is an image's label file as listed and read: its object in
// the labels' store (none: the image has no instances) and its bytes (nil
// when over annot.MaxLabelFile: its image's error, unread).
type yoloLabel struct {
	obj  source.Object
	has  bool
	data []byte
}

// labelURLs sets d.lnames and says the label files' URLs (labelURL) and
// their common directory.
func (d *YOLODataset) labelURLs() (urls []string, root string) {
	urls = make([]string, len(d.files))
	d.lnames = make([]string, len(d.files))
	for i, f := range d.files {
		urls[i] = labelURL(d.dir, f)
		d.lnames[i] = labelName(d.dir, urls[i])
	}
	root = urls[0][:strings.LastIndexByte(urls[0], '/')]
	for _, u := range urls[1:] {
		for !strings.HasPrefix(u, root+"/") {
			root = root[:strings.LastIndexByte(root, '/')]
		}
	}
	return urls, root
}

// readStoreLabels reads every image's label file (labelURL) from the
// bucket: the label files' common directory is listed once and each file
// there read, o.index.Concurrency at once; an image without one has no
// instances, as on a disk. A label file over annot.MaxLabelFile is its
// image's error, unread.
func (d *YOLODataset) readStoreLabels(ctx context.Context, o sourceOptions) ([]yoloLabel, error) {
	n := len(d.files)
	urls, root := d.labelURLs()
	lst, err := source.Open(ctx, root, o.store...)
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	defer lst.Close()
	want := make(map[string]int, n)
	for i, u := range urls {
		want[u[len(root)+1:]] = i
	}
	ls := make([]yoloLabel, n)
	if err := lst.List(ctx, "", func(obj source.Object) error {
		if i, ok := want[obj.Key]; ok {
			ls[i].obj, ls[i].has = obj, true
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	sem := make(chan struct{}, o.index.concurrency())
	for i := range n {
		if !ls[i].has || ls[i].obj.Size > annot.MaxLabelFile {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			data := make([]byte, ls[i].obj.Size)
			if err := lst.ReadRange(ctx, ls[i].obj, 0, data); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("labels of %s: %s: %w", d.files[i], d.lnames[i], err)
				}
				mu.Unlock()
				return
			}
			ls[i].data = data
		})
	}
	wg.Wait()
	return ls, first
}

// setStoreLabels sets each image's labels from its label file as read
// (readStoreLabels, or a manifest's), and adds each image with its label
// file's SHA-256 to h in the images' order.
func (d *YOLODataset) setStoreLabels(h *indexHash, ls []yoloLabel) {
	for i := range ls {
		l := &ls[i]
		hashLabel(*h, d.files[i], d.sizes[i], l)
		switch {
		case !l.has:
		case l.obj.Size > annot.MaxLabelFile:
			d.errs[i] = &annotationError{&annot.SampleError{File: d.lnames[i], Annotation: "file", Field: "size",
				Err: fmt.Errorf("%d bytes, more than the %d allowed", l.obj.Size, annot.MaxLabelFile)}}
		default:
			d.bytes += d.parseLabels(i, d.lnames[i], l.data)
		}
	}
}
