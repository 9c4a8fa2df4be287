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

func TestDirStore(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, dir, "b/x.jpg", "bx")
	writeFile(t, dir, "a.jpg", "a")
	writeFile(t, dir, "a/y.jpg", "ay")
	writeFile(t, dir, ".stoker/manifest", "m")
	writeFile(t, dir, "a/.hidden.jpg", "h")
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
	// Lexical key order (not WalkDir's): "a.jpg" < "a/..." as '.' < '/'.
	// Dot names are left out; the link leading out, and the FIFO, too.
	want := []string{"a.jpg", "a/in.jpg", "a/y.jpg", "b/x.jpg"}
	if !slices.Equal(keys, want) {
		t.Fatalf("List = %q, want %q", keys, want)
	}
	keys = keys[:0]
	st.List(t.Context(), "a/", func(o Object) error { keys = append(keys, o.Key); return nil })
	if !slices.Equal(keys, []string{"a/in.jpg", "a/y.jpg"}) {
		t.Fatalf("List(a/) = %q", keys)
	}

	p := make([]byte, 1)
	if err := st.ReadRange(t.Context(), objs["b/x.jpg"], 1, p); err != nil || string(p) != "x" {
		t.Fatalf("ReadRange = %q, %v", p, err)
	}
	if err := st.ReadRange(t.Context(), objs["b/x.jpg"], 2, p); err == nil {
		t.Fatal("a range past the object's end was read")
	}
	r, err := st.NewReader(t.Context(), objs["a/in.jpg"], 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(r); string(b) != "ay" {
		t.Fatalf("NewReader through a link inside the root = %q", b)
	}
	r.Close()
	if _, err := st.Stat(t.Context(), "nope"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Stat of a missing key: %v", err)
	}

	// Changed after listing: another size, another mtime, gone.
	writeFile(t, dir, "b/x.jpg", "bxx")
	if err := st.ReadRange(t.Context(), objs["b/x.jpg"], 0, p); !errors.Is(err, ErrChanged) {
		t.Fatalf("read of a grown file: %v, want ErrChanged", err)
	}
	later := objs["a.jpg"].ModTime.Add(time.Hour)
	os.Chtimes(filepath.Join(dir, "a.jpg"), later, later)
	if err := st.ReadRange(t.Context(), objs["a.jpg"], 0, p); !errors.Is(err, ErrChanged) {
		t.Fatalf("read of a touched file: %v, want ErrChanged", err)
	}
	os.Remove(filepath.Join(dir, "a/y.jpg"))
	if err := st.ReadRange(t.Context(), objs["a/y.jpg"], 0, p); !errors.Is(err, ErrChanged) {
		t.Fatalf("read of a removed file: %v, want ErrChanged", err)
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
