package pipeline

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
