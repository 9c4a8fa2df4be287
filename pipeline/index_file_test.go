//go:build cgo

package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/det"
)

// TestIndexFile: an index saved and loaded with the same fingerprint comes
// back whole, as not yet confirmed (a Decoder with it finds every file's
// entry and makes the same bytes); loading into a smaller budget keeps the most recently used; and
// a file that does not check (another fingerprint, another version, a
// flipped bit anywhere, cut anywhere, bytes after its end) adds nothing.
func TestIndexFile(t *testing.T) {
	_, files := fastPhotos(t, 0)
	ix := warmIndex(t, files, 1<<30)
	var buf bytes.Buffer
	if err := ix.Save(&buf, "fp-A"); err != nil {
		t.Fatal(err)
	}
	saved := buf.Bytes()
	want := ix.Stats()

	back := index.New(1 << 30)
	n, err := back.Load(bytes.NewReader(saved), "fp-A")
	if err != nil || n != want.Entries {
		t.Fatalf("Load: %d entries, %v; saved %d", n, err, want.Entries)
	}
	if got := back.Stats(); got.Bytes != want.Bytes {
		t.Errorf("loaded %d bytes, saved %d", got.Bytes, want.Bytes)
	}
	// What comes back is what a decode here confirmed (all of it, for an
	// index made here), no longer marked confirmed.
	for _, data := range files {
		a, b := ixGet(ix, keyOf(data)), ixGet(back, keyOf(data))
		if (a == nil) != (b == nil) {
			t.Fatalf("an entry lost or gained through Save and Load")
		}
		if a == nil {
			continue
		}
		disk := make([]byte, len(a))
		if index.BlobConfirmedOnly(disk, a) != index.BlobConfirmed(a) || index.BlobConfirmed(a) == 0 || !bytes.Equal(disk, b) || !index.BlobValid(b) {
			t.Fatalf("an entry changed through Save and Load")
		}
	}
	// Found from the first decode (hits), the same bytes.
	tr := fastTransforms(t)[0].t
	warm, cold := NewDecoder(WithIndex(back)), NewDecoder()
	defer warm.Close()
	defer cold.Close()
	s0 := back.Stats()
	for i, data := range files {
		a, b := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
		k := det.Key{Seed: 77, Index: uint64(i)}
		if err := warm.Decode(data, tr, k, a); err != nil {
			t.Fatal(err)
		}
		if err := cold.Decode(data, tr, k, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("file %d: a loaded index changes the bytes", i)
		}
	}
	// (The progressive file has no index and looks for none.)
	if s := back.Stats(); s.Hits-s0.Hits != int64(want.Entries) || s.Misses != s0.Misses {
		t.Errorf("after loading: %+v (before %+v)", s, s0)
	}

	// A smaller budget keeps the most recently used (the last files
	// decoded by warmIndex).
	per := want.Bytes / int64(want.Entries)
	small := index.New(5 * per)
	if n, err := small.Load(bytes.NewReader(saved), "fp-A"); err != nil || n < 3 || n > 5 {
		t.Fatalf("Load into a 5-entry budget: %d, %v", n, err)
	}
	if ixGet(small, keyOf(files[len(files)-1])) == nil {
		t.Errorf("a smaller budget dropped the most recently used")
	}

	bad := map[string][]byte{
		"empty":          nil,
		"not an index":   []byte("hello, world"),
		"cut in header":  saved[:10],
		"cut in entries": saved[:len(saved)/2],
		"cut before sum": saved[:len(saved)-1],
		"trailing bytes": append(bytes.Clone(saved), 0),
	}
	v2 := bytes.Clone(saved)
	v2[8] = 2
	bad["version 2"] = v2
	for _, at := range []int{0, 13, 40, len(saved) / 3, len(saved) - 2} {
		b := bytes.Clone(saved)
		b[at] ^= 0x10
		bad[fmt.Sprintf("flipped bit at %d of %d", at, len(saved))] = b
	}
	for name, b := range bad {
		fresh := index.New(1 << 30)
		n, err := fresh.Load(bytes.NewReader(b), "fp-A")
		if !errors.Is(err, index.ErrFile) || n != 0 || fresh.Stats().Entries != 0 {
			t.Errorf("%s: %d entries, %v; want none and ErrIndexFile", name, n, err)
		}
	}
	fresh := index.New(1 << 30)
	if n, err := fresh.Load(bytes.NewReader(saved), "fp-B"); !errors.Is(err, index.ErrFile) || n != 0 {
		t.Errorf("another fingerprint: %d entries, %v", n, err)
	}

	// SaveFile and LoadFile: the same through a file; none is no error.
	dir := t.TempDir()
	path := index.Path(dir, "0123456789abcdef0123")
	if n, err := index.New(1<<30).LoadFile(path, "fp-A"); n != 0 || err != nil {
		t.Errorf("LoadFile of no file: %d, %v", n, err)
	}
	if err := ix.SaveFile(path, "fp-A"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, saved) {
		t.Errorf("SaveFile wrote other bytes than Save (%v)", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("SaveFile left %d files, want 1", len(ents))
	}
	if n, err := index.New(1<<30).LoadFile(path, "fp-A"); n != want.Entries || err != nil {
		t.Errorf("LoadFile: %d, %v", n, err)
	}
}
