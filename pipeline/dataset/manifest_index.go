package dataset

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stoker-dev/stoker/internal/progress"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// IndexOptions tune IndexStore and IndexDir.
type IndexOptions struct {
	// Concurrency is how many shards are read at once (default 8).
	Concurrency int
	// Progress, when set, is called as the work goes (from one goroutine
	// at a time, often: it should be cheap).
	Progress func(IndexProgress)
	// MaxBytes bounds the memory the index may hold while it is built
	// (the listing's keys and versions, the shards' members found, the
	// manifest made of them), counted as they grow; past it the index
	// fails saying so, and OverHint, what to do instead. 0: no bound.
	MaxBytes int64
	OverHint string
	// ImageSize, when set, reads an image's size from its first bytes,
	// and the index records every sample's (stoker index --sizes): the
	// manifest then gives a plan by vision tokens its samples' sizes
	// without a decode.
	ImageSize func(head []byte) (w, h int, err error)
}

// heldBytes counts what an index being built holds, against MaxBytes.
type heldBytes struct {
	n     atomic.Int64
	items atomic.Int64
	o     *IndexOptions
	what  string
}

// Per listed object or found sample: its struct in the listing (or the
// scan's results) and its columns in the manifest, beside its strings,
// which are held twice (the listing's, then the manifest's copy).
const heldPerItem = 128

// add counts an item whose strings are n bytes; an error once the total
// is over MaxBytes.
func (h *heldBytes) add(n int) error {
	total := h.n.Add(int64(2*n + heldPerItem))
	items := h.items.Add(1)
	if h.o.MaxBytes <= 0 || total <= h.o.MaxBytes {
		return nil
	}
	hint := ""
	if h.o.OverHint != "" {
		hint = ": " + h.o.OverHint
	}
	return fmt.Errorf("indexing %s: the listing and the index built from it hold %.1f MiB after %d entries (keys and members), over the %.1f MiB it may take%s",
		h.what, float64(total)/(1<<20), items, float64(h.o.MaxBytes)/(1<<20), hint)
}

// IndexProgress is how far an index has come.
type IndexProgress struct {
	// Phase is "list" (objects listed; no total yet) or "scan" (shards
	// read for their members).
	Phase string
	// Done and Total count objects (Total is 0 while listing).
	Done, Total int
	// Bytes and TotalBytes count the bytes of the shards read.
	Bytes, TotalBytes int64
}

// Update is p in the words of a progress line: "listing" objects (no
// total yet), then "reading shards".
func (p IndexProgress) Update() progress.Update {
	if p.Phase == "list" {
		return progress.Update{Phase: "listing", Unit: "objects", Done: int64(p.Done)}
	}
	return progress.Update{Phase: "reading shards", Unit: "shards", Done: int64(p.Done), Total: int64(p.Total),
		Bytes: p.Bytes, TotalBytes: p.TotalBytes}
}

func (o IndexOptions) concurrency() int {
	if o.Concurrency <= 0 {
		return 8
	}
	return o.Concurrency
}

func (o IndexOptions) progress(p IndexProgress) {
	if o.Progress != nil {
		o.Progress(p)
	}
}

// IndexStore indexes the dataset in st: the WebDataset shards at its top
// (*.tar) when it has any, each read once as a stream to find its members,
// else the ImageFolder tree <class>/.../<image>, by the rules of Open's
// local datasets (dot-names skipped, files in torchvision's order, a class
// without an image refused, compressed shards refused).
func IndexStore(ctx context.Context, st source.Store, o IndexOptions) (*Manifest, error) {
	var objs []source.Object
	held := &heldBytes{o: &o, what: st.String()}
	last := time.Now()
	err := st.List(ctx, "", func(obj source.Object) error {
		if err := held.add(len(obj.Key) + len(obj.Version)); err != nil {
			return err
		}
		objs = append(objs, obj)
		if time.Since(last) > 100*time.Millisecond {
			last = time.Now()
			o.progress(IndexProgress{Phase: "list", Done: len(objs)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	o.progress(IndexProgress{Phase: "list", Done: len(objs)})
	m := &Manifest{Root: st.String()}
	var top []string
	for _, obj := range objs {
		if !strings.Contains(obj.Key, "/") {
			top = append(top, obj.Key)
		}
	}
	if z := compressedShards(top); len(z) > 0 {
		return nil, errCompressedShards(st.String(), z)
	}
	if isWebDataset(objs) {
		m.Layout = LayoutWebDataset
		var shards []source.Object
		for _, obj := range objs {
			if !strings.Contains(obj.Key, "/") && strings.HasSuffix(obj.Key, ".tar") && !strings.HasPrefix(obj.Key, ".") {
				shards = append(shards, obj)
			}
		}
		if err := scanShards(ctx, m, shards, o, func(ctx context.Context, obj source.Object, si int32) ([]wdsScanned, error) {
			rc, err := st.NewReader(ctx, obj, 0)
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			got, err := scanShard(&streamReader{r: bufio.NewReaderSize(rc, 1<<20)}, si, obj.Key, needsHash(st, obj))
			for i := range got {
				if err == nil {
					err = held.add(len(got[i].name) + 32*len(got[i].members))
				}
			}
			return got, err
		}); err != nil {
			return nil, err
		}
		if m.Len() == 0 {
			return nil, fmt.Errorf("%w: no samples (key.jpg|png + key.cls) in %s", ErrUnsupported, st)
		}
	} else {
		m.Layout = LayoutImageFolder
		empty := folderFromKeys(m, objs)
		if m.Len() == 0 {
			return nil, fmt.Errorf("%w: no images in %s (want PREFIX/<class>/<image>)", ErrUnsupported, st)
		}
		if len(empty) > 0 {
			return nil, errEmptyClasses(st.String(), empty)
		}
		if err := hashObjects(ctx, st, m, o); err != nil {
			return nil, err
		}
	}
	if o.ImageSize != nil {
		if err := recordSizes(ctx, m, st.NewReader, o); err != nil {
			return nil, err
		}
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// isWebDataset says whether a listing is of WebDataset shards, as Open
// decides for a directory: a *.tar at the top.
func isWebDataset(objs []source.Object) bool {
	for _, o := range objs {
		if !strings.Contains(o.Key, "/") && strings.HasSuffix(o.Key, ".tar") {
			return true
		}
	}
	return false
}

// folderFromKeys adds to m the ImageFolder in a listing: classes are the
// first components of the keys below the top (not starting with a dot),
// sorted; a class's images are the keys below it with an image extension
// and no component starting with a dot, in torchvision's os.walk order.
// Keys that no directory tree could hold (empty components) are skipped.
// It returns the classes without an image (a "class/" marker, or only
// other files), which Open refuses in a local tree, and so IndexStore.
func folderFromKeys(m *Manifest, objs []source.Object) (empty []string) {
	byClass := map[string][]int{}
	for i, o := range objs {
		class, rest, ok := strings.Cut(o.Key, "/")
		if !ok || class == "" || strings.HasPrefix(class, ".") {
			continue
		}
		files := byClass[class]
		if files == nil {
			files = []int{}
		}
		if imageKey(rest) {
			files = append(files, i)
		}
		byClass[class] = files
	}
	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	m.Classes = classes
	for label, c := range classes {
		files := byClass[c]
		if len(files) == 0 {
			empty = append(empty, c)
		}
		slices.SortFunc(files, func(a, b int) int {
			ka, kb := objs[a].Key, objs[b].Key
			if c := strings.Compare(path.Dir(ka), path.Dir(kb)); c != 0 {
				return c
			}
			return strings.Compare(path.Base(ka), path.Base(kb))
		})
		for _, i := range files {
			oi := m.AddObject(objs[i])
			m.AddSample(ManifestSample{Object: oi, Size: objs[i].Size, Label: int64(label)})
		}
	}
	return empty
}

// imageKey says whether rest, a key below its class, is an image an
// ImageFolder walk would take.
func imageKey(rest string) bool {
	for part := range strings.SplitSeq(rest, "/") {
		if part == "" || strings.HasPrefix(part, ".") {
			return false
		}
	}
	return isImage(rest)
}

// scanShards finds the samples of shards with scan, at most
// o.Concurrency at once, and adds shards and samples to m in shard order.
// The first error ends the scan.
func scanShards(ctx context.Context, m *Manifest, shards []source.Object, o IndexOptions,
	scan func(ctx context.Context, obj source.Object, si int32) ([]wdsScanned, error)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([][]wdsScanned, len(shards))
	var total int64
	for _, s := range shards {
		total += s.Size
	}
	var (
		next       atomic.Int64
		mu         sync.Mutex // progress
		done       int
		bytes      int64
		lastReport time.Time
		wg         sync.WaitGroup
	)
	for range min(o.concurrency(), len(shards)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(shards) || ctx.Err() != nil {
					return
				}
				got, err := scan(ctx, shards[i], int32(i))
				if err != nil {
					cancel(err)
					return
				}
				results[i] = got
				mu.Lock()
				done++
				bytes += shards[i].Size
				if done == len(shards) || time.Since(lastReport) > 100*time.Millisecond {
					lastReport = time.Now()
					o.progress(IndexProgress{Phase: "scan", Done: done, Total: len(shards), Bytes: bytes, TotalBytes: total})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	names := make([]string, len(shards))
	objs := make([]int, len(shards))
	for i, sh := range shards {
		names[i] = sh.Key
		objs[i] = m.AddObject(sh)
	}
	// The samples as the local WebDataset takes them (labelled or not).
	_, err := wdsSamples(results, names, m.Root, func(s *wdsScanned) error {
		ms := ManifestSample{Object: objs[s.shard], Off: s.offset, Size: s.size, Label: s.label, Member: s.name, NoImage: s.noImage, Hash: s.hash}
		if s.hasCls {
			ms.ClsOff, ms.ClsSize = s.clsOff, s.clsSize
		}
		for _, f := range s.members {
			ms.Fields = append(ms.Fields, ManifestField{Ext: f.ext, Off: f.off, Size: f.size})
		}
		m.AddSample(ms)
		return nil
	})
	return err
}

// needsHash says whether obj, in st, has no version to be read by: an
// object in a store that gives none (versitygw serving files it did not
// write). Its samples are hashed when indexed, and read against the
// hashes. A local directory's files are read by size and modification
// time, as ever.
func needsHash(st source.Store, obj source.Object) bool {
	return obj.Version == "" && source.IsRemote(st.String())
}

// hashObjects reads and hashes the objects of m, an ImageFolder listed
// from st, that have no version (needsHash), o.Concurrency at a time.
func hashObjects(ctx context.Context, st source.Store, m *Manifest, o IndexOptions) error {
	var todo []int
	for i := range m.Len() {
		if needsHash(st, m.Object(m.Sample(i).Object)) {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	hashes := make([][]byte, m.Len())
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(o.concurrency(), len(todo)) {
		wg.Go(func() {
			for {
				j := int(next.Add(1) - 1)
				if j >= len(todo) || ctx.Err() != nil {
					return
				}
				i := todo[j]
				obj := m.Object(m.Sample(i).Object)
				rc, err := st.NewReader(ctx, obj, 0)
				if err == nil {
					h := sha256.New()
					_, err = io.Copy(h, io.LimitReader(rc, obj.Size))
					rc.Close()
					hashes[i] = h.Sum(nil)
				}
				if err != nil {
					cancel(fmt.Errorf("%s has no version in the store's listing, so it is hashed to be read by: %w", obj.Key, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	flat := make([]byte, sha256.Size*m.Len())
	for i, h := range hashes {
		copy(flat[i*sha256.Size:], h)
	}
	m.samples.hashes = flat
	return nil
}

// IndexDir indexes the local dataset directory dir as Open would open it
// (WebDataset shards when it holds *.tar files, else an ImageFolder), so
// that a dataset made from the manifest has the fingerprint Open's has.
// Objects carry their sizes and modification times: a file changed after
// indexing is a per-sample error.
func IndexDir(ctx context.Context, dir string, o IndexOptions) (*Manifest, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory: index the directory that holds the dataset", ErrUnsupported, dir)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	ents, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, err
	}
	m := &Manifest{Root: abs}
	var (
		shards, names []string
		wds           bool
	)
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".tar") {
			wds = true
		}
		if strings.HasSuffix(e.Name(), ".tar") && !strings.HasPrefix(e.Name(), ".") {
			shards = append(shards, e.Name())
		}
	}
	if z := compressedShards(names); len(z) > 0 {
		return nil, errCompressedShards(dir, z)
	}
	if !wds {
		m.Layout = LayoutImageFolder
		ix, err := scanFolder(root, dir, true, func(n int) { o.progress(IndexProgress{Phase: "list", Done: n}) })
		if err != nil {
			return nil, err
		}
		m.Classes = ix.classes
		for i, f := range ix.files {
			oi := m.AddObject(source.Object{Key: f, Size: ix.sizes[i], ModTime: time.Unix(0, ix.mtimes[i])})
			m.AddSample(ManifestSample{Object: oi, Size: ix.sizes[i], Label: int64(ix.labels[i])})
		}
		o.progress(IndexProgress{Phase: "list", Done: len(ix.files)})
	} else {
		m.Layout = LayoutWebDataset
		objs := make([]source.Object, len(shards))
		for i, name := range shards {
			fi, err := root.Stat(name)
			if err != nil {
				return nil, openError(root, name, "dataset directory", err)
			}
			if !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("%w: shard %s is not a regular file", ErrUnsupported, name)
			}
			objs[i] = source.Object{Key: name, Size: fi.Size(), ModTime: fi.ModTime()}
		}
		err := scanShards(ctx, m, objs, o, func(_ context.Context, obj source.Object, si int32) ([]wdsScanned, error) {
			f, err := root.OpenFile(obj.Key, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return nil, openError(root, obj.Key, "dataset directory", err)
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil || !fi.Mode().IsRegular() || fi.Size() != obj.Size || !fi.ModTime().Equal(obj.ModTime) {
				return nil, fmt.Errorf("%w: shard %s changed while it was indexed", ErrUnsupported, obj.Key)
			}
			return indexShard(f, si, obj.Key)
		})
		if err != nil {
			return nil, err
		}
		if m.Len() == 0 {
			return nil, fmt.Errorf("%w: no samples (key.jpg|png + key.cls) in %s", ErrUnsupported, dir)
		}
	}
	if o.ImageSize != nil {
		if err := recordSizes(ctx, m, rootOpener(root), o); err != nil {
			return nil, err
		}
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}
