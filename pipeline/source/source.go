package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Object is one object of a store as it was listed or indexed. A read
// names the Object it expects, and the store refuses to return the bytes
// of any other version of it.
type Object struct {
	// Key is the object's name relative to the store's root (its prefix),
	// '/'-separated, never starting with '/'.
	Key  string
	Size int64
	// Version is what the store says changes whenever the object's bytes
	// do: an S3 or Azure ETag, a GCS generation. Empty where the store
	// gives none (a local directory): Size and ModTime stand for it.
	Version string
	// ModTime is the last modification time, where the store gives one.
	ModTime time.Time
}

// Store is a read-mostly set of objects under one root: a local directory
// or an object-storage prefix (s3://, gs://, azblob://). Implementations
// are safe for concurrent use.
type Store interface {
	// String names the store in messages and metrics: the URL or path it
	// was opened from, never a credential.
	String() string
	// List calls fn with every object whose key starts with prefix, in
	// lexical order of key, leaving out keys with a component that starts
	// with a dot (".stoker/manifest"). An error from fn stops the listing
	// and is returned.
	List(ctx context.Context, prefix string, fn func(Object) error) error
	// Stat returns the object at key; a missing one is an error wrapping
	// ErrNotExist.
	Stat(ctx context.Context, key string) (Object, error)
	// ReadRange fills p with the bytes [off, off+len(p)) of obj. When the
	// store's object is no longer obj (another version or size, or gone)
	// it fails with an error wrapping ErrChanged and p's content is
	// unspecified: never another version's bytes presented as obj's.
	// Transient failures are retried within the store's policy.
	ReadRange(ctx context.Context, obj Object, off int64, p []byte) error
	// NewReader streams obj's bytes from off to its end, for a sequential
	// scan (a tar shard's headers). A transient failure mid-stream is
	// resumed from where it stopped within the store's policy.
	NewReader(ctx context.Context, obj Object, off int64) (io.ReadCloser, error)
	// Put writes data as the object key, replacing any.
	Put(ctx context.Context, key string, data []byte) error
	// Close releases the store's connections.
	Close() error
}

// Errors the stores wrap.
var (
	// ErrChanged: the object is not the one indexed (another version,
	// another size, or deleted).
	ErrChanged = errors.New("object changed since it was indexed")
	// ErrNotExist: no such object.
	ErrNotExist = errors.New("no such object")
	// ErrDenied: the store refused the credentials (403, 401).
	ErrDenied = errors.New("access denied")
	// ErrUnavailable: the store did not answer usefully within the retry
	// policy (throttled, 5xx, resets, timeouts every time).
	ErrUnavailable = errors.New("store unavailable")
	// ErrProtocol: the store answered, but not as its protocol says it
	// must, so the answer cannot be believed: a listing over its size
	// bound or with keys over the store's key limit, an entry or answer
	// missing what it must carry (a modification time, a version), a
	// ranged read answered with other bytes than those asked for, a
	// redirect to another host. Not retried: a store that lies once lies
	// again.
	ErrProtocol = errors.New("store answered outside its protocol")
)

// MaxKeyBytes is the longest object key a store may list, prefix
// included: S3's and GCS's limit (1,024 bytes of UTF-8; Azure's is 1,024
// characters, which its listings are held to as well). A longer key is
// no object of a real store, and is refused at listing, counted.
const MaxKeyBytes = 1024

// IsRemote says whether s names an object-storage URL rather than a local
// path.
func IsRemote(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	return ok && (scheme == "s3" || scheme == "gs" || scheme == "azblob")
}

// Open opens the store at s: an s3://bucket/prefix, gs://bucket/prefix or
// azblob://container/prefix URL, or a local directory. Credentials come
// from each provider's standard chain (environment, shared config files,
// workload identity, instance metadata); an S3-compatible store is reached
// through AWS_ENDPOINT_URL, with path-style addressing. Open checks that
// the store can be listed, so a missing bucket or refused credentials fail
// here, naming the URL and the provider's message.
func Open(ctx context.Context, s string, opts ...Option) (Store, error) {
	o := newOptions(opts)
	if !IsRemote(s) {
		if strings.Contains(s, "://") {
			return nil, fmt.Errorf("%s: unsupported URL scheme (want s3://, gs://, azblob:// or a local path)", s)
		}
		return openDir(s)
	}
	if remote == nil {
		scheme, _, _ := strings.Cut(s, "://") // the URL itself may hold a credential
		return nil, fmt.Errorf("%s://: this program has no object-store clients (a program that reads s3://, gs:// or azblob:// imports %s, as stoker's server does)", scheme, bucketPackage)
	}
	return remote(ctx, s, o.policy, o.metrics)
}

// bucketPackage is the package whose init registers the object stores.
const bucketPackage = "github.com/stoker-dev/stoker/pipeline/source/bucket"

// remote opens an object-store URL under a retry policy, counting its
// requests into metrics (nil: not counted). Package bucket sets it in its
// init: the clients of S3, GCS and Azure (three SDKs, most of what a
// build of this module compiles) are linked only into the programs that
// read object stores, not into every one that reads a directory.
var remote func(ctx context.Context, url string, p Policy, m *Metrics) (Store, error)

// RegisterRemote makes Open reach object stores through open; package
// bucket calls it in its init, and nothing else should.
func RegisterRemote(open func(ctx context.Context, url string, p Policy, m *Metrics) (Store, error)) {
	remote = open
}

// Option configures a store opened by Open.
type Option func(*options)

type options struct {
	policy  Policy
	metrics *Metrics
}

func newOptions(opts []Option) options {
	o := options{policy: DefaultPolicy()}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithPolicy sets the retry policy of a remote store (default
// DefaultPolicy()).
func WithPolicy(p Policy) Option { return func(o *options) { o.policy = p } }

// WithMetrics counts a remote store's requests into m (default: not
// counted).
func WithMetrics(m *Metrics) Option { return func(o *options) { o.metrics = m } }

// CheckSame refuses got when it is not the object want names: the same
// size, and the same version where both have one, else the same
// modification time where both have one.
func CheckSame(want, got Object) error {
	switch {
	case got.Size != want.Size:
		return fmt.Errorf("%w: %s is %d bytes, indexed at %d", ErrChanged, want.Key, got.Size, want.Size)
	case want.Version != "" && got.Version != "" && got.Version != want.Version:
		return fmt.Errorf("%w: %s is version %s, indexed at %s", ErrChanged, want.Key, got.Version, want.Version)
	case want.Version == "" && !want.ModTime.IsZero() && !got.ModTime.IsZero() && !got.ModTime.Equal(want.ModTime):
		return fmt.Errorf("%w: %s was modified at %s, indexed at %s", ErrChanged, want.Key,
			got.ModTime.UTC().Format(time.RFC3339Nano), want.ModTime.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
