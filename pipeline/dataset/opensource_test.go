package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// writeManifest indexes dir and writes the manifest to path (default
// beside the data).
func writeManifest(t *testing.T, dir, path string) *Manifest {
	t.Helper()
	m, err := IndexDir(context.Background(), dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if path == "" {
		path = filepath.Join(dir, filepath.FromSlash(ManifestName))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, encodeManifest(t, m), 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

func openSource(t *testing.T, src string, opts ...SourceOption) (Dataset, error) {
	t.Helper()
	ds, err := OpenSource(context.Background(), src, opts...)
	if err == nil {
		t.Cleanup(func() { ds.Close() })
	}
	return ds, err
}

// numberedFolder is an ImageFolder of n files in two classes.
func numberedFolder(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{}
	for i := range n {
		files[fmt.Sprintf("c%d/%03d.jpg", i%2, i)] = []byte(strings.Repeat("x", 10+i))
	}
	writeTree(t, dir, files)
	return dir
}

// TestOpenSourceLocal: a directory without a manifest opens as Open opens
// it; with one beside it (an ImageFolder, or WebDataset shards), as a
// store-backed dataset with the same samples and fingerprint.
func TestOpenSourceLocal(t *testing.T) {
	ifRoot, _ := imageFolderTree(t)
	for name, c := range map[string]struct {
		dir          string
		plain, withM string
	}{
		"imagefolder": {ifRoot, "*dataset.ImageFolder", "*dataset.StoreDataset"},
		"webdataset":  {wdsDir(t), "*dataset.WebDataset", "*dataset.ShardedStoreDataset"},
	} {
		t.Run(name, func(t *testing.T) {
			plain, err := openSource(t, c.dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", plain); got != c.plain {
				t.Errorf("without a manifest: %s, want %s", got, c.plain)
			}
			writeManifest(t, c.dir, "")
			withM, err := openSource(t, c.dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", withM); got != c.withM {
				t.Errorf("with a manifest: %s, want %s", got, c.withM)
			}
			sameDataset(t, withM, plain)
			// The manifest is not data: Open still indexes what it did.
			again, err := Open(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if again.Fingerprint() != plain.Fingerprint() {
				t.Errorf("Open's fingerprint changed once the manifest was written beside the data")
			}
		})
	}
}

// TestOpenSourceNamedManifest: a manifest named apart from the data is
// used when it was made of this directory, refused when it was made of
// another, and an error when missing.
func TestOpenSourceNamedManifest(t *testing.T) {
	dir, other := numberedFolder(t, 6), numberedFolder(t, 6)
	out := filepath.Join(t.TempDir(), "ds.manifest")
	writeManifest(t, dir, out)
	ds, err := openSource(t, dir, WithManifest(out))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ds.(*StoreDataset); !ok {
		t.Errorf("opened as %T", ds)
	}
	_, err = openSource(t, other, WithManifest(out))
	if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "made of "+dir) || !strings.Contains(err.Error(), out) {
		t.Errorf("another directory's manifest: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := openSource(t, dir, WithManifest(missing)); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "manifest") {
		t.Errorf("a missing named manifest: %v", err)
	}
	// A manifest beside the data is the data's, wherever it now is: a
	// directory moved (or mounted elsewhere) with its manifest opens.
	moved := filepath.Join(t.TempDir(), "moved")
	writeManifest(t, dir, "")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := openSource(t, moved); err != nil {
		t.Errorf("a directory moved with its manifest: %v", err)
	}
}

// TestOpenSourceCorruptManifest: a manifest that does not check is an
// error at open naming the file and how to make it again, never a scan
// in its place.
func TestOpenSourceCorruptManifest(t *testing.T) {
	dir := numberedFolder(t, 4)
	writeManifest(t, dir, "")
	path := filepath.Join(dir, filepath.FromSlash(ManifestName))
	b, _ := os.ReadFile(path)
	b[len(b)-3] ^= 1
	os.WriteFile(path, b, 0o644)
	_, err := openSource(t, dir)
	if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), ".stoker/manifest") || !strings.Contains(err.Error(), "stoker index "+dir) {
		t.Errorf("corrupt manifest: %v", err)
	}
	os.WriteFile(path, b[:10], 0o644)
	if _, err := openSource(t, dir); !errors.Is(err, ErrManifest) {
		t.Errorf("truncated manifest: %v", err)
	}
}

// TestOpenSourceStale: a file replaced after indexing is a per-sample
// error naming it and saying to index again, the other samples read as
// before; a manifest most of whose files changed or went is refused at
// open.
func TestOpenSourceStale(t *testing.T) {
	dir := numberedFolder(t, 8)
	writeManifest(t, dir, "")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// Same size, another time: the version a directory has.
	victim := filepath.Join(dir, "c1", "003.jpg")
	os.WriteFile(victim, []byte(strings.Repeat("y", 13)), 0o644)
	later := time.Now().Add(time.Hour)
	os.Chtimes(victim, later, later)
	ds, err := openSource(t, dir, WithLog(log))
	if err != nil {
		t.Fatal(err)
	}
	bad := -1
	for i := range ds.Len() {
		_, err := ds.Read(i, nil)
		if ds.Name(i) == "c1/003.jpg" {
			bad = i
			if !errors.Is(err, source.ErrChanged) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "c1/003.jpg") ||
				!strings.Contains(err.Error(), "stoker index "+dir) {
				t.Errorf("replaced file: %v", err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", ds.Name(i), err)
		}
	}
	if bad < 0 {
		t.Fatal("the replaced file is not a sample")
	}
	if !strings.Contains(logs.String(), "manifest partly stale") {
		t.Errorf("no warning of a partly stale manifest; log:\n%s", logs.String())
	}
	// Another size.
	os.WriteFile(victim, []byte("z"), 0o644)
	if _, err := ds.Read(bad, nil); !errors.Is(err, source.ErrChanged) {
		t.Errorf("file of another size: %v", err)
	}
	// Removed.
	os.Remove(victim)
	if _, err := ds.Read(bad, nil); !errors.Is(err, source.ErrChanged) {
		t.Errorf("removed file: %v", err)
	}
	// Most files gone: refused at open.
	for i := range 6 {
		os.Remove(filepath.Join(dir, fmt.Sprintf("c%d/%03d.jpg", i%2, i)))
	}
	_, err = openSource(t, dir)
	if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "stale") || !strings.Contains(err.Error(), "stoker index") {
		t.Errorf("mostly gone: %v", err)
	}
}

// TestOpenSourceSizeCap: a sample over the cap is refused before it is
// read.
func TestOpenSourceSizeCap(t *testing.T) {
	dir := numberedFolder(t, 2)
	writeManifest(t, dir, "")
	ds, err := openSource(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	ds.(interface{ SetMaxFileSize(int64) }).SetMaxFileSize(10)
	if _, err := ds.Read(0, nil); err != nil {
		t.Errorf("10 bytes, cap 10: %v", err)
	}
	if _, err := ds.Read(1, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("11 bytes, cap 10: %v", err)
	}
}

// TestOpenSourceManifestURLSecret: a manifest URL carrying what may be a
// credential is refused without being echoed.
func TestOpenSourceManifestURLSecret(t *testing.T) {
	dir := numberedFolder(t, 2)
	for _, u := range []string{"s3://AKIDEXAMPLE:s3cr3t@bkt/m", "s3://bkt/m?X-Amz-Signature=s3cr3t", "gs://bkt/m#s3cr3t", "s3://bkt/%zz?s3cr3t"} {
		_, err := openSource(t, dir, WithManifest(u))
		if err == nil || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "AKID") {
			t.Errorf("manifest %q: %v", u, err)
		}
	}
}
