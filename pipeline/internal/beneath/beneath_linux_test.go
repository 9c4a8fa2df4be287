//go:build linux

package beneath

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/internal/testfiles"
)

// TestReader: the fast path reads a plain file and a link that stays
// inside the root, and leaves everything else to os.Root (whose refusals
// pipeline/dataset's TestImageFolderSymlinks and TestImageFolderNonRegular
// check): a link out
// of the root (relative or absolute), an absolute link back inside, a
// FIFO (without blocking), a directory, a size other than the one asked
// for, a size over the cap, and any read once the dataset is closed.
func TestReader(t *testing.T) {
	outside := t.TempDir()
	testfiles.WriteTree(t, outside, map[string][]byte{"secret.jpg": []byte("outside")})
	root := t.TempDir()
	testfiles.WriteTree(t, root, map[string][]byte{"a/real.jpg": []byte("inside"), "b/other.jpg": []byte("other class"), "a/dir.jpg/x": []byte("x")})
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
	rr := New(r)
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
		got, ok := withTimeoutRead(t, func() ([]byte, bool) { return rr.Read(tc.name, tc.size, tc.max, make([]byte, 0, 2)) })
		if ok != (tc.want != "") || string(got) != tc.want {
			t.Errorf("read(%s, size %d, cap %d) = %q, %v; want %q", tc.name, tc.size, tc.max, got, ok, tc.want)
		}
	}
	rr.Close()
	if got, ok := rr.Read("a/real.jpg", 6, 100, nil); ok {
		t.Errorf("read after close = %q, true", got)
	}
}

// withTimeoutRead runs f and fails the test if it does not return in a
// minute: a FIFO opened for reading without O_NONBLOCK would block.
func withTimeoutRead(t *testing.T, f func() ([]byte, bool)) ([]byte, bool) {
	t.Helper()
	type res struct {
		b  []byte
		ok bool
	}
	done := make(chan res, 1)
	go func() { b, ok := f(); done <- res{b, ok} }()
	select {
	case r := <-done:
		return r.b, r.ok
	case <-time.After(time.Minute):
		t.Fatal("blocked: still waiting after a minute")
		return nil, false
	}
}
