package source

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
)

// Cache keeps byte ranges read from stores: in memory, within a byte
// budget, and optionally on disk (a directory, within its own budget),
// where they survive a restart. An entry is keyed by the store, the
// object's key, its version (ETag or generation; size and modification
// time where the store gives none) and the range, so the bytes of an
// object replaced since are never served for it.
//
// Admission: a range is admitted to a tier while the tier has room, and
// then kept; nothing is dropped to make room for another. Training reads
// every sample once per epoch, each epoch in a new random order, so a
// least-recently-used cache smaller than the data drops every entry
// before its next use: it reads everything from the store each epoch and
// pays for storing it too. Keeping what was admitted serves a fixed
// budget/data share of the reads instead, which is what any policy can
// expect of a uniformly random order, and a dataset that fits is read from
// the store once. (The coefficient cache, codec.CoefCache, chose the
// same.) What the policy gives up: bytes of a dataset no longer read stay
// until the process ends (the memory tier) or the directory is cleared
// (the disk tier).
//
// A Cache is safe for concurrent use.
type Cache struct {
	mu      sync.RWMutex
	budget  int64
	used    int64 // entries' bytes, overhead included
	entries map[cacheKey][]byte
	// checked are the memory entries a reader's check accepted
	// (GetChecked, PutChecked): served again without it.
	checked map[cacheKey]bool

	disk *diskTier // nil: memory only

	memHits, diskHits, misses atomic.Int64
	memRefused                atomic.Int64
}

// cacheKey names a range of one version of an object of one store.
type cacheKey struct {
	store, key, version string
	size, mtime         int64 // mtime in Unix nanoseconds; 0 where unknown
	off, n              int64
}

func keyOf(store string, r Range) cacheKey {
	var mtime int64
	if !r.Obj.ModTime.IsZero() {
		mtime = r.Obj.ModTime.UnixNano()
	}
	return cacheKey{store: store, key: r.Obj.Key, version: r.Obj.Version, size: r.Obj.Size, mtime: mtime, off: r.Off, n: r.Len}
}

// entryOverhead is what a memory entry costs beside its bytes: the map
// slot, the key's strings, the slice header.
const entryOverhead = 160

// CacheOption configures a Cache.
type CacheOption func(*cacheOptions)

type cacheOptions struct {
	memory    int64
	dir       string
	dirBudget int64
	key       []byte // the disk tier's MAC key; nil: random
}

// WithMemory gives the cache's memory tier budget bytes (default 0: no
// memory tier).
func WithMemory(budget int64) CacheOption { return func(o *cacheOptions) { o.memory = budget } }

// WithDisk keeps ranges in files under dir too, at most budget bytes of
// them (default: no disk tier). Entries already there (from an earlier
// run) are kept, the oldest removed first when they exceed budget.
func WithDisk(dir string, budget int64) CacheOption {
	return func(o *cacheOptions) { o.dir, o.dirBudget = dir, budget }
}

// NewCache returns a Cache. With a disk tier it reads the directory's
// entries' names and sizes (not their bytes: each is proven by its MAC
// when read).
func NewCache(opts ...CacheOption) (*Cache, error) {
	var o cacheOptions
	for _, f := range opts {
		f(&o)
	}
	c := &Cache{budget: max(o.memory, 0), entries: map[cacheKey][]byte{}, checked: map[cacheKey]bool{}}
	if o.dir != "" && o.dirBudget > 0 {
		mac := randomMACKey()
		if o.key != nil {
			if len(o.key) < minCacheKey {
				return nil, fmt.Errorf("cache key of %d bytes: want at least %d", len(o.key), minCacheKey)
			}
			mac = newMACKey(o.key)
		}
		d, err := openDiskTier(o.dir, o.dirBudget, mac)
		if err != nil {
			return nil, err
		}
		c.disk = d
	}
	return c, nil
}

// Get copies the range's bytes into buf (grown if too small) and returns
// them, or says the cache has none. A range found on disk is admitted to
// memory while memory has room.
func (c *Cache) Get(store string, r Range, buf []byte) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	k := keyOf(store, r)
	c.mu.RLock()
	data, ok := c.entries[k]
	c.mu.RUnlock()
	if ok {
		// Entries are never written once stored: the copy needs no lock.
		buf = grow(buf, r.Len)
		copy(buf, data)
		c.memHits.Add(1)
		return buf, true
	}
	if c.disk != nil {
		if buf, ok = c.disk.get(k, buf); ok {
			c.diskHits.Add(1)
			c.admitMemory(k, buf, false)
			return buf, true
		}
	}
	c.misses.Add(1)
	return nil, false
}

// Contains says whether the cache holds the range, without reading it.
func (c *Cache) Contains(store string, r Range) bool {
	if c == nil {
		return false
	}
	k := keyOf(store, r)
	c.mu.RLock()
	_, ok := c.entries[k]
	c.mu.RUnlock()
	return ok || c.disk != nil && c.disk.contains(k)
}

// Put offers the range's bytes, read from its store, to the cache, which
// copies them into each tier that has room and does not have them.
func (c *Cache) Put(store string, r Range, data []byte) {
	if c == nil || int64(len(data)) != r.Len {
		return
	}
	k := keyOf(store, r)
	c.admitMemory(k, data, false)
	if c.disk != nil {
		c.disk.put(k, data)
	}
}

// GetChecked is Get for a reader whose bytes check must accept (say,
// against a content hash of the range): bytes from memory that check
// accepted before are returned without it (entries never change); others,
// from memory or disk, are checked now, and remembered as checked where
// memory holds them (or has room for them). A range whose bytes check
// refuses is a miss: read from the store again.
func (c *Cache) GetChecked(store string, r Range, buf []byte, check func([]byte) error) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	k := keyOf(store, r)
	c.mu.RLock()
	data, ok := c.entries[k]
	checked := c.checked[k]
	c.mu.RUnlock()
	if ok {
		buf = grow(buf, r.Len)
		copy(buf, data)
		if checked {
			c.memHits.Add(1)
			return buf, true
		}
		if check(buf) == nil {
			c.memHits.Add(1)
			c.admitMemory(k, buf, true)
			return buf, true
		}
	} else if c.disk != nil {
		if buf, ok = c.disk.get(k, buf); ok && check(buf) == nil {
			c.diskHits.Add(1)
			c.admitMemory(k, buf, true)
			return buf, true
		}
	}
	c.misses.Add(1)
	return nil, false
}

// PutChecked is Put for bytes a reader's check accepted (GetChecked).
func (c *Cache) PutChecked(store string, r Range, data []byte) {
	if c == nil || int64(len(data)) != r.Len {
		return
	}
	k := keyOf(store, r)
	c.admitMemory(k, data, true)
	if c.disk != nil {
		c.disk.put(k, data)
	}
}

// admitMemory keeps data as k's memory entry while memory has room;
// checked says a reader's check accepted it, which an entry already
// there takes only if it holds the same bytes.
func (c *Cache) admitMemory(k cacheKey, data []byte, checked bool) {
	cost := int64(len(data)) + entryOverhead + int64(len(k.store)+len(k.key)+len(k.version))
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[k]; ok {
		if checked && !c.checked[k] && bytes.Equal(old, data) {
			c.checked[k] = true
		}
		return
	}
	if c.used+cost > c.budget {
		if c.budget > 0 {
			c.memRefused.Add(1)
		}
		return
	}
	c.entries[k] = append([]byte(nil), data...)
	if checked {
		c.checked[k] = true
	}
	c.used += cost
}

// CacheStats is what a Cache holds and has done.
type CacheStats struct {
	// MemoryBytes and DiskBytes are what each tier holds (memory: overhead
	// included; disk: the files' sizes), MemoryRanges and DiskRanges how
	// many ranges.
	MemoryBytes, DiskBytes   int64
	MemoryRanges, DiskRanges int64
	MemoryBudget, DiskBudget int64
	// MemoryHits and DiskHits count Gets answered by each tier, Misses
	// those answered by neither.
	MemoryHits, DiskHits, Misses int64
	// MemoryRefused and DiskRefused count ranges not admitted to a tier
	// because it was full.
	MemoryRefused, DiskRefused int64
	// DiskEvictions counts disk entries removed: found damaged (or
	// written under another key) when read, or the oldest when an earlier
	// run's entries exceeded the budget.
	DiskEvictions int64
	// DiskForged counts disk entries, among the evictions, whose MAC under
	// this cache's key was wrong: changed by someone without the key.
	// Their ranges were read from the store again.
	DiskForged int64
}

// Stats returns the Cache's counters.
func (c *Cache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	c.mu.Lock()
	s := CacheStats{MemoryBytes: c.used, MemoryRanges: int64(len(c.entries)), MemoryBudget: c.budget}
	c.mu.Unlock()
	s.MemoryHits, s.DiskHits, s.Misses = c.memHits.Load(), c.diskHits.Load(), c.misses.Load()
	s.MemoryRefused = c.memRefused.Load()
	if c.disk != nil {
		c.disk.stats(&s)
	}
	return s
}

// Clear drops the memory tier's entries (the disk tier's stay; the
// counters too).
func (c *Cache) Clear() {
	c.mu.Lock()
	clear(c.entries)
	clear(c.checked)
	c.used = 0
	c.mu.Unlock()
}

// grow returns buf resized to n bytes, reallocated when too small.
func grow(buf []byte, n int64) []byte {
	if int64(cap(buf)) < n {
		return make([]byte, n)
	}
	return buf[:n]
}
