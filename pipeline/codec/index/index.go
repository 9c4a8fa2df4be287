// Package index is the decoder index of pipeline/codec's baseline JPEG
// decodes: per file, the entropy decoder's states at checkpoints of its
// scan (huff.c's blob), kept in memory within a budget and saved to and
// loaded from index files. It is plain Go (the C side reads and writes the
// blobs); pipeline/codec's decodes use and extend an Index, and the
// pipeline's root names it for its callers (index.Index).
package index

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
// again without it). Checkpoints loaded from a file (Load) are evidence,
// not truth: an entry is checked against its JPEG's bytes before use, and
// decoding starts only at checkpoints a decode here recorded or confirmed
// (reached from the scan's start, a restart marker or such a checkpoint,
// and found equal); a loaded one is only compared as decodes pass it. An
// entry that fails a check or disagrees is dropped, with every entry of
// the file it came from (counted in FilesDropped; see OnFileDropped). Entries are keyed by the file's content (its length
// and a 64-bit hash of its bytes), so a file that changed, whatever its
// name or modification time says, never meets an index of its old bytes;
// a WebDataset member is keyed like any file. Progressive JPEGs have
// none, but for their sequential transcodes where a CoefCache holds them
// (pipeline/codec's transcode.go); other formats have none and decode as without an Index.
//
// Memory is bounded: entries (about 1 to 2 KB for a 400x400 photo) are
// dropped least recently used first to stay under the budget. An Index is
// safe for concurrent use by many decoders (the pipeline's WithIndex).
type Index struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	entries map[Key]*indexEntry
	lru     indexEntry // sentinel: lru.next is the most recently used

	// files are the index files loaded (Load): an entry's origin is its
	// file's number here plus one; 0: learnt by decoding here.
	files  []loadedFile
	onDrop func(name string, entries int, reason string)

	hits, misses, stale, bad, evicted atomic.Int64
	mcusTotal, mcusDecoded            atomic.Int64
	filesDropped                      atomic.Int64
}

// loadedFile is an index file whose entries were loaded.
type loadedFile struct {
	name    string
	dropped bool
}

// Key is a file's identity by content: what its entry is found by.
type Key struct {
	Sum  uint64 // xxhash64 of its bytes
	Size int64
}

// KeyOf is data's Key.
func KeyOf(data []byte) Key {
	return Key{Sum: xxhash.Sum64(data), Size: int64(len(data))}
}

type indexEntry struct {
	key        Key
	blob       []byte // huff.c's layout; never changed once stored
	origin     uint32 // the index file it came from (Index.files), 0: none
	prev, next *indexEntry
}

// entryOverhead is what an entry costs beside its blob: the entry, its map
// slot, the key.
const entryOverhead = 112

// New returns an empty Index that holds at most budget bytes.
func New(budget int64) *Index {
	ix := &Index{budget: max(budget, 0), entries: map[Key]*indexEntry{}}
	ix.lru.next, ix.lru.prev = &ix.lru, &ix.lru
	return ix
}

// Stats is what an Index holds and has done.
type Stats struct {
	Entries int   // files with an index
	Bytes   int64 // their memory, overhead included
	Budget  int64
	// Hits and Misses count lookups by decodes that could use an index
	// (baseline JPEGs): found or not.
	Hits, Misses int64
	// Stale counts indexes that did not fit their file's headers, Bad those
	// with a checkpoint that failed its checks or disagreed with the file
	// while decoding: both dropped, the file decoded without them. For an
	// index learnt here either means a hash collision or a bug; for one
	// loaded from a file, that the file lied.
	Stale, Bad int64
	// FilesDropped counts index files not used: refused by Load, or
	// dropped whole when an entry of theirs was stale or bad.
	FilesDropped int64
	// Evicted counts entries dropped for the budget.
	Evicted int64
	// MCUsTotal and MCUsDecoded count, over the decodes that had an Index,
	// the MCUs in their scans and those entropy-decoded.
	MCUsTotal, MCUsDecoded int64
}

// Stats returns the Index's counters.
func (ix *Index) Stats() Stats {
	ix.mu.Lock()
	n, used := len(ix.entries), ix.used
	ix.mu.Unlock()
	return Stats{
		Entries: n, Bytes: used, Budget: ix.budget,
		Hits: ix.hits.Load(), Misses: ix.misses.Load(), Stale: ix.stale.Load(), Bad: ix.bad.Load(),
		Evicted: ix.evicted.Load(), MCUsTotal: ix.mcusTotal.Load(), MCUsDecoded: ix.mcusDecoded.Load(),
		FilesDropped: ix.filesDropped.Load(),
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

// OnFileDropped has f called, once per index file, when the file's
// entries are dropped because one of them disagreed with its JPEG (f gets
// the name LoadFile was given, the entries dropped and why). It is called
// without the Index's lock held.
func (ix *Index) OnFileDropped(f func(name string, entries int, reason string)) {
	ix.mu.Lock()
	ix.onDrop = f
	ix.mu.Unlock()
}

// Lookup returns k's blob (nil: none), made the most recently used, and
// the index file it came from (0: none). It counts as a hit or a miss.
func (ix *Index) Lookup(k Key) ([]byte, uint32) {
	ix.mu.Lock()
	e := ix.entries[k]
	var blob []byte
	var origin uint32
	if e != nil {
		ix.unlink(e)
		ix.pushFront(e)
		blob, origin = e.blob, e.origin
	}
	ix.mu.Unlock()
	if e == nil {
		ix.misses.Add(1)
		return nil, 0
	}
	ix.hits.Add(1)
	return blob, origin
}

// Store keeps blob as k's index, the most recently used, dropping the
// least recently used entries past the budget (a blob over the budget
// alone is not kept). origin is the index file whose checkpoints, not yet
// confirmed, it holds (0: none); nothing is stored if that file was
// dropped meanwhile.
func (ix *Index) Store(k Key, blob []byte, origin uint32) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if origin != 0 && ix.files[origin-1].dropped {
		return
	}
	if e := ix.entries[k]; e != nil {
		ix.remove(e)
	}
	if !ix.fits(blob) {
		return
	}
	e := &indexEntry{key: k, blob: blob, origin: origin}
	ix.entries[k] = e
	ix.used += int64(len(blob)) + entryOverhead
	ix.pushFront(e)
	for ix.used > ix.budget {
		ix.remove(ix.lru.prev)
		ix.evicted.Add(1)
	}
}

// pushBack stores blob as k's index, the least recently used, if it fits
// in what the budget has left (loading a saved index from file origin,
// most recent first).
func (ix *Index) pushBack(k Key, blob []byte, origin uint32) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.entries[k] != nil || !ix.fits(blob) || ix.used+int64(len(blob))+entryOverhead > ix.budget {
		return false
	}
	e := &indexEntry{key: k, blob: blob, origin: origin}
	ix.entries[k] = e
	ix.used += int64(len(blob)) + entryOverhead
	e.prev, e.next = ix.lru.prev, &ix.lru
	ix.lru.prev.next = e
	ix.lru.prev = e
	return true
}

func (ix *Index) fits(blob []byte) bool { return int64(len(blob))+entryOverhead <= ix.budget }

// Why Reject drops an entry.
const (
	RejectStale   = "an entry's header is another JPEG's"
	RejectChecks  = "a checkpoint failed its checks against the JPEG's bytes"
	RejectDecoder = "a checkpoint disagreed with the decoder"
)

// reject drops k's index, which did not fit its file (why: one of the
// reject* reasons; RejectStale counts as stale, the others as bad), and,
// when it came from index file origin, every entry still holding that
// file's checkpoints: a file that lied once is not believed about other
// files.
func (ix *Index) Reject(k Key, origin uint32, why string) {
	if why == RejectStale {
		ix.stale.Add(1)
	} else {
		ix.bad.Add(1)
	}
	ix.mu.Lock()
	n := 0
	if e := ix.entries[k]; e != nil {
		ix.remove(e)
		n++
	}
	if origin == 0 || ix.files[origin-1].dropped {
		ix.mu.Unlock()
		return
	}
	lf := &ix.files[origin-1]
	lf.dropped = true
	for _, e := range ix.entries {
		if e.origin == origin {
			ix.remove(e)
			n++
		}
	}
	name, hook := lf.name, ix.onDrop
	ix.mu.Unlock()
	ix.filesDropped.Add(1)
	if hook != nil {
		hook(name, n, why)
	}
}

// addFile registers an index file being loaded and returns its origin
// number for its entries.
func (ix *Index) addFile(name string) uint32 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.files = append(ix.files, loadedFile{name: name})
	return uint32(len(ix.files))
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

// CountMCUs adds a decode's MCUs to the Stats: those in its scan and
// those it entropy-decoded.
func (ix *Index) CountMCUs(total, decoded int64) {
	ix.mcusTotal.Add(total)
	ix.mcusDecoded.Add(decoded)
}

// LoadedEntries counts the entries that hold checkpoints of an index file
// (Load) not yet confirmed by a decode here.
func (ix *Index) LoadedEntries() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	for _, e := range ix.entries {
		if e.origin != 0 {
			n++
		}
	}
	return n
}

// snapshot returns the entries, most recently used first.
func (ix *Index) snapshot() []indexEntry {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make([]indexEntry, 0, len(ix.entries))
	for e := ix.lru.next; e != &ix.lru; e = e.next {
		out = append(out, indexEntry{key: e.key, blob: e.blob, origin: e.origin})
	}
	return out
}

// The blob layout (huff.c), for checking blobs read from disk and for
// writing them.
const (
	blobMagic  = 0x31584953 // "SIX1", little-endian
	BlobHeader = 32
	blobSure   = 0x80000000 // in a position: confirmed by a decode here
)

// BlobCheckpoints returns, for a blob laid out as huff.c writes an
// index (the magic, and a size that agrees with the geometry in its
// header), its checkpoints and components per checkpoint; n < 0 if it is
// not one. Its header alone (BlobHeader bytes) is enough for n.
func BlobCheckpoints(b []byte) (n, ncomp int) {
	if len(b) < BlobHeader || binary.LittleEndian.Uint32(b) != blobMagic {
		return -1, 0
	}
	mpr, rows := int(binary.LittleEndian.Uint16(b[4:])), int(binary.LittleEndian.Uint16(b[6:]))
	ncomp, stride := int(b[8]), int(b[9])
	if mpr < 1 || rows < 1 || ncomp < 1 || ncomp > 4 || stride < 1 || stride > mpr {
		return -1, 0
	}
	return rows * ((mpr + stride - 1) / stride), ncomp
}

// BlobValid reports whether b is laid out as huff.c writes an index to
// disk: the magic, a size that agrees with the geometry in its header, no
// position marked sure. (The C side checks the geometry and checkpoints
// against the file before using one.)
func BlobValid(b []byte) bool {
	n, ncomp := BlobCheckpoints(b)
	if n < 0 || len(b) != BlobHeader+n*(4+2*ncomp) {
		return false
	}
	for k := range n {
		if binary.LittleEndian.Uint32(b[BlobHeader+4*k:])&blobSure != 0 {
			return false
		}
	}
	return true
}

// BlobConfirmedOnly writes into dst (len(b) bytes) the part of b that a
// decode here confirmed, as it goes to disk: the sure checkpoints, not
// marked sure; the others unknown. It returns how many it kept.
func BlobConfirmedOnly(dst, b []byte) int {
	n, ncomp := BlobCheckpoints(b)
	copy(dst, b)
	known := 0
	for k := range n {
		at := BlobHeader + 4*k
		v := binary.LittleEndian.Uint32(b[at:])
		if v&blobSure != 0 {
			binary.LittleEndian.PutUint32(dst[at:], v&^blobSure)
			known++
			continue
		}
		binary.LittleEndian.PutUint32(dst[at:], 0)
		dc := BlobHeader + 4*n + 2*ncomp*k
		clear(dst[dc : dc+2*ncomp])
	}
	binary.LittleEndian.PutUint32(dst[20:], uint32(known))
	return known
}

// BlobConfirmed counts b's sure checkpoints.
func BlobConfirmed(b []byte) int {
	n, _ := BlobCheckpoints(b)
	c := 0
	for k := range n {
		if binary.LittleEndian.Uint32(b[BlobHeader+4*k:])&blobSure != 0 {
			c++
		}
	}
	return c
}
