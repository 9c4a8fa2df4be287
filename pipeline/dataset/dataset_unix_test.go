//go:build unix

package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// withTimeout runs f and fails the test if it does not return in time: the
// failure these tests look for is a read that blocks forever.
func withTimeout(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("blocked: still waiting after a minute")
		return nil
	}
}

// TestImageFolderNonRegular: a FIFO or a directory named like an image is
// never read as one. A FIFO, or a link to one, is skipped when indexing; put
// in a file's place after indexing, it is refused on Read without blocking
// (opening a FIFO for reading waits for a writer).
func TestImageFolderNonRegular(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{
		"a/0.jpg":           []byte("good"),
		"a/swapped.jpg":     []byte("becomes a fifo"),
		"a/dir.jpg/sub.txt": []byte("a directory named like an image"),
	})
	mkfifo := func(name string) {
		if err := syscall.Mkfifo(filepath.Join(root, name), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	mkfifo("a/fifo.jpg")
	mkfifo("a/.target")
	if err := os.Symlink(".target", filepath.Join(root, "a/fifo-link.jpg")); err != nil {
		t.Skip(err)
	}
	if err := os.Symlink("dir.jpg", filepath.Join(root, "a/dir-link.jpg")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names := map[string]int{}
	for i := range d.Len() {
		names[d.Name(i)] = i
	}
	// Links are indexed by what they point to: links to a FIFO or a
	// directory are skipped like the FIFO and the directory themselves.
	for _, skipped := range []string{"a/fifo.jpg", "a/dir.jpg", "a/fifo-link.jpg", "a/dir-link.jpg"} {
		if _, ok := names[skipped]; ok {
			t.Errorf("%s indexed", skipped)
		}
	}
	if err := os.Remove(filepath.Join(root, "a/swapped.jpg")); err != nil {
		t.Fatal(err)
	}
	mkfifo("a/swapped.jpg")
	for _, name := range []string{"a/swapped.jpg"} {
		t.Run(name, func(t *testing.T) {
			i, ok := names[name]
			if !ok {
				t.Fatalf("not indexed: %v", names)
			}
			err := withTimeout(t, func() error { _, err := d.Read(i, nil); return err })
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("Read: %v, want ErrUnsupported (not a regular file)", err)
			}
		})
	}
	if data, err := d.Read(names["a/0.jpg"], nil); err != nil || string(data) != "good" {
		t.Errorf("regular file: %q, %v", data, err)
	}
}

// TestWebDatasetFIFOShard: a FIFO named like a shard is refused, without
// blocking the open.
func TestWebDatasetFIFOShard(t *testing.T) {
	dir := t.TempDir()
	writeShard(t, filepath.Join(dir, "a.tar"), []tarMember{{Name: "k.jpg", Data: []byte("x")}, {Name: "k.cls", Data: []byte("1")}})
	if err := syscall.Mkfifo(filepath.Join(dir, "b.tar"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	err := withTimeout(t, func() error { _, err := OpenWebDataset(dir); return err })
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("OpenWebDataset: %v, want ErrUnsupported", err)
	}
}
