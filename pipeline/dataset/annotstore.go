package dataset

// Annotated datasets (COCO, YOLO) whose images, annotations file or label
// files are in object storage: listed once at start, each image read at
// its listed version through the server's Ranges (byte cache, read-ahead).

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
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
func OpenAnnotatedSource(ctx context.Context, dir, ann string, opts ...SourceOption) (Dataset, error) {
	if !source.IsRemote(dir) && !source.IsRemote(ann) {
		return OpenAnnotated(dir, ann)
	}
	o := newSourceOptions(opts)
	name := path.Base(ann)
	if isYOLOConfig(ann) {
		rc, err := openAnnotationsFile(ctx, ann, o, annot.MaxLabelFile)
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
		return openYOLOStore(ctx, dir, name, raw, o)
	}
	rc, err := openAnnotationsFile(ctx, ann, o, annot.MaxAnnotationsFile)
	if err != nil {
		return nil, err
	}
	c, sum, err := parseCOCO(name, rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	if !source.IsRemote(dir) {
		return cocoInDir(dir, name, c, sum)
	}
	return openCOCOStore(ctx, dir, name, c, sum, o)
}

// openAnnotationsFile opens the annotations at loc, a local file or an
// object's URL, of at most max bytes, for one sequential read.
func openAnnotationsFile(ctx context.Context, loc string, o sourceOptions, max int64) (io.ReadCloser, error) {
	if !source.IsRemote(loc) {
		f, err := os.Open(loc)
		if err != nil {
			return nil, fmt.Errorf("annotations: %w", err)
		}
		st, err := f.Stat()
		switch {
		case err != nil:
		case !st.Mode().IsRegular():
			err = fmt.Errorf("%w: annotations %s is not a regular file", ErrUnsupported, loc)
		case st.Size() > max:
			err = fmt.Errorf("%w: annotations %s is %d bytes, over the %d allowed", ErrTooLarge, loc, st.Size(), max)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	if u, err := url.Parse(loc); err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		// Never echoed: what follows the scheme may be a credential.
		scheme, _, _ := strings.Cut(loc, "://")
		return nil, fmt.Errorf("annotations %s://...: an annotations URL takes no user, query or fragment (credentials come from the provider's standard chain)", scheme)
	}
	dir, base := splitURL(loc)
	if base == "" || strings.HasSuffix(dir, ":/") {
		return nil, fmt.Errorf("annotations %s: want a file's URL, SCHEME://BUCKET/PATH/NAME", loc)
	}
	st, err := source.Open(ctx, dir, o.store...)
	if err != nil {
		return nil, fmt.Errorf("annotations %s: %w", loc, err)
	}
	obj, err := st.Stat(ctx, base)
	if err == nil && obj.Size > max {
		err = fmt.Errorf("%w: %d bytes, over the %d allowed", ErrTooLarge, obj.Size, max)
	}
	var rc io.ReadCloser
	if err == nil {
		rc, err = st.NewReader(ctx, obj, 0)
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("annotations %s: %w", loc, err)
	}
	return &storeFile{Reader: io.LimitReader(rc, obj.Size), rc: rc, st: st}, nil
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
	d, ix := newCOCODataset(c, sum)
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
	if err := d.readStoreLabels(ctx, &h, o); err != nil {
		st.Close()
		return nil, err
	}
	d.fp = h.sum()
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

// readStoreLabels reads every image's label file (labelURL) from the
// bucket: the label files' common directory is listed once and each file
// there read, o.index.Concurrency at once; an image without one has no
// instances, as on a disk. A label file over annot.MaxLabelFile is its
// image's error, unread. Each is hashed into h in the images' order.
func (d *YOLODataset) readStoreLabels(ctx context.Context, h *indexHash, o sourceOptions) error {
	n := len(d.files)
	urls := make([]string, n)
	for i, f := range d.files {
		urls[i] = labelURL(d.dir, f)
	}
	root := urls[0][:strings.LastIndexByte(urls[0], '/')]
	for _, u := range urls[1:] {
		for !strings.HasPrefix(u, root+"/") {
			root = root[:strings.LastIndexByte(root, '/')]
		}
	}
	lst, err := source.Open(ctx, root, o.store...)
	if err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	defer lst.Close()
	want := make(map[string]int, n)
	for i, u := range urls {
		want[u[len(root)+1:]] = i
	}
	objs := make([]source.Object, n)
	has := make([]bool, n)
	if err := lst.List(ctx, "", func(obj source.Object) error {
		if i, ok := want[obj.Key]; ok {
			objs[i], has[i] = obj, true
		}
		return nil
	}); err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	d.lnames = make([]string, n)
	sums := make([][sha256.Size]byte, n)
	var bytes atomic.Int64
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	sem := make(chan struct{}, o.index.concurrency())
	for i := range n {
		d.lnames[i] = labelName(d.dir, urls[i])
		if !has[i] {
			continue
		}
		if objs[i].Size > annot.MaxLabelFile {
			sums[i] = sha256.Sum256([]byte("version " + objs[i].Version))
			d.errs[i] = &annotationError{&annot.SampleError{File: d.lnames[i], Annotation: "file", Field: "size",
				Err: fmt.Errorf("%d bytes, more than the %d allowed", objs[i].Size, annot.MaxLabelFile)}}
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			data := make([]byte, objs[i].Size)
			if err := lst.ReadRange(ctx, objs[i], 0, data); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("labels of %s: %s: %w", d.files[i], d.lnames[i], err)
				}
				mu.Unlock()
				return
			}
			sums[i] = sha256.Sum256(data)
			bytes.Add(d.parseLabels(i, d.lnames[i], data))
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	d.bytes += bytes.Load()
	for i := range n {
		if !has[i] {
			h.add(d.files[i], d.sizes[i], -1)
		} else {
			h.add(d.files[i]+"\x00"+string(sums[i][:]), d.sizes[i], objs[i].Size)
		}
	}
	return nil
}

// storeImages are a COCO or YOLO dataset's images in a store, an object
// each, read at their listed versions.
type storeImages struct {
	st    source.Store
	rd    source.Ranges
	objs  []source.Object
	stale string
	// ctx ends the reads in flight when the dataset closes.
	ctx    context.Context
	cancel context.CancelFunc
}

// newStoreImages reads objs from st through rd. An object without a
// version is refused: nothing would tell its bytes from another's.
func newStoreImages(st source.Store, rd source.Ranges, objs []source.Object) (*storeImages, error) {
	for _, o := range objs {
		if o.Version == "" {
			return nil, fmt.Errorf("%w: %s gives the image %s no version (ETag or generation): nothing would tell other bytes from its", ErrUnsupported, st, o.Key)
		}
	}
	s := &storeImages{st: st, rd: rd, objs: objs,
		stale: "the dataset changed since it was listed; restart to list it again"}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// read reads image i (named name), refused over max bytes.
func (s *storeImages) read(i int, name string, max int64, buf []byte) ([]byte, error) {
	o := s.objs[i]
	if o.Size > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d-byte file cap", ErrTooLarge, name, o.Size, max)
	}
	data, err := s.rd.Read(s.ctx, source.Range{Obj: o, Len: o.Size}, buf)
	switch {
	case errors.Is(err, source.ErrChanged):
		return nil, fmt.Errorf("%w: %w: %s", ErrCorrupt, err, s.stale)
	case err != nil:
		return nil, err
	case int64(len(data)) != o.Size:
		return nil, fmt.Errorf("%w: %s: read %d bytes of %d", ErrCorrupt, name, len(data), o.Size)
	}
	return data, nil
}

// prefetch hints the images at indices (within max bytes) to the Ranges.
func (s *storeImages) prefetch(indices []int64, max int64) {
	if _, direct := s.rd.(source.Direct); direct {
		return
	}
	rs := make([]source.Range, 0, len(indices))
	for _, i := range indices {
		if i >= 0 && i < int64(len(s.objs)) && s.objs[i].Size <= max {
			rs = append(rs, source.Range{Obj: s.objs[i], Len: s.objs[i].Size})
		}
	}
	if len(rs) > 0 {
		s.rd.Prefetch(rs)
	}
}

func (s *storeImages) close() error {
	s.cancel()
	return s.st.Close()
}

var (
	_ Prefetcher = (*COCODataset)(nil)
	_ Prefetcher = (*YOLODataset)(nil)
)

// Prefetch implements Prefetcher: images in a store are hinted to its
// read-ahead; a directory's are not.
func (d *COCODataset) Prefetch(indices []int64) {
	if d.imgs != nil {
		d.imgs.prefetch(indices, d.maxSize)
	}
}

// Prefetch implements Prefetcher, as COCODataset's.
func (d *YOLODataset) Prefetch(indices []int64) {
	if d.imgs != nil {
		d.imgs.prefetch(indices, d.maxSize)
	}
}
