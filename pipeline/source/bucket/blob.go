package bucket

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// blobStore is an object-storage prefix read through gocloud.dev/blob:
// one bucket type with range readers for S3, GCS and Azure. Every request
// goes through the store's retrier; the providers' own retries are off,
// so that one policy (and one count) holds.
type blobStore struct {
	url    string // scheme://bucket/prefix, for messages
	scheme string
	prefix string // of every key in the bucket: "" or ending in "/"
	prov   provider
	bucket *blob.Bucket // prefixed: keys are relative to the prefix
	r      *retrier
}

func init() {
	source.RegisterRemote(func(ctx context.Context, url string, p source.Policy, m *source.Metrics) (source.Store, error) {
		st, err := openBlob(ctx, url, p, m)
		if err != nil {
			return nil, err
		}
		return st, nil
	})
}

// openBlob opens the store at s, an s3://, gs:// or azblob:// URL (see
// source.Open), and lists it once.
func openBlob(ctx context.Context, s string, p source.Policy, m *source.Metrics) (*blobStore, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("%s: a store URL takes no query, fragment or user: the provider's standard settings (AWS_ENDPOINT_URL, AWS_REGION, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_ACCOUNT, ...) say where and as whom", redact(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s: no bucket (want %s://BUCKET/PREFIX)", s, u.Scheme)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	prov, b, err := openProvider(ctx, u.Scheme, u.Host)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
	}
	name := u.Scheme + "://" + u.Host
	st := &blobStore{url: name + "/" + prefix, scheme: u.Scheme, prefix: prefix, prov: prov, bucket: b, r: newRetrier(p, m, name)}
	// One listing request: a missing bucket or refused credentials fail
	// here, at start, and not at the first sample.
	err = st.r.do(ctx, "list", "listing", func(ctx context.Context) (int64, error) {
		return 0, noPanic("a listing", func() error {
			lo, err := b.List(nil).Next(ctx)
			switch {
			case err == io.EOF:
				return nil
			case err != nil:
				return err
			case !lo.IsDir:
				_, err = prov.listVersion(lo) // a malformed entry, refused at start
			}
			return err
		})
	})
	if err != nil {
		b.Close()
		return nil, explainOpen(u.Scheme, u.Host, fmt.Errorf("%s: cannot list the store: %w", st.url, err))
	}
	return st, nil
}

// redact drops anything secret-looking from u for a message.
func redact(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	return v.String()
}

func (s *blobStore) String() string { return s.url }

func (s *blobStore) Close() error { return s.bucket.Close() }

// List lists page by page; each page is one request under the policy.
// Keys with a component starting with a dot are left out. What a page
// says is checked before it is believed: its body within maxListBody (the
// client's transport), every entry with a version, every key within the
// store's limit (keys over it are counted and the listing fails at its
// end, naming the count), and each page's token another than the last.
func (s *blobStore) List(ctx context.Context, prefix string, fn func(source.Object) error) error {
	token := blob.FirstPageToken
	var long int
	var firstLong string
	for {
		var page []*blob.ListObject
		var next []byte
		err := s.r.do(ctx, "list", strings.TrimSpace("listing "+prefix), func(ctx context.Context) (int64, error) {
			return 0, noPanic("a listing", func() error {
				var err error
				page, next, err = s.bucket.ListPage(ctx, token, 1000, &blob.ListOptions{Prefix: prefix})
				return err
			})
		})
		if err != nil {
			return fmt.Errorf("%s: %w", s.url, err)
		}
		for _, lo := range page {
			if keyTooLong(s.scheme, s.prefix+lo.Key) {
				if long++; long == 1 {
					firstLong = lo.Key
				}
				continue
			}
			if lo.IsDir || hidden(lo.Key) {
				continue
			}
			ver, err := s.prov.listVersion(lo)
			if err != nil {
				return fmt.Errorf("%s: %w", s.url, err)
			}
			o := source.Object{Key: lo.Key, Size: lo.Size, ModTime: lo.ModTime, Version: ver}
			if err := fn(o); err != nil {
				return err
			}
		}
		if long > 0 && len(next) == 0 {
			return fmt.Errorf("%s: %w", s.url, protocolf("the listing has %d keys over the %d-byte key limit (the first: %q, %d bytes): "+
				"no object of a real store has one, and none was listed", long, source.MaxKeyBytes, clip(firstLong, 64), len(firstLong)))
		}
		if len(next) == 0 {
			return nil
		}
		if bytes.Equal(next, token) {
			return fmt.Errorf("%s: %w", s.url, protocolf("the listing's next page is the page it just gave (the same continuation token): it would never end"))
		}
		token = next
	}
}

// hidden says whether a key has a component starting with a dot (a
// dataset's .stoker/ manifest, macOS's ._ files), which listings leave
// out as a directory's do.
func hidden(key string) bool {
	return strings.HasPrefix(key, ".") || strings.Contains(key, "/.")
}

func (s *blobStore) Stat(ctx context.Context, key string) (source.Object, error) {
	var o source.Object
	err := s.r.do(ctx, "head", key, func(ctx context.Context) (int64, error) {
		return 0, noPanic("a HEAD", func() error {
			a, err := s.bucket.Attributes(ctx, key)
			if err != nil {
				return err
			}
			ver, err := s.prov.attrVersion(a)
			o = source.Object{Key: key, Size: a.Size, ModTime: a.ModTime, Version: ver}
			return err
		})
	})
	return o, err
}

// readerOptions asks the store for obj's version only, where it has one,
// with the provider's precondition (S3 and Azure If-Match, a GCS
// generation); a client library that would not take it fails the read.
func (s *blobStore) readerOptions(obj source.Object) *blob.ReaderOptions {
	if obj.Version == "" {
		return nil
	}
	return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
		return s.prov.precondition(as, obj.Version)
	}}
}

// openRange opens a reader of obj's bytes [off, off+n) and checks the
// answer before a byte of it is believed (check).
func (s *blobStore) openRange(ctx context.Context, obj source.Object, off, n int64) (*blob.Reader, error) {
	var rd *blob.Reader
	err := noPanic("a GET", func() error {
		var err error
		rd, err = s.bucket.NewRangeReader(ctx, obj.Key, off, n, s.readerOptions(obj))
		if err != nil {
			return err
		}
		if err = s.check(obj, rd, off, n); err != nil {
			rd.Close()
		}
		return err
	})
	return rd, err
}

// check refuses a reader whose object is not obj or whose bytes are not
// [off, off+n) of it: the object's size, and the version the answer must
// name when obj has one, whether or not the store honoured the
// precondition (a store that drops the ETag and ignores If-Match would
// otherwise pass another version's bytes); the bytes by the answer's
// status and Content-Range, or its length. An obj without a version (a
// store that gives none) is checked by size and modification time here,
// and by its content hash above (pipeline's StoreDataset).
func (s *blobStore) check(obj source.Object, rd *blob.Reader, off, n int64) error {
	// First the answer's length: without one (no Content-Length: a body
	// that may never end) the client library takes the object's size for
	// 0, which would read as an object changed since it was indexed.
	if sp, ok := s.prov.answered(rd); ok && sp.length < 0 {
		return protocolf("the store's answer to a GET of bytes [%d, %d) declares no length (no Content-Length): its body may never end, and it is not read", off, off+n)
	}
	ver := s.prov.readerVersion(rd)
	if ver == "" && obj.Version != "" {
		return protocolf("the store's answer to a GET carries no version (ETag or generation), though it listed one: " +
			"it cannot be told from another version's bytes")
	}
	if err := source.CheckSame(obj, source.Object{Key: obj.Key, Size: rd.Size(), ModTime: rd.ModTime(), Version: ver}); err != nil {
		return err
	}
	sp, ok := s.prov.answered(rd)
	if !ok {
		return nil
	}
	switch {
	case sp.whole && off == 0 && sp.length == obj.Size:
		return nil // the whole object, whose first n bytes are the range
	case sp.whole:
		return protocolf("the store answered a GET of bytes [%d, %d) with the whole object (HTTP 200, no Content-Range, %d bytes): "+
			"it ignores Range, and a sample cannot be read from it", off, off+n, sp.length)
	case sp.start != off || sp.length != n || sp.total != obj.Size:
		return protocolf("the store answered a GET of bytes [%d, %d) of %d with Content-Range %q, %d bytes",
			off, off+n, obj.Size, clip(sp.raw, 64), sp.length)
	}
	return nil
}

func (s *blobStore) ReadRange(ctx context.Context, obj source.Object, off int64, p []byte) error {
	if off < 0 || off+int64(len(p)) > obj.Size {
		return fmt.Errorf("%s: range [%d, %d) outside its %d bytes", obj.Key, off, off+int64(len(p)), obj.Size)
	}
	if len(p) == 0 {
		return nil
	}
	return s.r.do(ctx, "get", obj.Key, func(ctx context.Context) (int64, error) {
		rd, err := s.openRange(ctx, obj, off, int64(len(p)))
		if err != nil {
			return 0, err
		}
		defer rd.Close()
		n, err := io.ReadFull(rd, p)
		if err != nil {
			return int64(n), fmt.Errorf("body cut short at %d of %d bytes: %w", n, len(p), err)
		}
		return int64(n), nil
	})
}

func (s *blobStore) Put(ctx context.Context, key string, data []byte) error {
	return s.r.do(ctx, "put", key, func(ctx context.Context) (int64, error) {
		return 0, noPanic("a PUT", func() error { return s.bucket.WriteAll(ctx, key, data, nil) })
	})
}

// NewReader streams obj from off. Each (re)open is a request under the
// policy; a stream that fails or stalls for the request deadline midway is
// reopened where it stopped, and the stream gives up after the policy's
// attempts without progress.
func (s *blobStore) NewReader(ctx context.Context, obj source.Object, off int64) (io.ReadCloser, error) {
	r := &streamReader{s: s, obj: obj, pos: off}
	r.ctx, r.cancel = context.WithCancel(ctx)
	if err := r.open(); err != nil {
		r.cancel()
		return nil, err
	}
	return r, nil
}

type streamReader struct {
	s      *blobStore
	obj    source.Object
	ctx    context.Context
	cancel context.CancelFunc
	pos    int64

	mu       sync.Mutex
	rd       *blob.Reader
	rcancel  context.CancelFunc // the open reader's context
	watchdog *time.Timer        // cancels a reader that stalls
	failures int                // in a row, without progress
}

// open opens a reader at r.pos under the policy.
func (r *streamReader) open() error {
	return r.s.r.do(r.ctx, "get", r.obj.Key, func(context.Context) (int64, error) {
		// The reader outlives the try: its deadline is the watchdog's,
		// which is re-armed at every byte that arrives.
		rctx, cancel := context.WithCancel(r.ctx)
		rd, err := r.s.openRange(rctx, r.obj, r.pos, r.obj.Size-r.pos)
		if err != nil {
			cancel()
			return 0, err
		}
		r.mu.Lock()
		r.rd, r.rcancel = rd, cancel
		r.watchdog = time.AfterFunc(r.s.r.p.RequestTimeout, cancel)
		r.mu.Unlock()
		return 0, nil
	})
}

func (r *streamReader) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rd != nil {
		r.watchdog.Stop()
		r.rd.Close()
		r.rcancel()
		r.rd = nil
	}
}

func (r *streamReader) Read(p []byte) (int, error) {
	for {
		if r.pos >= r.obj.Size {
			return 0, io.EOF
		}
		if r.rd == nil {
			if err := r.open(); err != nil {
				return 0, err
			}
		}
		n, err := r.rd.Read(p)
		r.pos += int64(n)
		if n > 0 {
			r.failures = 0
			r.watchdog.Reset(r.s.r.p.RequestTimeout)
		}
		if err == nil || (err == io.EOF && r.pos >= r.obj.Size) {
			if n > 0 || err == nil {
				return n, nil
			}
			return 0, io.EOF
		}
		// A reset, a stall or a body cut short: reopen where it stopped.
		r.drop()
		if r.ctx.Err() != nil {
			return n, r.ctx.Err()
		}
		r.failures++
		r.s.r.m.Observe("get", classify(err, false).String(), 0, 0)
		if r.failures >= r.s.r.p.Attempts {
			return n, fmt.Errorf("%w: %s: %s: stream failed %d times at byte %d; last: %v", source.ErrUnavailable, r.s.url, r.obj.Key, r.failures, r.pos, err)
		}
		if n > 0 {
			return n, nil
		}
	}
}

func (r *streamReader) Close() error {
	r.drop()
	r.cancel()
	return nil
}
