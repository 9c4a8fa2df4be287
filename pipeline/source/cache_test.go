package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCacheAdmitWhileRoom(t *testing.T) {
	obj := Object{Key: "k", Version: "v1", Size: 10_000}
	r := func(i int64) Range { return Range{Obj: obj, Off: i * 1000, Len: 1000} }
	data := func(i int64) []byte { return bytes.Repeat([]byte{byte(i)}, 1000) }
	per := int64(1000 + entryOverhead + len("s") + len("k") + len("v1"))
	c, err := NewCache(WithMemory(3*per + 10))
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(5) {
		c.Put("s", r(i), data(i))
	}
	for i := range int64(5) {
		got, ok := c.Get("s", r(i), nil)
		if want := i < 3; ok != want {
			t.Errorf("range %d cached: %v, want %v (admitted while room, then kept)", i, ok, want)
		}
		if ok && !bytes.Equal(got, data(i)) {
			t.Errorf("range %d: wrong bytes", i)
		}
	}
	// Read again: what was kept stays, however often the others are asked for.
	for range 3 {
		for i := range int64(5) {
			if _, ok := c.Get("s", r(i), nil); !ok {
				c.Put("s", r(i), data(i))
			}
		}
	}
	s := c.Stats()
	if s.MemoryRanges != 3 || s.MemoryBytes != 3*per || s.MemoryHits != 3+9 || s.Misses != 2+6 || s.MemoryRefused != 2+6 {
		t.Errorf("stats %+v: want 3 ranges of %d bytes, 12 hits, 8 misses, 8 refused", s, per)
	}
	// Keys hold the version and the store: another is a miss.
	if _, ok := c.Get("s", Range{Obj: Object{Key: "k", Version: "v2", Size: 10_000}, Off: 0, Len: 1000}, nil); ok {
		t.Error("another version's range was a hit")
	}
	if _, ok := c.Get("other", r(0), nil); ok {
		t.Error("another store's range was a hit")
	}
	if _, ok := c.Get("s", Range{Obj: obj, Off: 0, Len: 999}, nil); ok {
		t.Error("another range of the object was a hit")
	}
	// A local object has no version: its size and time stand for it.
	local := Object{Key: "k", Size: 10_000, ModTime: time.Unix(100, 0)}
	c.Clear()
	c.Put("s", Range{Obj: local, Len: 1000}, data(0))
	local.ModTime = time.Unix(101, 0)
	if _, ok := c.Get("s", Range{Obj: local, Len: 1000}, nil); ok {
		t.Error("a range of a local object modified since was a hit")
	}
}

// TestCacheDatasetFits: a dataset that fits the cache is read from the
// store once: a second epoch, in another order, makes no request.
func TestCacheDatasetFits(t *testing.T) {
	st, rs, contents := testShards(t, 4, 25, 1000, 24)
	c, _ := NewCache(WithMemory(1 << 20))
	f := NewFetcher(st, WithCache(c))
	defer f.Close()
	epoch(t, f, shuffled(rs, 1), contents)
	first := st.getCount()
	epoch(t, f, shuffled(rs, 2), contents)
	if got := st.getCount() - first; got != 0 {
		t.Errorf("epoch 2 made %d requests, want 0", got)
	}
	if s := c.Stats(); s.MemoryHits != 100 || s.MemoryRanges != 100 {
		t.Errorf("stats %+v: want 100 hits, 100 ranges", s)
	}
}

// TestCacheLargerDataset: a dataset larger than the cache does not
// thrash: every later epoch (a new random order) finds the ranges
// admitted in the first, where an LRU cache would find none.
func TestCacheLargerDataset(t *testing.T) {
	st, rs, contents := testShards(t, 4, 50, 1000, 24)
	per := int64(1000 + entryOverhead + len(st.String()) + len("shard-000.tar"))
	c, _ := NewCache(WithMemory(80 * per))
	f := NewFetcher(st, WithCache(c))
	defer f.Close()
	epoch(t, f, shuffled(rs, 1), contents)
	for e := range uint64(3) {
		before, hits := st.getCount(), c.Stats().MemoryHits
		epoch(t, f, shuffled(rs, 10+e), contents)
		if h := c.Stats().MemoryHits - hits; h != 80 {
			t.Errorf("epoch %d: %d hits, want 80 (the ranges admitted)", e+2, h)
		}
		if g := st.getCount() - before; g > 120 {
			t.Errorf("epoch %d: %d requests for the 120 ranges not cached", e+2, g)
		}
	}
}

// epoch reads rs in order, hinting them 16 ahead, and checks the bytes.
func epoch(t *testing.T, f *Fetcher, rs []Range, contents map[string][]byte) {
	t.Helper()
	var buf []byte
	for i, r := range rs {
		if i%16 == 0 {
			f.Prefetch(rs[i:min(i+32, len(rs))])
		}
		out, err := f.Read(context.Background(), r, buf)
		if err != nil {
			t.Fatal(err)
		}
		checkBytes(t, contents, r, out)
		buf = out
	}
}

// TestCacheDiskRestart: the disk tier's entries survive a restart (a new
// Cache on the directory) and are read with no request to the store.
func TestCacheDiskRestart(t *testing.T) {
	st, rs, contents := testShards(t, 2, 20, 1000, 24)
	dir := t.TempDir()
	c := newKeyedCache(t, dir)
	f := NewFetcher(st, WithCache(c))
	epoch(t, f, rs, contents)
	f.Close()
	if s := c.Stats(); s.DiskRanges != 40 || s.DiskBytes == 0 {
		t.Fatalf("stats %+v: want 40 ranges on disk", s)
	}
	written := st.getCount()
	c2 := newKeyedCache(t, dir, WithMemory(1<<20))
	if s := c2.Stats(); s.DiskRanges != 40 {
		t.Fatalf("after a restart: stats %+v, want the 40 ranges", s)
	}
	f2 := NewFetcher(st, WithCache(c2))
	defer f2.Close()
	epoch(t, f2, shuffled(rs, 5), contents)
	if got := st.getCount() - written; got != 0 {
		t.Errorf("after a restart, %d requests, want 0", got)
	}
	if s := c2.Stats(); s.DiskHits != 40 || s.MemoryRanges != 40 {
		t.Errorf("stats %+v: want 40 disk hits, each then in memory", s)
	}
	epoch(t, f2, rs, contents)
	if s := c2.Stats(); s.MemoryHits != 40 || s.DiskHits != 40 {
		t.Errorf("stats %+v: want the second pass from memory", s)
	}
}

// TestCacheDiskCorrupt: an entry damaged on disk (a flipped byte, cut
// short, or another key's) is a miss, and is removed; the next Put writes
// it again. (A forged one: TestCacheDiskForged.)
func TestCacheDiskCorrupt(t *testing.T) {
	obj := Object{Key: "k", Version: "v", Size: 1 << 20}
	r := Range{Obj: obj, Off: 100, Len: 5000}
	data := bytes.Repeat([]byte("0123456789"), 500)
	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"flipped byte", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 1
			return os.WriteFile(p, b, 0o644)
		}},
		{"cut short", func(p string) error { return os.Truncate(p, 100) }},
		{"another key's", func(p string) error {
			other := Range{Obj: Object{Key: "x", Version: "v", Size: 1 << 20}, Off: 100, Len: 5000}
			c, err := NewCache(WithDisk(t.TempDir(), 1<<20), WithDiskKey(testKey))
			if err != nil {
				return err
			}
			c.Put("s", other, data)
			b, err := os.ReadFile(entryPath(t, c.disk.dir))
			if err != nil {
				return err
			}
			return os.WriteFile(p, b, 0o644)
		}},
		{"emptied", func(p string) error { return os.Truncate(p, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := newKeyedCache(t, dir)
			c.Put("s", r, data)
			path := entryPath(t, dir)
			if err := tc.damage(path); err != nil {
				t.Fatal(err)
			}
			if _, ok := c.Get("s", r, nil); ok {
				t.Fatal("a damaged entry was a hit")
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the damaged entry is still there: %v", err)
			}
			if s := c.Stats(); s.DiskEvictions != 1 || s.DiskRanges != 0 || s.DiskBytes != 0 || s.Misses != 1 {
				t.Errorf("stats %+v: want 1 eviction, nothing left, 1 miss", s)
			}
			c.Put("s", r, data)
			if got, ok := c.Get("s", r, nil); !ok || !bytes.Equal(got, data) {
				t.Error("the range written again is not read back")
			}
		})
	}
}

// entryPath is the one entry file under dir.
func entryPath(t *testing.T, dir string) string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("entries: %q, want one", found)
	}
	return found[0]
}

// TestCacheDiskBudget: the disk tier admits while it has room; at start it
// removes an earlier run's temporary files and, over a lowered budget, its
// oldest entries.
func TestCacheDiskBudget(t *testing.T) {
	dir := t.TempDir()
	obj := Object{Key: "k", Version: "v", Size: 1 << 20}
	data := make([]byte, 1000)
	c, _ := NewCache(WithDisk(dir, 5500), WithDiskKey(testKey))
	for i := range int64(10) {
		c.Put("s", Range{Obj: obj, Off: i * 1000, Len: 1000}, data)
	}
	s := c.Stats()
	if s.DiskRanges != 5 || s.DiskBytes > 5500 || s.DiskRefused != 5 {
		t.Fatalf("stats %+v: want 5 ranges within 5500 bytes, 5 refused", s)
	}
	per := s.DiskBytes / 5
	// Ages: range i was written at i seconds.
	for i := range int64(5) {
		p := filepath.Join(dir, diskPathOf(keyOf("s", Range{Obj: obj, Off: i * 1000, Len: 1000})))
		mt := time.Unix(1_000_000+i, 0)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "ab", "123.tmp")
	os.MkdirAll(filepath.Dir(tmp), 0o755)
	os.WriteFile(tmp, []byte("half"), 0o644)
	c2, err := NewCache(WithDisk(dir, 3*per+per/2), WithDiskKey(testKey)) // entries differ by a few bytes
	if err != nil {
		t.Fatal(err)
	}
	s = c2.Stats()
	if s.DiskRanges != 3 || s.DiskBytes > 3*per+per/2 || s.DiskEvictions != 2 {
		t.Errorf("stats %+v: want the 3 newest ranges, 2 evicted", s)
	}
	for i := range int64(5) {
		_, ok := c2.Get("s", Range{Obj: obj, Off: i * 1000, Len: 1000}, nil)
		if want := i >= 2; ok != want {
			t.Errorf("range %d kept: %v, want %v", i, ok, want)
		}
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("a temporary file of an earlier run is left: %v", err)
	}
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, diskTmp) {
			t.Errorf("temporary file %s left", p)
		}
		return nil
	})
}

func diskPathOf(k cacheKey) string {
	d := &diskTier{}
	return d.path(diskName(sha256.Sum256(encodeKey(k))))
}
