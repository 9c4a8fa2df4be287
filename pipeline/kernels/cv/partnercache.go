package cv

// The partner cache: a node's load_image'd images (a multi-image op's, each
// decoded whole and resized to imgsz on its long side), shared by its
// Executor's decoders, so that a photo a window of the epoch's order
// reads several times (once as a sample, about three times more as a
// mosaic's partner: Partners draws them from its window) is decoded
// about once, as ultralytics' buffer keeps its last images decoded.

import (
	"container/list"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// PartnerCache holds load_image'd images within a budget of bytes, the
// least recently used evicted first. An entry is keyed by its file's
// bytes (two 64-bit keyed hashes and the length), the imgsz it was
// resized to and the decoder's options (pixel budget, reference path): a hit is the very image a
// decode of those bytes makes, so the cache never changes a sample's
// bytes, whatever dataset, index or epoch the file is read for (the
// sample's and partners' files are still read each time, so a file that
// changed or went is seen as without the cache). Safe for concurrent
// use. An entry's pixels are never written while it is stored or held:
// a decode holds what it takes (Get, Put) until it Releases it, and one
// that holds an entry while it is evicted keeps it until then, so the
// cache may pass its budget by what the decoders hold (at most n images
// a worker). A miss's image is made in an evicted entry's pixels where it
// can (Alloc), warm memory rather than a zeroed megabyte of the Go heap
// (and the kernel's fresh pages): the least recently used one when no
// decode holds it, else one evicted while held, kept once released (at
// most partnerFree of them, beyond the budget).
type PartnerCache struct {
	seeds  [2]maphash.Seed
	mu     sync.Mutex
	budget int64
	used   int64 // the entries' pixels' capacity and overhead
	m      map[PartnerKey]*list.Element
	lru    list.List // of *partnerEntry, most recent first
	free   [][]byte  // evicted pixels no decode holds, for Alloc

	hits, misses, stored, evicted atomic.Int64
}

// PartnerKey is an entry's key (PartnerCache.Key).
type PartnerKey struct {
	h1, h2 uint64
	n      int
	imgsz  int
	opts   uint64 // what else of the decoder's makes the image (pipeline's options)
}

type partnerEntry struct {
	key PartnerKey
	img kernels.Planes
	// refs: the decodes holding img (Get, Put) that have not released it;
	// out: not in the cache (evicted, or never stored). Under mu.
	refs int
	out  bool
}

// PartnerRef is an image a decode holds, from Get or Put, until it
// Releases it: its pixels are not reused meanwhile.
type PartnerRef struct{ e *partnerEntry }

// partnerOverhead is what an entry costs beside its pixels: the entry,
// its list element and its map slot.
const partnerOverhead = 256

// partnerFree is how many evicted images' pixels a cache keeps for Alloc.
const partnerFree = 4

// NewPartnerCache returns an empty PartnerCache that holds at most budget
// bytes (pixels and overhead).
func NewPartnerCache(budget int64) *PartnerCache {
	return &PartnerCache{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, budget: max(budget, 0), m: map[PartnerKey]*list.Element{}}
}

// PartnerStats is what a PartnerCache holds and has done.
type PartnerStats struct {
	Entries int   // images held
	Bytes   int64 // their memory, overhead included
	Budget  int64
	// Hits and Misses count lookups; Stored the images stored, Evicted
	// those evicted to make room.
	Hits, Misses, Stored, Evicted int64
}

// Stats is what c holds and has done.
func (c *PartnerCache) Stats() PartnerStats {
	c.mu.Lock()
	s := PartnerStats{Entries: len(c.m), Bytes: c.used, Budget: c.budget}
	c.mu.Unlock()
	s.Hits, s.Misses, s.Stored, s.Evicted = c.hits.Load(), c.misses.Load(), c.stored.Load(), c.evicted.Load()
	return s
}

// Key is the cache's key of file data resized to imgsz by a decoder whose
// other settings that bear on the image (or on whether it decodes at all)
// opts sums up.
func (c *PartnerCache) Key(data []byte, imgsz int, opts uint64) PartnerKey {
	return PartnerKey{h1: maphash.Bytes(c.seeds[0], data), h2: maphash.Bytes(c.seeds[1], data), n: len(data), imgsz: imgsz, opts: opts}
}

// Get is k's image, most recently used now, held until Release.
func (c *PartnerCache) Get(k PartnerKey) (kernels.Planes, PartnerRef, bool) {
	c.mu.Lock()
	el, ok := c.m[k]
	var e *partnerEntry
	if ok {
		c.lru.MoveToFront(el)
		e = el.Value.(*partnerEntry)
		e.refs++
	}
	c.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return kernels.Planes{}, PartnerRef{}, false
	}
	c.hits.Add(1)
	return e.img, PartnerRef{e}, true
}

// Alloc is n bytes for an image to Put: where the cache is full, it
// evicts the least recently used to make room for it (as Put would) and
// reuses the first one's pixels that no decode holds and are large
// enough; else pixels kept from an entry evicted while held, or new
// memory. Its bytes are an old image's: the caller writes all n.
func (c *PartnerCache) Alloc(n int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.used+int64(n)+partnerOverhead > c.budget && c.lru.Len() > 0 {
		old := c.evictOldest()
		if old.refs == 0 && cap(old.img.Pix) >= n {
			return old.img.Pix[:n]
		}
		if old.refs == 0 {
			c.recycle(old.img.Pix)
		}
	}
	for i, b := range c.free {
		if cap(b) >= n {
			last := len(c.free) - 1
			c.free[i], c.free[last] = c.free[last], nil
			c.free = c.free[:last]
			return b[:n]
		}
	}
	return make([]byte, n)
}

// evictOldest evicts the least recently used entry. Under mu.
func (c *PartnerCache) evictOldest() *partnerEntry {
	old := c.lru.Remove(c.lru.Back()).(*partnerEntry)
	delete(c.m, old.key)
	old.out = true
	c.used -= int64(cap(old.img.Pix)) + partnerOverhead
	c.evicted.Add(1)
	return old
}

// Put stores img (which the cache owns from now on: never written again
// while stored or held) as k's, evicting the least recently used to make
// room, and holds it for the caller until Release; an image over the
// whole budget, or one another decode stored meanwhile, is not stored
// (its pixels go back to Alloc on Release).
func (c *PartnerCache) Put(k PartnerKey, img kernels.Planes) PartnerRef {
	e := &partnerEntry{key: k, img: img, refs: 1, out: true}
	size := int64(cap(img.Pix)) + partnerOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.budget {
		return PartnerRef{e}
	}
	if _, ok := c.m[k]; ok { // another decoder stored it meanwhile
		return PartnerRef{e}
	}
	for c.used+size > c.budget {
		if old := c.evictOldest(); old.refs == 0 {
			c.recycle(old.img.Pix)
		}
	}
	e.out = false
	c.m[k] = c.lru.PushFront(e)
	c.used += size
	c.stored.Add(1)
	return PartnerRef{e}
}

// Release ends the hold r (from Get or Put; a zero r is none).
func (c *PartnerCache) Release(r PartnerRef) {
	if r.e == nil {
		return
	}
	c.mu.Lock()
	r.e.refs--
	if r.e.refs == 0 && r.e.out {
		c.recycle(r.e.img.Pix)
	}
	c.mu.Unlock()
}

// recycle keeps b, pixels no entry or decode has any more, for Alloc,
// where partnerFree has room. Under mu.
func (c *PartnerCache) recycle(b []byte) {
	if len(c.free) < partnerFree {
		c.free = append(c.free, b)
	}
}
