package dataset

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// photosDir is the committed test photos, an ImageFolder.
const photosDir = "../../testdata/photos"

// s3Photos starts a real S3 server (versitygw) on loopback with bucket
// "bkt" holding the test photos under "if/" and the same photos as
// WebDataset shards under "wds/" (written locally into the returned
// directory), and points the AWS SDK's standard variables at it.
func s3Photos(t *testing.T) (s *storetest.S3, shards string) {
	t.Helper()
	s = storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "bkt")
	s.PutTree(t, "bkt", "if/", photosDir)
	shards = t.TempDir()
	storetest.WriteShards(t, photosDir, shards, 7)
	s.PutTree(t, "bkt", "wds/", shards)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return s, shards
}

// TestS3Datasets: the test photos in a bucket, as an ImageFolder and as
// WebDataset shards, open with the samples, classes and fingerprint of the
// same files opened locally: listed and scanned without a manifest, and
// from a manifest written beside the data or named apart from it; the
// manifest is not taken for data. An object replaced after indexing is a
// per-sample error naming it; a manifest of another prefix is refused,
// and a corrupt one is an error naming its URL.
func TestS3Datasets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server (versitygw)")
	}
	s, shards := s3Photos(t)
	ctx := t.Context()
	for _, c := range []struct{ layout, prefix, local string }{
		{LayoutImageFolder, "if/", photosDir},
		{LayoutWebDataset, "wds/", shards},
	} {
		t.Run(c.layout, func(t *testing.T) {
			url := s.URL("bkt", c.prefix)
			want, err := Open(c.local)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			listed, err := OpenSource(ctx, url, WithLog(log))
			if err != nil {
				t.Fatal(err)
			}
			defer listed.Close()
			sameDataset(t, listed, want)
			if !strings.Contains(logs.String(), "no manifest") || !strings.Contains(logs.String(), "stoker index "+url) {
				t.Errorf("a listing at start is not logged with its hint:\n%s", logs.String())
			}
			m := storeDatasetOf(listed).Manifest()
			if m.Layout != c.layout || m.Root != url {
				t.Errorf("layout %s root %s", m.Layout, m.Root)
			}
			for i := range m.NumObjects() {
				if m.Object(i).Version == "" {
					t.Fatalf("object %s has no ETag", m.Object(i).Key)
				}
			}

			// Beside the data.
			st, err := source.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var buf bytes.Buffer
			if err := m.Encode(&buf); err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, ManifestName, buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			logs.Reset()
			fromM, err := OpenSource(ctx, url, WithLog(log))
			if err != nil {
				t.Fatal(err)
			}
			defer fromM.Close()
			sameDataset(t, fromM, want)
			if !strings.Contains(logs.String(), "from its manifest") {
				t.Errorf("the manifest beside the data was not used:\n%s", logs.String())
			}
			again, err := IndexStore(ctx, st, IndexOptions{})
			if err != nil || again.Fingerprint() != want.Fingerprint() || again.NumObjects() != m.NumObjects() {
				t.Errorf("listed again with the manifest beside the data: %v", err)
			}

			// Named apart from the data; and named for another prefix.
			out := s.URL("bkt", "manifests/"+c.layout)
			mst, err := source.Open(ctx, s.URL("bkt", "manifests"))
			if err != nil {
				t.Fatal(err)
			}
			defer mst.Close()
			if err := mst.Put(ctx, c.layout, buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			named, err := OpenSource(ctx, url, WithManifest(out))
			if err != nil {
				t.Fatal(err)
			}
			sameDataset(t, named, want)
			named.Close()
			other := s.URL("bkt", map[string]string{"if/": "wds/", "wds/": "if/"}[c.prefix])
			if _, err := OpenSource(ctx, other, WithManifest(out)); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "made of "+url) {
				t.Errorf("another prefix's manifest: %v", err)
			}
		})
	}

	t.Run("stale and corrupt", func(t *testing.T) {
		url := s.URL("bkt", "if/")
		ds, err := OpenSource(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		victim := ds.Name(5)
		s.Put(t, "bkt", "if/"+victim, []byte("replaced"))
		_, err = ds.Read(5, nil)
		if !errors.Is(err, source.ErrChanged) || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "stoker index "+url) {
			t.Errorf("replaced object: %v; want ErrChanged naming it and saying to run stoker index", err)
		}
		if _, err := ds.Read(6, nil); err != nil {
			t.Errorf("the next sample: %v", err)
		}
		s.Put(t, "bkt", "if/"+ManifestName, []byte("STOKERMF garbage"))
		_, err = OpenSource(ctx, url)
		if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), url+ManifestName) {
			t.Errorf("corrupt manifest: %v; want ErrManifest naming %s", err, url+ManifestName)
		}
	})
}

// TestGCSDatasets: the test photos in a GCS emulator (fake-gcs-server) as
// an ImageFolder and as shards: listed and scanned, each object indexed at
// its generation, and from a manifest beside the data, with the samples
// and fingerprint of the same files on a local disk; an object replaced
// after indexing (a new generation) is a per-sample error.
func TestGCSDatasets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a GCS emulator (fake-gcs-server)")
	}
	g := storetest.StartGCS(t, t.TempDir())
	g.CreateBucket(t, "bkt")
	for _, kv := range g.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	storeDatasets(t, func(prefix, dir string) { g.PutTree(t, "bkt", prefix, dir) },
		func(key string, data []byte) { g.Put(t, "bkt", key, data) },
		func(prefix string) string { return g.URL("bkt", prefix) },
		func(v string) bool { return v != "" && strings.Trim(v, "0123456789") == "" }, "a generation")
}

// TestAzureDatasets is TestGCSDatasets on Azure (Azurite): objects
// indexed at their ETags, unquoted however the store quotes them.
func TestAzureDatasets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an Azure emulator (Azurite)")
	}
	a := storetest.StartAzure(t, t.TempDir())
	a.CreateContainer(t, "ctr")
	for _, kv := range a.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	storeDatasets(t, func(prefix, dir string) { a.PutTree(t, "ctr", prefix, dir) },
		func(key string, data []byte) { a.Put(t, "ctr", key, data) },
		func(prefix string) string { return a.URL("ctr", prefix) },
		func(v string) bool { return strings.HasPrefix(v, "0x") }, "an unquoted ETag (0x...)")
}

// storeDatasets checks the test photos, put into a store under if/ (an
// ImageFolder) and wds/ (shards), against the same files on a local disk:
// listed and scanned, each object indexed at a version that isVersion
// takes (what), then opened from a manifest beside the data; an object
// replaced after indexing is a per-sample error wrapping ErrChanged.
func storeDatasets(t *testing.T, putTree func(prefix, dir string), put func(key string, data []byte),
	urlOf func(prefix string) string, isVersion func(string) bool, what string) {
	putTree("if/", photosDir)
	shards := t.TempDir()
	storetest.WriteShards(t, photosDir, shards, 7)
	putTree("wds/", shards)
	ctx := t.Context()
	for _, c := range []struct{ prefix, local string }{{"if/", photosDir}, {"wds/", shards}} {
		url := urlOf(c.prefix)
		want, err := Open(c.local)
		if err != nil {
			t.Fatal(err)
		}
		defer want.Close()
		listed, err := OpenSource(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer listed.Close()
		sameDataset(t, listed, want)
		m := storeDatasetOf(listed).Manifest()
		if v := m.Object(0).Version; !isVersion(v) {
			t.Errorf("%s: object version %q, want %s", url, v, what)
		}
		var buf bytes.Buffer
		m.Encode(&buf)
		put(c.prefix+ManifestName, buf.Bytes())
		fromM, err := OpenSource(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer fromM.Close()
		sameDataset(t, fromM, want)
		if !strings.Contains(storeDatasetOf(fromM).stale, "the manifest "+url+ManifestName) {
			t.Errorf("%s: not opened from the manifest beside it", url)
		}
		if c.prefix == "if/" {
			victim := fromM.Name(3)
			put("if/"+victim, []byte("replaced"))
			if _, err := fromM.Read(3, nil); !errors.Is(err, source.ErrChanged) || !strings.Contains(err.Error(), victim) {
				t.Errorf("replaced object: %v", err)
			}
		}
	}
}
