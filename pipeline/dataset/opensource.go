package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// SourceOption configures OpenSource.
type SourceOption func(*sourceOptions)

type sourceOptions struct {
	manifest    string
	store       []source.Option
	ranges      func(source.Store) source.Ranges
	log         *slog.Logger
	index       IndexOptions
	maxManifest int64
	// annBudget bounds an annotations file's parse (WithAnnotationsBudget).
	annBudget int64
	// keepLabels keeps a YOLO dataset's label files as read
	// (YOLODataset.read), for IndexAnnotated.
	keepLabels bool
}

// WithManifest names the dataset's manifest: a local path or an s3://,
// gs://, azblob:// URL of the file `stoker index --out` wrote (default:
// the one beside the data, ROOT/.stoker/manifest, when there is one). A
// named manifest must exist and must have been made of this very source.
func WithManifest(loc string) SourceOption { return func(o *sourceOptions) { o.manifest = loc } }

// WithStoreOptions passes options (retry policy, metrics) to the store a
// remote source, or a local one with a manifest, is opened with.
func WithStoreOptions(opts ...source.Option) SourceOption {
	return func(o *sourceOptions) { o.store = append(o.store, opts...) }
}

// WithRanges sets how a store-backed dataset reads its samples: f makes
// the source.Ranges for the opened store (default source.Direct, no
// cache and no read-ahead; a Fetcher plugs in here).
func WithRanges(f func(source.Store) source.Ranges) SourceOption {
	return func(o *sourceOptions) { o.ranges = f }
}

// WithLog sets where OpenSource says how long a listing or scan took and
// warns of a manifest gone partly stale (default: nowhere).
func WithLog(l *slog.Logger) SourceOption { return func(o *sourceOptions) { o.log = l } }

// WithIndexOptions sets how a source without a manifest is listed and its
// shards read, and where its progress goes, local or remote (default
// IndexOptions{}).
func WithIndexOptions(io IndexOptions) SourceOption { return func(o *sourceOptions) { o.index = io } }

// OpenSource opens the dataset at src: a local path, or an s3://bucket/
// prefix, gs://bucket/prefix or azblob://container/prefix URL, in either
// layout (ImageFolder PREFIX/<class>/<image>, WebDataset PREFIX/*.tar).
//
// With a manifest (named by WithManifest, or beside the data at
// ROOT/.stoker/manifest) it starts without listing or reading shards, and
// the dataset is a *StoreDataset (or *ShardedStoreDataset). Without one a
// local path is opened by Open as ever, and a URL is listed and its shards
// read, which OpenSource logs with the time it took. A manifest that is
// corrupt, of another source, or mostly stale is an error naming it (run
// `stoker index` to rebuild it: a server never rewrites one itself).
func OpenSource(ctx context.Context, src string, opts ...SourceOption) (Dataset, error) {
	o := newSourceOptions(opts)
	remote := source.IsRemote(src)
	if !remote && !strings.Contains(src, "://") {
		st, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() && o.manifest != "" {
			return nil, fmt.Errorf("%s: a manifest is for a directory (of shards, or an ImageFolder), not a file", src)
		}
		if !st.IsDir() {
			return open(src, o.index.Progress)
		}
		if o.manifest == "" {
			if _, err := os.Stat(filepath.Join(src, filepath.FromSlash(ManifestName))); errors.Is(err, fs.ErrNotExist) {
				return openScanned(src, o)
			}
		}
	}
	// The store outlives ctx (a server's start, ended by SIGTERM while it
	// drains): a provider may keep the context it was opened with for its
	// credentials' refreshes. ctx bounds the listing and scan alone.
	st, err := source.Open(context.WithoutCancel(ctx), src, o.store...)
	if err != nil {
		return nil, err
	}
	ds, err := openStore(ctx, st, src, o)
	if err != nil {
		st.Close()
		return nil, err
	}
	return ds, nil
}

func newSourceOptions(opts []SourceOption) sourceOptions {
	o := sourceOptions{maxManifest: DefaultMaxManifestSize, log: slog.New(slog.DiscardHandler),
		ranges: func(st source.Store) source.Ranges { return source.Direct{Store: st} }}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// openScanned opens a local dataset without a manifest, as Open does, and
// says how long that took.
func openScanned(src string, o sourceOptions) (Dataset, error) {
	start := time.Now()
	ds, err := open(src, o.index.Progress)
	if err != nil {
		return nil, err
	}
	o.log.Info("dataset scanned (no manifest)", "source", src, "samples", ds.Len(), "took", time.Since(start).Round(time.Millisecond),
		"hint", "run `stoker index "+src+"` once to start in seconds")
	return ds, nil
}

// openStore opens the dataset in st from its manifest, or by listing it
// when it has none.
func openStore(ctx context.Context, st source.Store, src string, o sourceOptions) (Dataset, error) {
	m, where, err := loadManifest(ctx, st, o)
	if err != nil {
		return nil, err
	}
	if m == nil {
		start := time.Now()
		m, err := IndexStore(ctx, st, o.index)
		if err != nil {
			return nil, err
		}
		o.log.Info("dataset listed and scanned (no manifest)", "source", st.String(), "layout", m.Layout,
			"objects", m.NumObjects(), "samples", m.Len(), "took", time.Since(start).Round(time.Millisecond),
			"hint", "run `stoker index "+st.String()+"` once to start in seconds")
		return NewStoreDataset(st, m, o.ranges(st))
	}
	if err := checkOwner(m, st, src, o.manifest != ""); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrManifest, where, err)
	}
	if err := checkFresh(ctx, st, m, where, o.log); err != nil {
		return nil, err
	}
	ds, err := NewStoreDataset(st, m, o.ranges(st))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	sd := storeDatasetOf(ds)
	sd.stale = "the manifest " + where + " is stale: run `stoker index " + src + "` again"
	o.log.Info("dataset opened from its manifest", "source", st.String(), "manifest", where, "layout", m.Layout,
		"objects", m.NumObjects(), "samples", m.Len())
	return ds, nil
}

func storeDatasetOf(ds Dataset) *StoreDataset {
	switch d := ds.(type) {
	case *StoreDataset:
		return d
	case *ShardedStoreDataset:
		return d.StoreDataset
	}
	return nil
}

// loadAnnotatedManifest opens the store at dir and reads the manifest o
// names or the one beside the images (m nil, and st closed, when there is
// none).
func loadAnnotatedManifest(ctx context.Context, dir string, o sourceOptions) (st source.Store, m *Manifest, where string, err error) {
	if st, err = source.Open(context.WithoutCancel(ctx), dir, o.store...); err != nil {
		return nil, nil, "", err
	}
	if m, where, err = loadManifest(ctx, st, o); err != nil || m == nil {
		st.Close()
		return nil, nil, where, err
	}
	return st, m, where, nil
}

// loadManifest reads the manifest o names, or the one beside the data in
// st; nil, without an error, when none is named and none is beside it.
// where names the file in messages.
func loadManifest(ctx context.Context, st source.Store, o sourceOptions) (m *Manifest, where string, err error) {
	if o.manifest == "" {
		where = strings.TrimSuffix(st.String(), "/") + "/" + ManifestName
		m, err := readStoreManifest(ctx, st, ManifestName, o.maxManifest)
		if errors.Is(err, source.ErrNotExist) {
			return nil, where, nil
		}
		return m, where, manifestError(where, st.String(), err)
	}
	where = o.manifest
	if source.IsRemote(o.manifest) {
		if u, err := url.Parse(o.manifest); err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			// Never echoed: what follows the scheme may be a credential.
			scheme, _, _ := strings.Cut(o.manifest, "://")
			return nil, "", fmt.Errorf("manifest %s://...: a manifest URL takes no user, query or fragment (credentials come from the provider's standard chain)", scheme)
		}
		dir, base := splitURL(o.manifest)
		mst, err := source.Open(ctx, dir, o.store...)
		if err != nil {
			return nil, where, fmt.Errorf("manifest %s: %w", where, err)
		}
		defer mst.Close()
		m, err := readStoreManifest(ctx, mst, base, o.maxManifest)
		return m, where, manifestError(where, st.String(), err)
	}
	f, err := os.Open(o.manifest)
	if err != nil {
		return nil, where, fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	m, err = DecodeManifest(f, o.maxManifest)
	return m, where, manifestError(where, st.String(), err)
}

// manifestError names the manifest in err and, when the file is not
// valid, says how to make a new one.
func manifestError(where, src string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrManifest):
		return fmt.Errorf("manifest %s: %w (run `stoker index %s` to make it again)", where, err, src)
	}
	return fmt.Errorf("manifest %s: %w", where, err)
}

// splitURL cuts a file's URL into its directory's URL and its name.
func splitURL(u string) (dir, base string) {
	i := strings.LastIndexByte(u, '/')
	return u[:i], u[i+1:]
}

// readStoreManifest reads the manifest at key in st.
func readStoreManifest(ctx context.Context, st source.Store, key string, max int64) (*Manifest, error) {
	obj, err := st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if obj.Size > max {
		return nil, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrManifest, obj.Size, max)
	}
	rc, err := st.NewReader(ctx, obj, 0)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return DecodeManifest(io.LimitReader(rc, obj.Size), max)
}

// checkOwner refuses a manifest made of another source. A manifest found
// beside the data is that data's wherever the data now is (a directory
// mounted elsewhere, a bucket copied whole): its objects are checked
// instead. One named apart from the data must have been made of this
// very source: a store's URL, or a directory's absolute path.
func checkOwner(m *Manifest, st source.Store, src string, named bool) error {
	if !named {
		return nil
	}
	want := st.String()
	if !source.IsRemote(src) {
		abs, err := filepath.Abs(src)
		if err != nil {
			return err
		}
		want = abs
	}
	if m.Root != want {
		return fmt.Errorf("made of %s, not of %s: name the manifest of this dataset, or run `stoker index %s --out FILE`", m.Root, want, src)
	}
	return nil
}

// freshChecks is how many of a manifest's objects are looked up at start.
const freshChecks = 32

// checkFresh looks up a few of m's objects, spread over it: when most are
// gone or changed the manifest is refused as stale (every sample would
// fail); when some are, a warning says their samples will fail.
func checkFresh(ctx context.Context, st source.Store, m *Manifest, where string, log *slog.Logger) error {
	n := m.NumObjects()
	k := min(n, freshChecks)
	bad := make([]error, k)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for j := range k {
		i := j * n / k
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			want := m.Object(i)
			got, err := st.Stat(ctx, want.Key)
			switch {
			case errors.Is(err, source.ErrNotExist):
				bad[j] = &staleError{want.Key + " is gone"}
			case err != nil:
				bad[j] = err
			default:
				bad[j] = changed(want, got)
			}
		})
	}
	wg.Wait()
	var first error
	nbad := 0
	for _, err := range bad {
		if err != nil && !isStale(err) {
			return fmt.Errorf("manifest %s: checking its objects: %w", where, err)
		}
		if err != nil {
			nbad++
			if first == nil {
				first = err
			}
		}
	}
	switch {
	case nbad*2 > k:
		return fmt.Errorf("%w: %s is stale: %d of the %d objects looked up are gone or changed (%v): run `stoker index %s` again",
			ErrManifest, where, nbad, k, first, st)
	case nbad > 0:
		log.Warn("manifest partly stale: the samples of objects changed since it was made will fail", "manifest", where,
			"checked", k, "changed", nbad, "first", first.Error(), "hint", "run `stoker index "+st.String()+"` again")
	}
	return nil
}

// staleError is an object that is not the one indexed.
type staleError struct{ msg string }

func (e *staleError) Error() string { return e.msg }

func isStale(err error) bool {
	var s *staleError
	return errors.As(err, &s)
}

// changed says how got differs from the indexed want, as the stores check
// a read: size, then version where both have one, else modification time.
func changed(want, got source.Object) error {
	switch {
	case got.Size != want.Size:
		return &staleError{fmt.Sprintf("%s is %d bytes, indexed at %d", want.Key, got.Size, want.Size)}
	case want.Version != "" && got.Version != "" && got.Version != want.Version:
		return &staleError{fmt.Sprintf("%s is version %s, indexed at %s", want.Key, got.Version, want.Version)}
	case want.Version == "" && !want.ModTime.IsZero() && !got.ModTime.IsZero() && !got.ModTime.Equal(want.ModTime):
		return &staleError{fmt.Sprintf("%s was modified after it was indexed", want.Key)}
	}
	return nil
}
