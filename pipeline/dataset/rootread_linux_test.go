//go:build linux

package dataset

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestRootReader: the fast path reads a plain file and a link that stays
// inside the root, and leaves everything else to os.Root (whose refusals
// TestImageFolderSymlinks and TestImageFolderNonRegular check): a link out
// of the root (relative or absolute), an absolute link back inside, a
// FIFO (without blocking), a directory, a size other than the one asked
// for, a size over the cap, and any read once the dataset is closed.
func TestRootReader(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string][]byte{"secret.jpg": []byte("outside")})
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{"a/real.jpg": []byte("inside"), "b/other.jpg": []byte("other class"), "a/dir.jpg/x": []byte("x")})
	for name, target := range map[string]string{
		"a/in.jpg":      "../b/other.jpg",
		"a/out-rel.jpg": "../../" + filepath.Base(outside) + "/secret.jpg",
		"a/out-abs.jpg": filepath.Join(outside, "secret.jpg"),
		"a/in-abs.jpg":  filepath.Join(root, "a/real.jpg"),
	} {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "a/fifo.jpg"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rr := newRootReader(r)
	if rr == nil {
		t.Fatal("no fast path on Linux")
	}
	for _, tc := range []struct {
		name      string
		size, max int64
		want      string // "": left to os.Root
	}{
		{"a/real.jpg", 6, 100, "inside"},
		{"a/in.jpg", 11, 100, "other class"},
		{"a/out-rel.jpg", 7, 100, ""},
		{"a/out-abs.jpg", 7, 100, ""},
		{"a/in-abs.jpg", 6, 100, ""},
		{"a/fifo.jpg", 0, 100, ""},
		{"a/dir.jpg", 0, 100, ""},
		{"a/real.jpg", 5, 100, ""},
		{"a/real.jpg", 7, 100, ""},
		{"a/real.jpg", 6, 5, ""},
		{"a/missing.jpg", 6, 100, ""},
	} {
		got, ok := withTimeoutRead(t, func() ([]byte, bool) { return rr.read(tc.name, tc.size, tc.max, make([]byte, 0, 2)) })
		if ok != (tc.want != "") || string(got) != tc.want {
			t.Errorf("read(%s, size %d, cap %d) = %q, %v; want %q", tc.name, tc.size, tc.max, got, ok, tc.want)
		}
	}
	rr.close()
	if got, ok := rr.read("a/real.jpg", 6, 100, nil); ok {
		t.Errorf("read after close = %q, true", got)
	}
}

func withTimeoutRead(t *testing.T, f func() ([]byte, bool)) ([]byte, bool) {
	t.Helper()
	var b []byte
	var ok bool
	withTimeout(t, func() error { b, ok = f(); return nil })
	return b, ok
}

// BenchmarkImageFolderRead: a file of 48 KiB (the shared photo set's mean)
// read from the page cache, through the fast path and through os.Root's.
func BenchmarkImageFolderRead(b *testing.B) {
	root := b.TempDir()
	files := map[string][]byte{}
	for c := range 16 {
		for i := range 16 {
			files[filepath.Join(string(rune('a'+c)), strconv.Itoa(i)+".jpg")] = make([]byte, 48<<10)
		}
	}
	writeTree(b, root, files)
	d, err := OpenImageFolder(root)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	fast := d.fast
	for _, tc := range []struct {
		name string
		fast *rootReader
	}{{"openat2", fast}, {"os.Root", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			d.fast = tc.fast
			var buf []byte
			for i := 0; b.Loop(); i++ {
				if buf, err = d.Read(i%d.Len(), buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	d.fast = fast
}
