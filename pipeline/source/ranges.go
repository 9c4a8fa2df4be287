package source

import "context"

// Range is a byte range of one object: a sample's bytes inside its tar
// shard, or a whole object.
type Range struct {
	Obj      Object
	Off, Len int64
}

// Ranges reads byte ranges of a store. A dataset reads its samples through
// one; a Fetcher (the byte cache and read-ahead) is the one remote
// datasets use, Direct the plain one.
type Ranges interface {
	// Read returns r's bytes, reusing buf when it is large enough.
	Read(ctx context.Context, r Range, buf []byte) ([]byte, error)
	// Prefetch says these ranges will be read soon, in this order: an
	// implementation may start reading them (it must bound what it holds),
	// or ignore the hint.
	Prefetch(rs []Range)
}

// CheckedRanges is a Ranges that can check what it reads and remember
// that it did (a Fetcher: ReadChecked), so bytes it caches are checked
// once rather than on every read.
type CheckedRanges interface {
	Ranges
	// ReadChecked is Read for bytes that check must accept; check's error
	// is returned for bytes it refuses.
	ReadChecked(ctx context.Context, r Range, buf []byte, check func([]byte) error) ([]byte, error)
}

// Direct reads every range from its store when asked, with no cache and
// no read-ahead.
type Direct struct{ Store Store }

// Read implements Ranges.
func (d Direct) Read(ctx context.Context, r Range, buf []byte) ([]byte, error) {
	if int64(cap(buf)) < r.Len {
		buf = make([]byte, r.Len)
	}
	buf = buf[:r.Len]
	if err := d.Store.ReadRange(ctx, r.Obj, r.Off, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// Prefetch implements Ranges: Direct ignores the hint.
func (Direct) Prefetch([]Range) {}
