package pipeline

import (
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// CoefCache keeps, for the baseline JPEGs a Decoder decodes, their
// quantized DCT coefficients: each MCU's, in a compact form, once it has
// been entropy-decoded. A later crop of the same file copies the
// coefficients it needs out of the cache instead of Huffman-decoding them,
// which is most of what decoding a small photo's crop costs beside the
// inverse transform and the resampling. Output is the same bytes with or
// without it.
//
// It trades memory for speed where the decoder index (Index) trades
// almost none: about 2 to 3 times the JPEG's bytes per file once its MCUs
// have all been seen (a file's entry fills over its first epochs, as crops
// and the decoding in passing to reach them cover it), where the index
// takes 3% of them. It is for datasets that fit.
//
// A file is admitted on its second decode when the Decoder has an Index
// (the index having an entry for it says it was seen), on its first
// otherwise: with an index, the first epoch stores nothing and runs as
// fast as without the cache; the second pays for storing what it decodes.
// A progressive file's sequential transcode, which the cache also holds
// (transcode.go), is admitted on its own first decode, the file's second
// or later.
//
// Entries are keyed like the index's, by content (xxhash64 and size),
// and each holds a second hash of the file's bytes, independent of the
// first (hash/maphash, seeded per cache), checked on every hit: a file
// whose key collides with a stored one's decodes without the cache rather
// than with the other file's coefficients (Collisions counts them). Memory is bounded by the
// budget: files are admitted while it has room and then kept; none is
// dropped for another. Epochs visit every file once in a new order, so a
// least-recently-used cache smaller than the dataset would drop each entry
// before its next use (and pay for storing it every time): a fixed subset
// serves budget/dataset of the decodes instead. A CoefCache is safe for
// concurrent use by many Decoders (WithCoefCache); a file being decoded by
// one is decoded by the others without the cache meanwhile.
type CoefCache struct {
	t *coefTable
	// hits etc. are counted outside the table's lock.
	mcusWanted, mcusHit, mcusStored atomic.Int64
	refused, collisions             atomic.Int64
	// Progressive files: decodes served from a transcode, transcodes that
	// failed or were refused.
	tcHits, tcFallbacks atomic.Int64
	cleanup             runtime.Cleanup
	seed                maphash.Seed // of the entries' check hashes
}

// coefTable is the part of a CoefCache that its cleanup frees.
type coefTable struct {
	mu       sync.Mutex
	budget   int64
	used     int64 // entries' bytes and reservations of decodes under way
	entries  map[indexKey]*coefEntry
	reserved int64
	// tc holds progressive files' sequential transcodes (transcode.go),
	// and the files seen once or not transcoded; tcBytes their memory,
	// which used counts too.
	tc      map[indexKey]*tcEntry
	tcBytes int64
	tcFiles int // entries of tc that hold a transcode
}

type coefEntry struct {
	p     unsafe.Pointer // the C side's stoker_coefs
	check uint64         // the file's check hash (CoefCache.check)
	bytes int64          // its memory at the last check-in, overhead included
	busy  bool
}

// coefOverhead is what an entry costs beside its C memory: the entry, its
// map slot, the C struct's malloc header.
const coefOverhead = 128

// NewCoefCache returns an empty CoefCache that holds at most budget bytes.
func NewCoefCache(budget int64) *CoefCache {
	t := &coefTable{budget: max(budget, 0), entries: map[indexKey]*coefEntry{}, tc: map[indexKey]*tcEntry{}}
	c := &CoefCache{t: t, seed: maphash.MakeSeed()}
	c.cleanup = runtime.AddCleanup(c, func(t *coefTable) { t.free() }, t)
	return c
}

// WithCoefCache has a Decoder (an Executor's decoders) use and fill c.
// Default: none.
func WithCoefCache(c *CoefCache) Option { return func(o *options) { o.coefs = c } }

// CoefStats is what a CoefCache holds and has done.
type CoefStats struct {
	Entries int   // files with coefficients stored
	Bytes   int64 // their memory, overhead included
	Budget  int64
	// MCUsWanted counts the MCUs that decodes with the cache
	// inverse-transformed, MCUsHit those of them copied from it, MCUsStored
	// the MCUs stored.
	MCUsWanted, MCUsHit, MCUsStored int64
	// Refused counts decodes of files not admitted (the budget was spent).
	Refused int64
	// Collisions counts decodes of files whose key was a stored file's
	// but whose bytes were not (the check hash differed): decoded without
	// the cache.
	Collisions int64
	// TranscodedFiles counts the progressive files held as their
	// sequential transcode, TranscodedBytes the memory of those transcodes
	// (included in Bytes); TranscodeHits the decodes made from them,
	// TranscodeFallbacks the files decoded as progressive because their
	// transcode failed or was refused (their coefficients not all coded to
	// full precision, or the transcode over its bound): see transcode.go.
	TranscodedFiles                   int
	TranscodedBytes                   int64
	TranscodeHits, TranscodeFallbacks int64
}

// Stats returns the CoefCache's counters.
func (c *CoefCache) Stats() CoefStats {
	t := c.t
	t.mu.Lock()
	n, used, tcb, tcn := len(t.entries), t.used-t.reserved, t.tcBytes, t.tcFiles
	t.mu.Unlock()
	return CoefStats{Entries: n, Bytes: used, Budget: t.budget,
		MCUsWanted: c.mcusWanted.Load(), MCUsHit: c.mcusHit.Load(), MCUsStored: c.mcusStored.Load(),
		Refused: c.refused.Load(), Collisions: c.collisions.Load(),
		TranscodedFiles: tcn, TranscodedBytes: tcb,
		TranscodeHits: c.tcHits.Load(), TranscodeFallbacks: c.tcFallbacks.Load()}
}

// Clear drops every entry and frees its memory (the counters stay).
func (c *CoefCache) Clear() { c.t.free() }

// Close frees the cache's memory. Decoders must not use it after.
func (c *CoefCache) Close() {
	c.cleanup.Stop()
	c.t.free()
}

func (t *coefTable) free() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.entries {
		if !e.busy {
			coefsFree(e.p)
		}
		delete(t.entries, k)
	}
	clear(t.tc)
	t.used, t.reserved, t.tcBytes, t.tcFiles = 0, 0, 0, 0
}

// check is the hash of a file's bytes that its entry holds beside its key,
// to tell a colliding file from it.
func (c *CoefCache) check(data []byte) uint64 { return maphash.Bytes(c.seed, data) }

// has reports whether the cache holds an entry keyed k.
func (c *CoefCache) has(k indexKey) bool {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.t.entries[k] != nil
}

// checkout returns k's entry for one decode's exclusive use, made if k is
// new, admit says so and the budget has room, and the bytes the decode may
// add to it (reserved until checkin; at most most). nil: decode without
// the cache, as for a file whose check hash (check) is not the entry's.
func (c *CoefCache) checkout(k indexKey, check uint64, most int64, admit bool) (*coefEntry, int64) {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	room := min(max(t.budget-t.used, 0), most)
	e := t.entries[k]
	switch {
	case e != nil && e.busy, e == nil && !admit:
		return nil, 0
	case e != nil && e.check != check:
		c.collisions.Add(1)
		return nil, 0
	case e == nil && room < coefOverhead:
		c.refused.Add(1)
		return nil, 0
	case e == nil:
		p := coefsNew()
		if p == nil {
			return nil, 0
		}
		if b := coefOverhead + coefsBytes(p); b > room {
			// The overhead fitted, the empty entry does not.
			coefsFree(p)
			c.refused.Add(1)
			return nil, 0
		}
		e = &coefEntry{p: p, check: check, bytes: coefOverhead + coefsBytes(p)}
		t.entries[k] = e
		t.used += e.bytes
		room = max(room-e.bytes, 0)
	}
	e.busy = true
	t.used += room
	t.reserved += room
	return e, room
}

// checkin ends a decode's use of e (checked out with room): ok says the
// decode succeeded; otherwise what it stored is not trusted and the entry
// is dropped.
func (c *CoefCache) checkin(k indexKey, e *coefEntry, room int64, ok bool) {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	e.busy = false
	if t.entries[k] != e { // Close ran meanwhile
		coefsFree(e.p)
		return
	}
	t.used -= room
	t.reserved -= room
	if !ok {
		delete(t.entries, k)
		t.used -= e.bytes
		coefsFree(e.p)
		return
	}
	b := coefOverhead + coefsBytes(e.p)
	t.used += b - e.bytes
	e.bytes = b
}
