package dataset

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// TestVersionlessStore (issue 38, row 9's other half): a store that lists
// no version at all (no ETags; versitygw serving files it did not write
// does so honestly) was read by size and modification time alone, so an
// object replaced by others of its size slipped in. Its samples are now
// hashed when indexed and read against the hashes; a manifest of such a
// store without them is refused.
func TestVersionlessStore(t *testing.T) {
	s := storetest.StartLyingS3(t, "bkt")
	s.PutTree(t, "if/", photosDir)
	shards := t.TempDir()
	written := storetest.WriteShards(t, photosDir, shards, 7)
	s.PutTree(t, "wds/", shards)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s.SetLies(storetest.Lies{NoETag: true})

	for _, tc := range []struct {
		layout, prefix string
		replace        func() (key string, sample int)
	}{
		{LayoutImageFolder, "if/", func() (string, int) {
			local, err := Open(photosDir)
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			key := "if/" + local.Name(3)
			b, _ := s.Get(key)
			s.Put(key, flipped(b, len(b)/2))
			return key, 3
		}},
		{LayoutWebDataset, "wds/", func() (string, int) {
			w := written[2]
			key := "wds/" + w.Shard
			b, _ := s.Get(key)
			s.Put(key, flipped(b, int(w.Offset+w.Size/2)))
			return key, 2
		}},
	} {
		t.Run(tc.layout, func(t *testing.T) {
			ds, err := OpenSource(t.Context(), s.URL(tc.prefix))
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			m := storeDatasetOf(ds).Manifest()
			for i := range ds.Len() {
				if m.Object(m.Sample(i).Object).Version != "" || m.hash(i) == nil {
					t.Fatalf("sample %d: version %q, hash %x: want none, and a hash", i, m.Object(m.Sample(i).Object).Version, m.hash(i))
				}
			}
			before, err := ds.Read(4, nil)
			if err != nil {
				t.Fatal(err)
			}
			key, i := tc.replace()
			got, err := ds.Read(i, nil)
			if err == nil {
				t.Fatalf("%s replaced by other bytes of its size: sample %d read (%d bytes)", key, i, len(got))
			}
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, source.ErrChanged) || source.IsStoreFault(err) {
				t.Errorf("sample %d: %v: want ErrCorrupt and source.ErrChanged", i, err)
			}
			if after, err := ds.Read(4, nil); err != nil && !strings.Contains(key, "wds") || err == nil && !bytes.Equal(after, before) {
				t.Errorf("another sample: %v", err)
			}

			// A manifest of the store without the hashes: refused.
			bare := rewrite(m, m.Classes, func(_ int, s *ManifestSample) { s.Hash = nil })
			if tc.layout == LayoutWebDataset {
				bare.Classes = nil
			}
			st, err := source.Open(t.Context(), s.URL(tc.prefix))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := NewStoreDataset(st, bare, nil); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "no content hash") {
				t.Errorf("a manifest without hashes: %v", err)
			}
		})
	}
}

// flipped is b with the byte at i changed.
func flipped(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0xff
	return b
}

// TestVersionlessStoreCached: read through a byte cache (a Fetcher with a
// memory tier), a versionless store's sample is hashed once, when read from
// the store: bytes served from memory again are the ones that matched, even
// after the object is replaced by others of its size. Bytes that do not
// match are refused as without the cache and never cached: once the object
// is put back, its range is read from the store again.
func TestVersionlessStoreCached(t *testing.T) {
	s := storetest.StartLyingS3(t, "bkt")
	s.PutTree(t, "if/", photosDir)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s.SetLies(storetest.Lies{NoETag: true})
	ds, err := OpenSource(t.Context(), s.URL("if/"))
	if err != nil {
		t.Fatal(err)
	}
	m := storeDatasetOf(ds).Manifest()
	ds.Close()
	st, err := source.Open(t.Context(), s.URL("if/"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cache, err := source.NewCache(source.WithMemory(64 << 20))
	if err != nil {
		t.Fatal(err)
	}
	f := source.NewFetcher(st, source.WithCache(cache))
	defer f.Close()
	cached, err := NewStoreDataset(st, m, f)
	if err != nil {
		t.Fatal(err)
	}
	defer cached.Close()

	key := func(i int) string { return "if/" + cached.Name(i) }
	first, err := cached.Read(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := s.Get(key(3))
	s.Put(key(3), flipped(orig, len(orig)/2))
	if again, err := cached.Read(3, nil); err != nil || !bytes.Equal(again, first) {
		t.Errorf("sample 3 from memory after its object changed: %v, same bytes as first read: %v", err, bytes.Equal(again, first))
	}

	orig5, _ := s.Get(key(5))
	s.Put(key(5), flipped(orig5, len(orig5)/2))
	if _, err := cached.Read(5, nil); !errors.Is(err, ErrCorrupt) || !errors.Is(err, source.ErrChanged) {
		t.Fatalf("sample 5 replaced before its first read: %v, want ErrCorrupt and source.ErrChanged", err)
	}
	// Its refused bytes were not cached: the cache holds sample 3's range,
	// read and checked, and not sample 5's. (Asked of the cache itself:
	// the store would now refuse sample 5 by its modification time, which
	// a put back moves past the listing's second on a slow machine.)
	s.Put(key(5), orig5)
	if _, ok := cache.Get(st.String(), storeDatasetOf(cached).rangeOf(3), nil); !ok {
		t.Errorf("sample 3, read and checked, is not in the cache")
	}
	if got, ok := cache.Get(st.String(), storeDatasetOf(cached).rangeOf(5), nil); ok {
		t.Errorf("sample 5's refused bytes were cached (%d bytes, the changed object's: %v)", len(got), !bytes.Equal(got, orig5))
	}

	// A WebDataset's member is checked without its tar header, which is
	// read (and checked) with it: its samples read, twice, through the
	// cache as they do without it.
	shards := t.TempDir()
	storetest.WriteShards(t, photosDir, shards, 7)
	s.PutTree(t, "wds/", shards)
	plain, err := OpenSource(t.Context(), s.URL("wds/"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	wst, err := source.Open(t.Context(), s.URL("wds/"))
	if err != nil {
		t.Fatal(err)
	}
	defer wst.Close()
	wf := source.NewFetcher(wst, source.WithCache(cache))
	defer wf.Close()
	wds, err := NewStoreDataset(wst, storeDatasetOf(plain).Manifest(), wf)
	if err != nil {
		t.Fatal(err)
	}
	defer wds.Close()
	for i := range min(wds.Len(), 10) {
		if storeDatasetOf(plain).Manifest().hash(i) == nil {
			t.Fatalf("WebDataset sample %d has no content hash: the check is not exercised", i)
		}
		want, err := plain.Read(i, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if got, err := wds.Read(i, nil); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("WebDataset sample %d through the cache: %v, same bytes: %v", i, err, bytes.Equal(got, want))
			}
		}
	}
}
