package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What a --cache-dir writable by someone else can make a server serve
// (issue 38, rows 4 and 8): nothing. An entry is believed only with its
// MAC under a key that does not live in the directory; the directory is
// walked and written without following a symbolic link out of it.

// bytesStore is a Store of objects held in memory, read as ranges.
type bytesStore struct {
	Store // nil: only what a Fetcher calls is implemented
	name  string
	objs  map[string][]byte
	gets  int
}

func (s *bytesStore) String() string { return s.name }

func (s *bytesStore) ReadRange(_ context.Context, obj Object, off int64, p []byte) error {
	s.gets++
	copy(p, s.objs[obj.Key][off:])
	return nil
}

// forge rewrites the entry at path with other data of the same length, as
// someone who can write the directory but does not have the key would:
// every field recomputed that can be (B1's CRC-32C; B2's MAC under a key
// of their own, with the entry's key ID kept).
func forge(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch string(b[:8]) {
	case "stokerB1":
		klen := int(binary.LittleEndian.Uint32(b[8:]))
		dataAt := 12 + klen + 8
		for i := dataAt; i < len(b)-4; i++ {
			b[i] ^= 0x5a
		}
		castagnoli := crc32.MakeTable(crc32.Castagnoli)
		crc := crc32.Checksum(b[12:12+klen], castagnoli)
		crc = crc32.Update(crc, castagnoli, b[dataAt:len(b)-4])
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc)
	default:
		forgeEntry(t, b)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCacheDiskForged: an entry whose bytes were changed and whose
// checksum was recomputed is not served (94 wrong samples in 2 epochs
// before): after a restart the Fetcher reads it from the store again.
func TestCacheDiskForged(t *testing.T) {
	want := bytes.Repeat([]byte("the true bytes. "), 300)
	st := &bytesStore{name: "s3://b/", objs: map[string][]byte{"k": want}}
	obj := Object{Key: "k", Version: "v", Size: int64(len(want))}
	r := Range{Obj: obj, Off: 0, Len: obj.Size}
	dir := t.TempDir()
	c := newKeyedCache(t, dir)
	f := NewFetcher(st, WithCache(c))
	if got, err := f.Read(t.Context(), r, nil); err != nil || !bytes.Equal(got, want) {
		t.Fatal(got, err)
	}
	f.Close()
	forge(t, entryPath(t, dir))

	c2 := newKeyedCache(t, dir)
	f2 := NewFetcher(st, WithCache(c2))
	defer f2.Close()
	got, err := f2.Read(t.Context(), r, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a forged entry was served: %.40q, %v", got, err)
	}
	if st.gets != 2 {
		t.Errorf("%d reads from the store, want 2 (the first, and the forged entry's)", st.gets)
	}
	checkForged(t, c2, 1)
}

// TestCacheDiskSymlinks: subdirectories of --cache-dir that are symbolic
// links out of it get no entry (600 entries were written outside before),
// and an entry that is a link to a file outside is not read.
func TestCacheDiskSymlinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	for i := range 256 {
		if err := os.Symlink(outside, filepath.Join(dir, fmt.Sprintf("%02x", i))); err != nil {
			t.Fatal(err)
		}
	}
	c := newKeyedCache(t, dir)
	obj := Object{Key: "k", Version: "v", Size: 1 << 20}
	data := bytes.Repeat([]byte("x"), 1000)
	for i := range int64(50) {
		c.Put("s", Range{Obj: obj, Off: i * 1000, Len: 1000}, data)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("%d files written outside the cache directory", len(ents))
	}
	if s := c.Stats(); s.DiskRanges != 0 || s.DiskBytes != 0 {
		t.Errorf("stats %+v: want nothing on disk", s)
	}

	// An entry's name made a link to a file outside (of the right
	// length, even): never read.
	dir2, outside2 := t.TempDir(), t.TempDir()
	c2 := newKeyedCache(t, dir2)
	r := Range{Obj: obj, Off: 0, Len: 1000}
	c2.Put("s", r, data)
	p := entryPath(t, dir2)
	secret := filepath.Join(outside2, "secret")
	b, _ := os.ReadFile(p)
	os.WriteFile(secret, b, 0o600)
	os.Remove(p)
	if err := os.Symlink(secret, p); err != nil {
		t.Fatal(err)
	}
	c3 := newKeyedCache(t, dir2)
	if _, ok := c3.Get("s", r, nil); ok {
		t.Error("an entry read through a link out of the directory")
	}
}

// forgeEntry forges a B2 entry in place: its data changed, its MAC made
// under a key of the forger's own, the key ID kept.
func forgeEntry(t *testing.T, b []byte) {
	t.Helper()
	if string(b[:8]) != diskMagic {
		t.Fatalf("an entry of magic %q", b[:8])
	}
	klen := int(binary.LittleEndian.Uint32(b[diskHeader-4:]))
	dataAt := diskHeader + klen + 8
	for i := dataAt; i < len(b)-macSize; i++ {
		b[i] ^= 0x5a
	}
	nonceAt := len(diskMagic) + macIDSize
	copy(b[len(b)-macSize:], newMACKey([]byte("the forger's own key")).sum(b[nonceAt:nonceAt+nonceSize], b[:len(b)-macSize]))
}

// testKey is the key of the tests' caches that outlive a restart.
var testKey = []byte("0123456789abcdef-test-cache-key")

func newKeyedCache(t *testing.T, dir string, opts ...CacheOption) *Cache {
	t.Helper()
	c, err := NewCache(append([]CacheOption{WithDisk(dir, 1<<20), WithDiskKey(testKey)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func checkForged(t *testing.T, c *Cache, n int64) {
	t.Helper()
	if s := c.Stats(); s.DiskForged != n || s.DiskEvictions < n {
		t.Errorf("stats %+v: want %d forged entries (evicted)", s, n)
	}
}

// TestCacheDiskOtherKey: an earlier run's entries under another key (a
// server restarted without --cache-key-file) are misses and removed, not
// counted as forged; under the same key they are hits.
func TestCacheDiskOtherKey(t *testing.T) {
	dir := t.TempDir()
	obj := Object{Key: "k", Version: "v", Size: 1 << 20}
	r := Range{Obj: obj, Off: 0, Len: 1000}
	data := bytes.Repeat([]byte("y"), 1000)
	c, _ := NewCache(WithDisk(dir, 1<<20)) // a key of its own
	c.Put("s", r, data)
	if got, ok := c.Get("s", r, nil); !ok || !bytes.Equal(got, data) {
		t.Fatal("not read back under its own key")
	}
	c2, _ := NewCache(WithDisk(dir, 1<<20))
	if _, ok := c2.Get("s", r, nil); ok {
		t.Error("an entry of another key was a hit")
	}
	if s := c2.Stats(); s.DiskForged != 0 || s.DiskEvictions != 1 {
		t.Errorf("stats %+v: want 1 eviction, none forged", s)
	}
	if _, err := NewCache(WithDisk(dir, 1<<20), WithDiskKey([]byte("short"))); err == nil {
		t.Error("a 5-byte key taken")
	}
}

// TestLoadCacheKey: a key file is made once (0600) and read back the same;
// one inside the cache directory, one others may read, and one too short
// are refused.
func TestLoadCacheKey(t *testing.T) {
	home, cache := t.TempDir(), t.TempDir()
	file := filepath.Join(home, "conf", "stoker", "cache-key")
	k1, err := LoadCacheKey(file, cache)
	if err != nil || len(k1) != 32 {
		t.Fatalf("made: %x, %v", k1, err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", st.Mode(), err)
	}
	k2, err := LoadCacheKey(file, cache)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("read again: %x, %v; made %x", k2, err, k1)
	}
	for name, tc := range map[string]struct {
		file, dir string
		prep      func(string)
		says      string
	}{
		"inside":       {filepath.Join(cache, "sub", "key"), cache, nil, "inside the cache directory"},
		"inside, link": {filepath.Join(home, "link", "key"), cache, func(string) { os.Symlink(cache, filepath.Join(home, "link")) }, "inside the cache directory"},
		"readable":     {filepath.Join(home, "r"), cache, func(p string) { os.WriteFile(p, []byte("00112233445566778899aabbccddeeff"), 0o644) }, "chmod 600"},
		"short":        {filepath.Join(home, "s"), cache, func(p string) { os.WriteFile(p, []byte("0011"), 0o600) }, "at least 16 bytes"},
	} {
		if tc.prep != nil {
			tc.prep(tc.file)
		}
		if _, err := LoadCacheKey(tc.file, tc.dir); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want it to say %q", name, err, tc.says)
		}
	}
}
