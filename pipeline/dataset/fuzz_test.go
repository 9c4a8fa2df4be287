package dataset

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fuzzDeadline fails t if f runs longer than a fuzz input ever should: the
// fuzz targets over files look for hangs as well as crashes.
func fuzzDeadline(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("hang: still running after a minute")
	}
}

// FuzzWebDataset writes the input as a .tar shard and opens and reads it
// as a WebDataset: no panic, no hang; Open either fails with an error that
// wraps a sentinel or indexes samples whose every Read returns the bytes
// its index promised or a per-sample error that wraps one.
//
//	go test -run XXX -fuzz FuzzWebDataset -fuzztime 60s ./pipeline/dataset
func FuzzWebDataset(f *testing.F) {
	jpg := encodeJPEG(testGray(9, 7), 50)
	tarOf := func(members []tarMember, format ...tar.Format) []byte {
		path := filepath.Join(f.TempDir(), "s.tar")
		writeShard(f, path, members, format...)
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	long := strings.Repeat("d/", 60) + "k"
	f.Add(tarOf([]tarMember{{Name: "a.jpg", Data: jpg}, {Name: "a.cls", Data: []byte("3")}, {Name: "b.png", Data: encodePNG(testPaletted(5, 3))}, {Name: "b.cls", Data: []byte(" 0\n")}}))
	f.Add(tarOf([]tarMember{{Name: "dir", Data: nil}, {Name: "dir/x.y.jpeg", Data: jpg[:50]}, {Name: "dir/x.cls", Data: []byte("1")}, {Name: long + ".jpg", Data: jpg}, {Name: long + ".cls", Data: []byte("2")}}, tar.FormatGNU))
	f.Add(tarOf([]tarMember{{Name: long + ".jpg", Data: jpg}, {Name: long + ".cls", Data: []byte("0")}, {Name: "c.json", Data: []byte("{}")}}, tar.FormatPAX))
	f.Add(tarOf([]tarMember{{Name: "a.jpg", Data: jpg}})) // no label: unlabelled
	f.Add(tarOf([]tarMember{{Name: "a.jpg", Data: jpg}, {Name: "a.txt", Data: []byte("a cat")}, {Name: "a.json", Data: []byte("{}")}, {Name: "b.txt", Data: []byte("no image")}}))
	f.Add(tarOf([]tarMember{{Name: "a.jpg", Data: jpg}, {Name: "a.cls", Data: []byte("cat")}}))     // label not a number
	f.Add(tarOf([]tarMember{{Name: "a.jpg", Data: jpg}, {Name: "a.cls", Data: []byte("1")}})[:700]) // truncated
	// One file, rewritten by each exec (a worker runs them one at a time):
	// a new directory per exec would cost more than the exec.
	path := filepath.Join(f.TempDir(), "s.tar")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		fuzzDeadline(t, func() {
			d, err := OpenWebDataset(path)
			if err != nil {
				if !isBadInput(err) {
					t.Errorf("Open: error wraps no sentinel: %v", err)
				}
				return
			}
			defer d.Close()
			d.maxSize = 1 << 20 // keep each exec small
			if d.Len() == 0 || len(d.Fingerprint()) != 32 {
				t.Errorf("opened with %d samples, fingerprint %q", d.Len(), d.Fingerprint())
			}
			var buf []byte
			for i := range d.Len() {
				if l := d.Label(i); l < 0 && (l != -1 || len(d.Classes()) != 0) || l >= int64(len(d.Classes())) {
					t.Errorf("sample %d: label %d, %d classes", i, l, len(d.Classes()))
				}
				for _, name := range d.FieldNames() {
					id, ok := d.FieldID(name)
					if name == FieldSource {
						continue
					}
					if !ok {
						t.Errorf("field %q listed, not found", name)
						continue
					}
					size := d.FieldSize(i, id)
					got, err := d.ReadField(i, id, nil)
					switch {
					case size < 0:
					case err != nil && !isBadInput(err):
						t.Errorf("sample %d's field %s: error wraps no sentinel: %v", i, name, err)
					case err == nil && int64(len(got)) != size:
						t.Errorf("sample %d's field %s: %d bytes, sized %d", i, name, len(got), size)
					}
				}
				if !strings.HasPrefix(d.Name(i), "s.tar/") {
					t.Errorf("sample %d: name %q", i, d.Name(i))
				}
				got, err := d.Read(i, buf)
				if err != nil {
					if !isBadInput(err) {
						t.Errorf("Read(%d): error wraps no sentinel: %v", i, err)
					}
					continue
				}
				if s := d.samples[i]; int64(len(got)) != s.size || !bytes.Equal(got, data[s.offset:s.offset+s.size]) {
					t.Errorf("Read(%d): %d bytes, not the indexed %d at %d", i, len(got), s.size, s.offset)
				}
				buf = got
			}
		})
	})
}

// isBadInput is the pipeline's IsBadInput: err wraps a sentinel.
func isBadInput(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrUnsupported)
}
