package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
)

// CoefCache keeps, for the baseline JPEGs a Scratch decodes (DecodeViews), their
// quantized DCT coefficients: each MCU's, in a compact form, once it has
// been entropy-decoded. A later crop of the same file copies the
// coefficients it needs out of the cache instead of Huffman-decoding them,
// which is most of what decoding a small photo's crop costs beside the
// inverse transform and the resampling. Output is the same bytes with or
// without it.
//
// It trades memory for speed where the decoder index (index.Index) trades
// almost none: about 2 to 3 times the JPEG's bytes per file once its MCUs
// have all been seen (a file's entry fills over its first epochs, as crops
// and the decoding in passing to reach them cover it), where the index
// takes 3% of them. It is for datasets that fit.
//
// A file is admitted on its second decode when the decode has an Index
// (the index having an entry for it says it was seen), on its first
// otherwise: with an index, the first epoch stores nothing and runs as
// fast as without the cache; the second pays for storing what it decodes.
// A progressive file's sequential transcode, which the cache also holds
// (transcode.go), is made on the file's first decode, its every MCU
// stored at once.
//
// Entries are keyed by content: the file's size and a 128-bit MAC of its
// bytes under a key drawn per cache (AES-GCM's GMAC: GHASH, a polynomial
// over GF(2^128) evaluated at a secret point), one pass over the file.
// Its first 64 bits and the size find the entry; the other 64 are the
// check, compared on every hit: a file whose key collides with a stored
// one's decodes without the cache rather than with the other file's
// coefficients (Collisions counts them). For any two files of one size
// and n 16-byte blocks, fixed before the key is drawn (crafted ones
// included), the whole tag matches with probability at most (n+1)/2^128
// (2^-115 for a 100 KB file). A hit then takes the file's decoder-index
// key (xxhash64, which index files are written by) from its entry rather
// than hashing the file again: a cached sample's file is hashed once.
// Memory is bounded by the
// budget: files are admitted while it has room and then kept; none is
// dropped for another. Epochs visit every file once in a new order, so a
// least-recently-used cache smaller than the dataset would drop each entry
// before its next use (and pay for storing it every time): a fixed subset
// serves budget/dataset of the decodes instead. A CoefCache is safe for
// concurrent use by many decoders (the pipeline's WithCoefCache); a file
// being decoded by one is decoded by the others without the cache
// meanwhile.
type CoefCache struct {
	t *coefTable
	// hits etc. are counted outside the table's lock.
	mcusWanted, mcusHit, mcusStored atomic.Int64
	refused, collisions             atomic.Int64
	// Progressive files: decodes served from a transcode, transcodes that
	// failed or were refused.
	tcHits, tcFallbacks atomic.Int64
	cleanup             runtime.Cleanup
	mac                 cipher.AEAD  // the files' MACs (id); nil: seed
	seed                maphash.Seed // id's fallback where GCM is refused
}

// coefKey finds a file's entry: its size and the first 64 bits of its MAC
// (CoefCache.id). The other 64 bits are the entry's check.
type coefKey struct {
	sum  uint64
	size int64
}

// fileKeys is what one decode knows of its file's identities, each
// computed at most once: its coefficient-cache key and check (cid, check)
// and its decoder-index key (xx, from a cache entry on a hit), and hint
// (coefHint), which says whether the cache may hold it at all.
type fileKeys struct {
	cid    coefKey
	check  uint64
	hint   uint64
	xx     index.Key
	cidOK  bool
	hintOK bool
	xxOK   bool
}

// coefTable is the part of a CoefCache that its cleanup frees.
type coefTable struct {
	mu       sync.Mutex
	budget   int64
	used     int64 // entries' bytes and reservations of decodes under way
	entries  map[coefKey]*coefEntry
	reserved int64
	// hints counts the entries by coefHint: a file whose hint is not
	// here has no entry, and its decode need not compute its MAC.
	hints map[uint64]int32
	// tc holds progressive files' sequential transcodes (transcode.go),
	// and the files not transcoded; tcBytes their memory (their headers
	// and their coefficient entries), which used counts too.
	tc      map[coefKey]*tcEntry
	tcBytes int64
	tcFiles int // entries of tc that hold a transcode
}

type coefEntry struct {
	p     unsafe.Pointer // the C side's stoker_coefs
	check uint64         // the second half of the file's MAC (CoefCache.id)
	hint  uint64         // the file's coefHint
	xx    index.Key      // the file's decoder-index key, where xxOK
	xxOK  bool
	bytes int64 // its memory at the last check-in, overhead included
	busy  bool
	tc    bool // a progressive file's transcode (transcode.go): counted in tcBytes
}

// coefOverhead is what an entry costs beside its C memory: the entry (64
// bytes), its map slot, its hint's slot, the C struct's malloc header.
const coefOverhead = 160

// NewCoefCache returns an empty CoefCache that holds at most budget bytes.
func NewCoefCache(budget int64) *CoefCache {
	t := &coefTable{budget: max(budget, 0), entries: map[coefKey]*coefEntry{}, hints: map[uint64]int32{}, tc: map[coefKey]*tcEntry{}}
	c := &CoefCache{t: t, seed: maphash.MakeSeed()}
	var key [16]byte
	rand.Read(key[:])
	if b, err := aes.NewCipher(key[:]); err == nil {
		// NewGCM refuses in FIPS 140-only mode (a fixed nonce): id then
		// falls back to two 64-bit hashes.
		c.mac, _ = cipher.NewGCM(b)
	}
	c.cleanup = runtime.AddCleanup(c, func(t *coefTable) { t.free() }, t)
	return c
}

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
	// but whose bytes were not (the check, the second half of the MAC,
	// differed): decoded without the cache.
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

// Close frees the cache's memory. Decodes must not use it after.
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
	clear(t.hints)
	clear(t.tc)
	t.used, t.reserved, t.tcBytes, t.tcFiles = 0, 0, 0, 0
}

// id is a file's key and check: its size and its MAC, one pass over its
// bytes. The MAC is GMAC under the cache's key with a fixed nonce: the
// tag is GHASH_H(data) xor E_K(nonce), H and K secret, so two files of
// one size collide only where H is a root of the nonzero polynomial their
// difference makes (degree n+1 for n blocks). Where GCM was refused, the
// key is a seeded maphash and the check an xxhash64 (two passes).
// The tag is made in scratch (the calling Scratch's: none allocated).
func (c *CoefCache) id(data []byte, scratch *[16]byte) (coefKey, uint64) {
	if c.mac == nil {
		return coefKey{sum: maphash.Bytes(c.seed, data), size: int64(len(data))}, xxhash.Sum64(data)
	}
	t := c.mac.Seal(scratch[:0], coefNonce[:], nil, data)
	return coefKey{sum: binary.LittleEndian.Uint64(t[:8]), size: int64(len(data))}, binary.LittleEndian.Uint64(t[8:16])
}

// coefNonce is the MACs' nonce: fixed, as a MAC of the data alone needs
// (nothing is encrypted under it).
var coefNonce [12]byte

// coefHint routes a decode, without reading the whole file: its size and
// three 32-byte windows of it. A file whose hint no entry has is not in
// the cache (the same bytes give the same hint), so its decode skips the
// MAC unless it is to be admitted; two files with one hint only cost the
// second a MAC that finds nothing.
func coefHint(data []byte) uint64 {
	var b [8 + 3*32]byte
	n := len(data)
	binary.LittleEndian.PutUint64(b[:8], uint64(n))
	for i, at := range [3]int{n / 4, n / 2, 3 * n / 4} {
		copy(b[8+32*i:8+32*(i+1)], data[at:])
	}
	return xxhash.Sum64(b[:])
}

// mayHold says whether the cache may hold a file of hint h.
func (c *CoefCache) mayHold(h uint64) bool {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.t.hints[h] > 0
}

// indexKeyOf returns the decoder-index key of the file the entry of k
// holds, where the entry is there, its check is check and it knows it.
func (c *CoefCache) indexKeyOf(k coefKey, check uint64) (index.Key, bool) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if e := c.t.entries[k]; e != nil && e.check == check && e.xxOK {
		return e.xx, true
	}
	return index.Key{}, false
}

// checkout returns the entry of the file fk names for one decode's
// exclusive use, made if it is new, admit says so and the budget has
// room, and the bytes the decode may add to it (reserved until checkin; at
// most most). nil: decode without the cache, as for a file whose check
// (the second half of its MAC) is not the entry's.
func (c *CoefCache) checkout(fk *fileKeys, most int64, admit bool) (*coefEntry, int64) {
	k, check := fk.cid, fk.check
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
		e = &coefEntry{p: p, check: check, hint: fk.hint, bytes: coefOverhead + coefsBytes(p)}
		t.entries[k] = e
		t.hints[e.hint]++
		t.used += e.bytes
		room = max(room-e.bytes, 0)
	}
	if fk.xxOK && !e.xxOK {
		e.xx, e.xxOK = fk.xx, true
	}
	e.busy = true
	t.used += room
	t.reserved += room
	return e, room
}

// adopt makes p, filled with every MCU of the transcode of the file fk
// names (mcus of them), that file's entry, if it has none and the budget
// has room (0: keep none); it reports whether it did. Otherwise it frees p.
func (c *CoefCache) adopt(fk *fileKeys, p unsafe.Pointer, mcus, room int64) bool {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	b := coefOverhead + coefsBytes(p)
	if t.entries[fk.cid] != nil || min(t.budget-t.used, room) < b {
		coefsFree(p)
		return false
	}
	e := &coefEntry{p: p, check: fk.check, hint: fk.hint, bytes: b, tc: true}
	t.entries[fk.cid] = e
	t.hints[e.hint]++
	t.used += b
	t.tcBytes += b
	c.mcusStored.Add(mcus)
	return true
}

// present says whether the file fk names has an entry (in use or not).
func (c *CoefCache) present(fk *fileKeys) bool {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	e := c.t.entries[fk.cid]
	return e != nil && e.check == fk.check
}

// drop deletes k's entry and frees it, unless a decode has it (then it
// stays); t.mu held.
func (t *coefTable) drop(k coefKey) {
	e := t.entries[k]
	if e == nil || e.busy {
		return
	}
	delete(t.entries, k)
	if t.hints[e.hint]--; t.hints[e.hint] <= 0 {
		delete(t.hints, e.hint)
	}
	t.used -= e.bytes
	if e.tc {
		t.tcBytes -= e.bytes
	}
	coefsFree(e.p)
}

// checkin ends a decode's use of e (checked out with room): ok says the
// decode succeeded; otherwise what it stored is not trusted and the entry
// is dropped.
func (c *CoefCache) checkin(k coefKey, e *coefEntry, room int64, ok bool) {
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
		t.drop(k)
		return
	}
	b := coefOverhead + coefsBytes(e.p)
	t.used += b - e.bytes
	if e.tc {
		t.tcBytes += b - e.bytes
	}
	e.bytes = b
}
