package dataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gzipFile writes src's bytes gzip-compressed to dst.
func gzipFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompressedShards: gzip-compressed WebDataset shards (.tar.gz, .tgz,
// alone, beside plain ones, or named as the dataset) are refused by every
// way a dataset is opened or indexed, with a message that says they are
// compressed, why that cannot be read in place, and the command that
// decompresses them; never "no images in DIR" (what an ImageFolder walk
// of such a directory found), and never part of the data served.
func TestCompressedShards(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "plain.tar")
	writeShard(t, plain, []tarMember{{Name: "a.jpg", Data: encodeJPEG(testPicture(16, 16), 90)}, {Name: "a.cls", Data: []byte("0")}})
	gzDir := t.TempDir()
	gzipFile(t, plain, filepath.Join(gzDir, "shard-000.tar.gz"))
	gzipFile(t, plain, filepath.Join(gzDir, "shard-001.tar.gz"))
	mixed := t.TempDir()
	writeShard(t, filepath.Join(mixed, "shard-000.tar"), []tarMember{{Name: "a.jpg", Data: []byte("x")}, {Name: "a.cls", Data: []byte("0")}})
	gzipFile(t, plain, filepath.Join(mixed, "shard-001.tgz"))
	zst := t.TempDir()
	os.WriteFile(filepath.Join(zst, "s.tar.zst"), []byte("(\xb5/\xfd not really"), 0o644)

	check := func(t *testing.T, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("opened; want the compressed shards refused")
		}
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v: want ErrUnsupported", err)
		}
		msg := err.Error()
		for _, w := range append(want, "compressed tar shards", "in place", "decompress the shards once") {
			if !strings.Contains(msg, w) {
				t.Errorf("message does not say %q:\n%s", w, msg)
			}
		}
		if strings.Contains(msg, "no images") || strings.Contains(msg, "corrupt") {
			t.Errorf("message blames the wrong thing:\n%s", msg)
		}
	}
	for name, open := range map[string]func(string) error{
		"Open": func(p string) error { _, err := Open(p); return err },
		"OpenWebDataset": func(p string) error {
			_, err := OpenWebDataset(p)
			return err
		},
		"OpenSource": func(p string) error { _, err := OpenSource(context.Background(), p); return err },
		"IndexDir": func(p string) error {
			_, err := IndexDir(context.Background(), p, IndexOptions{})
			return err
		},
		"IndexStore": func(p string) error {
			_, err := IndexStore(context.Background(), openDirStore(t, p), IndexOptions{})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			check(t, open(gzDir), "(shard-000.tar.gz, shard-001.tar.gz)", "gunzip -k shard-000.tar.gz")
			check(t, open(mixed), "(shard-001.tgz)", "gunzip -k shard-001.tgz")
			check(t, open(zst), "unzstd -k s.tar.zst")
		})
	}
	t.Run("a shard named as the dataset", func(t *testing.T) {
		one := filepath.Join(gzDir, "shard-000.tar.gz")
		_, err := Open(one)
		check(t, err, "gunzip -k shard-000.tar.gz")
		_, err = OpenWebDataset(one)
		check(t, err, "gunzip -k shard-000.tar.gz")
	})
	// Decompressed, the same shards serve.
	gunzipped := t.TempDir()
	data, _ := os.ReadFile(plain)
	os.WriteFile(filepath.Join(gunzipped, "shard-000.tar"), data, 0o644)
	d, err := Open(gunzipped)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Len() != 1 {
		t.Errorf("the decompressed shard: %d samples, want 1", d.Len())
	}
}

// TestWebDatasetMissingLabel: an image without its .cls is refused by a
// message that says the label is missing (not that the image is corrupt)
// and how a label is given, the same from a local directory and from a
// store's listing.
func TestWebDatasetMissingLabel(t *testing.T) {
	dir := t.TempDir()
	writeShard(t, filepath.Join(dir, "shard-000.tar"), []tarMember{
		{Name: "000001.jpg", Data: []byte("x")}, {Name: "000001.cls", Data: []byte("3")}, {Name: "000002.jpg", Data: []byte("y")},
	})
	want := "shard shard-000.tar: sample 000002 has an image (000002.jpg) but no label: a WebDataset sample's " +
		"label is a member 000002.cls beside it in the same shard, holding its class index as decimal text (e.g. 7)"
	_, errOpen := Open(dir)
	_, errStore := IndexStore(context.Background(), openDirStore(t, dir), IndexOptions{})
	for _, err := range []error{errOpen, errStore} {
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "corrupt") {
			t.Errorf("error %v\nwant ErrUnsupported saying %q", err, want)
		}
	}
}
