package pipeline

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Index keeps, for the baseline JPEGs a Decoder has decoded, an index of
// entropy-decoder states: at every few MCUs of every MCU row, the bit
// position in the scan and the DC predictors (zlib's zran.c, for a JPEG).
// A crop of a file decoded before then starts entropy decoding at the
// checkpoint nearest above and left of it and skips what lies to its
// right, instead of decoding every row from the top: from the second epoch
// on, Huffman decoding costs about the crop's share of the file. Output is
// the same bytes with or without it.
//
// An index is a by-product of decoding: a file's first decode records the
// checkpoints it passes, later decodes add those they pass and check those
// they pass that are known (a disagreement drops the index and decodes
// again without it). Entries are keyed by the file's content (its length
// and a 64-bit hash of its bytes), so a file that changed, whatever its
// name or modification time says, never meets an index of its old bytes;
// a WebDataset member is keyed like any file. Progressive JPEGs and other
// formats have none and decode as without an Index.
//
// Memory is bounded: entries (about 1 to 2 KB for a 400x400 photo) are
// dropped least recently used first to stay under the budget. An Index is
// safe for concurrent use by many Decoders (WithIndex).
type Index struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	entries map[indexKey]*indexEntry
	lru     indexEntry // sentinel: lru.next is the most recently used

	hits, misses, stale, bad, evicted atomic.Int64
	mcusTotal, mcusDecoded            atomic.Int64
}

// indexKey is a file's identity by content.
type indexKey struct {
	sum  uint64 // xxhash64 of its bytes
	size int64
}

func keyOf(data []byte) indexKey {
	return indexKey{sum: xxhash.Sum64(data), size: int64(len(data))}
}

type indexEntry struct {
	key        indexKey
	blob       []byte // hindex.c's layout; never changed once stored
	prev, next *indexEntry
}

// entryOverhead is what an entry costs beside its blob: the entry, its map
// slot, the key.
const entryOverhead = 112

// NewIndex returns an empty Index that holds at most budget bytes.
func NewIndex(budget int64) *Index {
	ix := &Index{budget: max(budget, 0), entries: map[indexKey]*indexEntry{}}
	ix.lru.next, ix.lru.prev = &ix.lru, &ix.lru
	return ix
}

// WithIndex has a Decoder (an Executor's decoders) use and extend ix.
// Default: none (every decode is a first decode).
func WithIndex(ix *Index) Option { return func(o *options) { o.index = ix } }

// IndexStats is what an Index holds and has done.
type IndexStats struct {
	Entries int   // files with an index
	Bytes   int64 // their memory, overhead included
	Budget  int64
	// Hits and Misses count lookups by decodes that could use an index
	// (baseline JPEGs): found or not.
	Hits, Misses int64
	// Stale counts indexes that did not fit their file's headers, Bad those
	// that disagreed with it while decoding: both dropped, the file decoded
	// without them. Either means a hash collision or a bug.
	Stale, Bad int64
	// Evicted counts entries dropped for the budget.
	Evicted int64
	// MCUsTotal and MCUsDecoded count, over the decodes that had an Index,
	// the MCUs in their scans and those entropy-decoded.
	MCUsTotal, MCUsDecoded int64
}

// Stats returns the Index's counters.
func (ix *Index) Stats() IndexStats {
	ix.mu.Lock()
	n, used := len(ix.entries), ix.used
	ix.mu.Unlock()
	return IndexStats{
		Entries: n, Bytes: used, Budget: ix.budget,
		Hits: ix.hits.Load(), Misses: ix.misses.Load(), Stale: ix.stale.Load(), Bad: ix.bad.Load(),
		Evicted: ix.evicted.Load(), MCUsTotal: ix.mcusTotal.Load(), MCUsDecoded: ix.mcusDecoded.Load(),
	}
}

// Clear drops every entry (the counters stay).
func (ix *Index) Clear() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	clear(ix.entries)
	ix.lru.next, ix.lru.prev = &ix.lru, &ix.lru
	ix.used = 0
}

// get returns k's blob (nil: none) and makes it the most recently used.
func (ix *Index) get(k indexKey) []byte {
	ix.mu.Lock()
	e := ix.entries[k]
	if e != nil {
		ix.unlink(e)
		ix.pushFront(e)
	}
	ix.mu.Unlock()
	if e == nil {
		ix.misses.Add(1)
		return nil
	}
	ix.hits.Add(1)
	return e.blob
}

// put stores blob as k's index, the most recently used, dropping the least
// recently used entries past the budget. A blob over the budget alone is
// not kept.
func (ix *Index) put(k indexKey, blob []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e := ix.entries[k]; e != nil {
		ix.remove(e)
	}
	if !ix.fits(blob) {
		return
	}
	e := &indexEntry{key: k, blob: blob}
	ix.entries[k] = e
	ix.used += int64(len(blob)) + entryOverhead
	ix.pushFront(e)
	for ix.used > ix.budget {
		ix.remove(ix.lru.prev)
		ix.evicted.Add(1)
	}
}

// pushBack stores blob as k's index, the least recently used, if it fits
// in what the budget has left (loading a saved index, most recent first).
func (ix *Index) pushBack(k indexKey, blob []byte) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.entries[k] != nil || !ix.fits(blob) || ix.used+int64(len(blob))+entryOverhead > ix.budget {
		return false
	}
	e := &indexEntry{key: k, blob: blob}
	ix.entries[k] = e
	ix.used += int64(len(blob)) + entryOverhead
	e.prev, e.next = ix.lru.prev, &ix.lru
	ix.lru.prev.next = e
	ix.lru.prev = e
	return true
}

func (ix *Index) fits(blob []byte) bool { return int64(len(blob))+entryOverhead <= ix.budget }

// drop forgets k's index.
func (ix *Index) drop(k indexKey) {
	ix.mu.Lock()
	if e := ix.entries[k]; e != nil {
		ix.remove(e)
	}
	ix.mu.Unlock()
}

func (ix *Index) remove(e *indexEntry) {
	ix.unlink(e)
	delete(ix.entries, e.key)
	ix.used -= int64(len(e.blob)) + entryOverhead
}

func (ix *Index) unlink(e *indexEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (ix *Index) pushFront(e *indexEntry) {
	e.prev, e.next = &ix.lru, ix.lru.next
	ix.lru.next.prev = e
	ix.lru.next = e
}

// snapshot returns the entries, most recently used first.
func (ix *Index) snapshot() []indexEntry {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make([]indexEntry, 0, len(ix.entries))
	for e := ix.lru.next; e != &ix.lru; e = e.next {
		out = append(out, indexEntry{key: e.key, blob: e.blob})
	}
	return out
}

// The blob layout's header (hindex.c), for checking blobs read from disk.
const (
	blobMagic  = 0x31584953 // "SIX1", little-endian
	blobHeader = 32
)

// blobValid reports whether b is laid out as hindex.c writes an index: the
// magic, and a size that agrees with the geometry in its header. (The C
// side checks the geometry against the file before using one.)
func blobValid(b []byte) bool {
	if len(b) < blobHeader || binary.LittleEndian.Uint32(b) != blobMagic {
		return false
	}
	mpr, rows := int(binary.LittleEndian.Uint16(b[4:])), int(binary.LittleEndian.Uint16(b[6:]))
	ncomp, stride := int(b[8]), int(b[9])
	if mpr < 1 || rows < 1 || ncomp < 1 || ncomp > 4 || stride < 1 || stride > mpr {
		return false
	}
	n := rows * ((mpr + stride - 1) / stride)
	return len(b) == blobHeader+n*(4+2*ncomp)
}
