package dataset

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// StoreDataset is a dataset read from a source.Store through a
// source.Ranges, as a Manifest describes it: an ImageFolder (a sample is a
// whole object) or WebDataset shards (a sample is a member's bytes inside
// its shard). Each read asks the store for the object's indexed version,
// so an object replaced or removed after indexing is a per-sample error
// naming it, never other bytes. Its fingerprint is the one Open's
// ImageFolder or WebDataset has for the same files.
type StoreDataset struct {
	m       *Manifest
	st      source.Store
	rd      source.Ranges
	fp      string
	maxSize int64
	// stale is the hint a changed object's error gives.
	stale string
	// ctx ends the reads in flight when the dataset closes.
	ctx    context.Context
	cancel context.CancelFunc
}

// ShardedStoreDataset is a StoreDataset of WebDataset shards: it says
// where each shard's samples start, so the block shuffle can read few
// shards at a time.
type ShardedStoreDataset struct {
	*StoreDataset
	starts []int

	mu sync.Mutex
	// hinted is when each shard was last hinted whole (PrefetchShards),
	// with the fields of the job that hinted it: a shard is hinted again
	// only after rehint, so the batches of a window do not each hint its
	// thousands of ranges.
	hinted map[shardHint]time.Time
}

// shardHint is a shard hinted whole with some fields (FieldSet.key).
type shardHint struct {
	shard  int
	fields string
}

// rehint is how long a shard hinted whole is not hinted again: about the
// read-ahead's own limit on bytes left unread (source.Fetcher drops them
// after a minute), so a shard whose bytes were dropped is asked for again.
const rehint = 30 * time.Second

// NewStoreDataset makes the dataset m describes, read from st through rd
// (nil: source.Direct{Store: st}, each sample read when asked). A
// WebDataset comes as a *ShardedStoreDataset. Closing it closes st.
func NewStoreDataset(st source.Store, m *Manifest, rd source.Ranges) (Dataset, error) {
	if rd == nil {
		rd = source.Direct{Store: st}
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	if m.Len() == 0 {
		return nil, fmt.Errorf("%w: the manifest of %s lists no samples", ErrUnsupported, st)
	}
	if err := checkVersions(st, m); err != nil {
		return nil, err
	}
	d := &StoreDataset{m: m, st: st, rd: rd, fp: m.Fingerprint(), maxSize: DefaultMaxFileSize,
		stale: "the dataset changed since it was listed; restart to list it again, or run `stoker index " + st.String() + "` and start with its manifest"}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if m.Layout != LayoutWebDataset {
		return d, nil
	}
	s := &ShardedStoreDataset{StoreDataset: d, hinted: map[shardHint]time.Time{}}
	prev := -1
	for i, o := range m.samples.obj {
		if int(o) != prev {
			s.starts = append(s.starts, i)
			prev = int(o)
		}
	}
	return s, nil
}

// checkVersions refuses a manifest of a remote store with samples that
// could be read unchecked: of an object without a version, and without a
// content hash of their own (IndexStore hashes what a store lists without
// one).
func checkVersions(st source.Store, m *Manifest) error {
	if !source.IsRemote(st.String()) {
		return nil
	}
	n, first := 0, -1
	for i := range m.Len() {
		if m.Object(int(m.samples.obj[i])).Version == "" && m.hash(i) == nil {
			if n++; first < 0 {
				first = i
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("%w: %d samples of %s, the first %s, are of objects without a version (ETag or generation) and have no content hash: "+
			"nothing would tell other bytes from theirs (run `stoker index %s` again: it hashes what the store gives no version for)",
			ErrManifest, n, st, errs.Clip(m.name(first), 256), st)
	}
	return nil
}

var (
	_ Sharded              = (*ShardedStoreDataset)(nil)
	_ Prefetcher           = (*StoreDataset)(nil)
	_ ShardPrefetcher      = (*ShardedStoreDataset)(nil)
	_ Fielded              = (*StoreDataset)(nil)
	_ FieldPrefetcher      = (*StoreDataset)(nil)
	_ ShardFieldPrefetcher = (*ShardedStoreDataset)(nil)
)

// ShardStarts implements Sharded: the first sample index of each shard
// with samples, ascending, the first 0 (samples are in shard order, as
// WebDataset's); the caller must not modify it.
func (d *ShardedStoreDataset) ShardStarts() []int { return d.starts }

// Manifest is the manifest the dataset was made from.
func (d *StoreDataset) Manifest() *Manifest { return d.m }

// Layout is LayoutImageFolder or LayoutWebDataset.
func (d *StoreDataset) Layout() string { return d.m.Layout }

// Store is where the dataset's bytes come from.
func (d *StoreDataset) Store() source.Store { return d.st }

// SetMaxFileSize sets the per-sample size cap (default
// DefaultMaxFileSize): a larger sample is refused before it is read.
func (d *StoreDataset) SetMaxFileSize(n int64) { d.maxSize = n }

// Len implements Dataset.
func (d *StoreDataset) Len() int { return d.m.Len() }

// Label implements Dataset.
func (d *StoreDataset) Label(i int) int64 { return int64(d.m.samples.label[i]) }

// Classes implements Dataset.
func (d *StoreDataset) Classes() []string { return d.m.Classes }

// Name implements Dataset: the object's key, and "key/member" inside a
// shard, relative to the store's root.
func (d *StoreDataset) Name(i int) string { return d.m.name(i) }

// Fingerprint implements Dataset.
func (d *StoreDataset) Fingerprint() string { return d.fp }

// Close implements Dataset: reads in flight end, and the store closes.
func (d *StoreDataset) Close() error {
	d.cancel()
	return d.st.Close()
}

// rangeOf is what is read of sample i: its bytes, and in a shard the
// tar header before them too (tarBlock bytes), which Read holds to the
// manifest's member name and size.
func (d *StoreDataset) rangeOf(i int) source.Range {
	t := &d.m.samples
	return d.memberRange(i, t.off[i], t.size[i])
}

// memberRange is what is read of bytes [off, off+size) of sample i's
// object: in a shard, with the tar header before them.
func (d *StoreDataset) memberRange(i int, off, size int64) source.Range {
	r := source.Range{Obj: d.m.Object(int(d.m.samples.obj[i])), Off: off, Len: size}
	if d.m.Layout == LayoutWebDataset && r.Off >= tarBlock {
		r.Off -= tarBlock
		r.Len += tarBlock
	}
	return r
}

// Prefetch implements Prefetcher: the samples at indices will be read
// soon, in this order; their ranges go to the Ranges' Prefetch, which may
// start reading them. The dataset keeps no reference to indices.
func (d *StoreDataset) Prefetch(indices []int64) { d.PrefetchFields(indices, nil) }

// PrefetchFields implements FieldPrefetcher: Prefetch, with the ranges of
// the samples' fields of fs beside their images' (a WebDataset sample's
// members lie together in its shard: one request reads them all).
func (d *StoreDataset) PrefetchFields(indices []int64, fs *FieldSet) {
	if _, direct := d.rd.(source.Direct); direct {
		return // which ignores hints: spare the ranges
	}
	rs := make([]source.Range, 0, len(indices))
	for _, i := range indices {
		if i < 0 || i >= int64(d.m.Len()) {
			continue
		}
		rs = d.appendRanges(rs, int(i), fs)
	}
	if len(rs) > 0 {
		d.rd.Prefetch(rs)
	}
}

// appendRanges appends the ranges of sample i (its image, and its fields
// of fs) that are within the size cap.
func (d *StoreDataset) appendRanges(rs []source.Range, i int, fs *FieldSet) []source.Range {
	if d.m.samples.size[i] <= d.maxSize && !d.m.samples.noImage[int32(i)] {
		rs = append(rs, d.rangeOf(i))
		if off, size := d.m.cls(i); size > 0 { // read beside the image, to check its label
			rs = append(rs, d.memberRange(i, off, size))
		}
	}
	if fs == nil || d.m.Layout != LayoutWebDataset {
		return rs
	}
	t := &d.m.samples
	for _, id := range fs.ids {
		if id < 0 && id > fieldIDImage {
			continue // not a member: nothing to read
		}
		off, size, ok := d.m.wfields.where(i, id, cut(&t.mems, t.memEnd, i), t.off[i], t.size[i])
		if ok && size <= min(d.maxSize, fs.max) && off != t.off[i] {
			rs = append(rs, d.memberRange(i, off, size))
		}
	}
	return rs
}

// PrefetchShards implements ShardPrefetcher: every sample of the shards of
// indices is hinted, shard by shard in the order indices name them, so
// that the Ranges (a source.Fetcher) coalesces each shard into a few long
// reads; the samples of indices are among them. A shard hinted within
// rehint is not hinted again.
func (d *ShardedStoreDataset) PrefetchShards(indices []int64) { d.PrefetchShardFields(indices, nil) }

// PrefetchShardFields implements ShardFieldPrefetcher: PrefetchShards,
// with the fields of fs of every sample of the shards.
func (d *ShardedStoreDataset) PrefetchShardFields(indices []int64, fs *FieldSet) {
	if _, direct := d.rd.(source.Direct); direct {
		return
	}
	now := time.Now()
	var rs []source.Range
	d.mu.Lock()
	for _, i := range indices {
		if i < 0 || i >= int64(d.m.Len()) {
			continue
		}
		s := d.shardOf(int(i))
		h := shardHint{shard: s, fields: fs.key()}
		if t, ok := d.hinted[h]; ok && now.Sub(t) < rehint {
			continue
		}
		d.hinted[h] = now
		end := d.m.Len()
		if s+1 < len(d.starts) {
			end = d.starts[s+1]
		}
		for j := d.starts[s]; j < end; j++ {
			rs = d.appendRanges(rs, j, fs)
		}
	}
	for h, t := range d.hinted {
		if now.Sub(t) >= rehint {
			delete(d.hinted, h)
		}
	}
	d.mu.Unlock()
	if len(rs) > 0 {
		d.rd.Prefetch(rs)
	}
}

// FieldID implements Fielded: an ImageFolder's "path" and "__key__"; a
// WebDataset's members' extensions, "__key__" and, labelled, "cls". A
// manifest of an older stoker records no members: only the image's own
// extension, "__key__" and "cls" then.
func (d *StoreDataset) FieldID(name string) (int, bool) {
	if d.m.Layout == LayoutWebDataset {
		return d.m.wfields.fieldID(name)
	}
	switch name {
	case FieldKey:
		return fieldIDKey, true
	case FieldPath:
		return fieldIDPath, true
	}
	return 0, false
}

// FieldNames implements Fielded.
func (d *StoreDataset) FieldNames() []string {
	if d.m.Layout == LayoutWebDataset {
		return d.m.wfields.fieldNames()
	}
	return []string{FieldPath, FieldKey, FieldSource}
}

// FieldsNotIndexed says why a WebDataset's members are not fields: its
// manifest was made by an older stoker ("" when they are).
func (d *StoreDataset) FieldsNotIndexed() string {
	if d.m.noFields && d.m.Layout == LayoutWebDataset {
		return "the dataset's manifest was made by an older stoker and records no members but the images: run `stoker index " + d.st.String() + "` again for its fields"
	}
	return ""
}

// FieldSize implements Fielded.
func (d *StoreDataset) FieldSize(i, id int) int64 {
	t := &d.m.samples
	if d.m.Layout == LayoutWebDataset {
		return d.m.wfields.size(i, id, cut(&t.mems, t.memEnd, i), t.size[i], int64(t.label[i]))
	}
	switch key := d.m.key(int(t.obj[i])); id {
	case fieldIDPath:
		return int64(len(key))
	case fieldIDKey:
		return int64(len(keyOfPath(key)))
	}
	return -1
}

// ReadField implements Fielded: a member's bytes are read as an image's
// are, through the Ranges (the byte cache, the read-ahead).
func (d *StoreDataset) ReadField(i, id int, buf []byte) ([]byte, error) {
	t := &d.m.samples
	if d.m.Layout != LayoutWebDataset {
		key := d.m.key(int(t.obj[i]))
		switch id {
		case fieldIDPath:
			return append(buf[:0], key...), nil
		case fieldIDKey:
			return append(buf[:0], keyOfPath(key)...), nil
		}
		return nil, fmt.Errorf("%w: sample %s has no such field", ErrUnsupported, d.Name(i))
	}
	member := cut(&t.mems, t.memEnd, i)
	if b, ok := d.m.wfields.inline(id, member, int64(t.label[i]), buf); ok {
		return b, nil
	}
	if id < 0 && id > fieldIDImage {
		return nil, fmt.Errorf("%w: sample %s has no such field", ErrUnsupported, d.Name(i))
	}
	off, size, ok := d.m.wfields.where(i, id, member, t.off[i], t.size[i])
	if !ok {
		return nil, fmt.Errorf("%w: sample %s has no such field", ErrUnsupported, d.Name(i))
	}
	name := member
	if off != t.off[i] {
		// Another member of the key: its header names it so.
		key, _, _ := keyOfMember(member)
		if t.noImage[int32(i)] {
			key = member
		}
		name = key + "." + d.m.wfields.extOf(id)
	}
	return d.readMember(i, name, off, size, buf)
}

// shardOf is the shard sample i is in.
func (d *ShardedStoreDataset) shardOf(i int) int {
	return sort.Search(len(d.starts), func(s int) bool { return d.starts[s] > i }) - 1
}
