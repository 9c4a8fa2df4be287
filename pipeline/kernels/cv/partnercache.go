package cv

// The partner cache: a node's load_image'd images (a Mosaic's, each
// decoded whole and resized to imgsz on its long side), shared by its
// Executor's decoders, so that a photo a window of the epoch's order
// reads several times (once as a sample, about three times more as a
// Mosaic's partner: Partners draws them from its window) is decoded
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
// use. An entry's pixels are never written after it is stored: a decode
// that holds one while it is evicted keeps it until its mosaic is made,
// so the cache may pass its budget by what the decoders hold (at most n
// images a worker).
type PartnerCache struct {
	seeds  [2]maphash.Seed
	mu     sync.Mutex
	budget int64
	used   int64
	m      map[PartnerKey]*list.Element
	lru    list.List // of *partnerEntry, most recent first

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
}

// partnerOverhead is what an entry costs beside its pixels: the entry,
// its list element and its map slot.
const partnerOverhead = 256

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

// Get is k's image, most recently used now.
func (c *PartnerCache) Get(k PartnerKey) (kernels.Planes, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	var img kernels.Planes
	if ok {
		c.lru.MoveToFront(e)
		img = e.Value.(*partnerEntry).img
	}
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return img, ok
}

// Put stores img (which the cache owns from now on: never written again)
// as k's, evicting the least recently used to make room; an image over
// the whole budget is not stored.
func (c *PartnerCache) Put(k PartnerKey, img kernels.Planes) {
	size := int64(len(img.Pix)) + partnerOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.budget {
		return
	}
	if _, ok := c.m[k]; ok { // another decoder stored it meanwhile
		return
	}
	for c.used+size > c.budget {
		last := c.lru.Back()
		old := c.lru.Remove(last).(*partnerEntry)
		delete(c.m, old.key)
		c.used -= int64(len(old.img.Pix)) + partnerOverhead
		c.evicted.Add(1)
	}
	c.m[k] = c.lru.PushFront(&partnerEntry{key: k, img: img})
	c.used += size
	c.stored.Add(1)
}
