package source

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeFile(t *testing.T, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDirStore: what a directory does of its own; what every Store does
// is TestStoreConformance's. A symbolic link to a file inside the root is
// an object (its target's bytes); one leading out of the root is not, nor
// is a FIFO, which is never read and never blocks. A file touched without
// a change of its bytes is changed: a directory has no versions, its size
// and modification time pin an object. Put leaves no temporary file.
func TestDirStore(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, dir, "a.jpg", "a")
	writeFile(t, dir, "a/y.jpg", "ay")
	writeFile(t, outside, "secret", "s")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "a/out.jpg")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("y.jpg", filepath.Join(dir, "a/in.jpg")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "a/fifo.jpg"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var keys []string
	objs := map[string]Object{}
	if err := st.List(t.Context(), "", func(o Object) error {
		keys = append(keys, o.Key)
		objs[o.Key] = o
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The link leading out, and the FIFO, are left out.
	if want := []string{"a.jpg", "a/in.jpg", "a/y.jpg"}; !slices.Equal(keys, want) {
		t.Fatalf("List = %q, want %q", keys, want)
	}
	r, err := st.NewReader(t.Context(), objs["a/in.jpg"], 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(r); string(b) != "ay" {
		t.Fatalf("NewReader through a link inside the root = %q", b)
	}
	r.Close()

	p := make([]byte, 1)
	later := objs["a.jpg"].ModTime.Add(time.Hour)
	os.Chtimes(filepath.Join(dir, "a.jpg"), later, later)
	if err := st.ReadRange(t.Context(), objs["a.jpg"], 0, p); !errors.Is(err, ErrChanged) {
		t.Fatalf("read of a touched file: %v, want ErrChanged", err)
	}
	// A FIFO named like an object is refused without blocking.
	if err := st.ReadRange(t.Context(), Object{Key: "a/fifo.jpg", Size: 0}, 0, nil); err == nil {
		t.Fatal("a FIFO was read")
	}

	if err := st.Put(t.Context(), ".stoker/m2", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".stoker/m2")); string(b) != "new" {
		t.Fatalf("Put wrote %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, ".stoker/m2.tmp")); !os.IsNotExist(err) {
		t.Fatal("Put left its temporary file")
	}
}

// TestOpenWithoutBucket: this package's tests link no object store (package
// bucket registers them), so an object-store URL is refused, naming the
// package to import and not the URL's credential.
func TestOpenWithoutBucket(t *testing.T) {
	_, err := Open(t.Context(), "s3://key:secret@b/p")
	if err == nil || !strings.Contains(err.Error(), bucketPackage) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Open of an s3:// URL without package bucket: %v; want an error naming %s, without the secret", err, bucketPackage)
	}
}

func TestOpenRefuses(t *testing.T) {
	for _, u := range []string{"http://host/x", "s3://", "s3://b/p?endpoint=x", "s3://key:secret@b/p"} {
		_, err := Open(t.Context(), u)
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if u == "s3://key:secret@b/p" && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q)'s error shows the secret: %v", u, err)
		}
	}
}
