//go:build unix

package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

// hostileYOLO is a YOLO dataset beneath root (images/train, labels/train,
// data.yaml beside them) whose label files are a good one and each kind
// a hostile one may be: a link to /dev/zero, to /etc/passwd, to a file of
// another directory (a valid label line, whose class must never reach a
// trainer), a FIFO. It returns the images' directory, the YAML and the
// secret's directory.
func hostileYOLO(t *testing.T) (img, yaml, secret string) {
	t.Helper()
	root := t.TempDir()
	secret = t.TempDir()
	img = filepath.Join(root, "images", "train")
	lab := filepath.Join(root, "labels", "train")
	for _, d := range []string{img, lab} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if err := os.WriteFile(filepath.Join(img, n+".jpg"), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(lab, "a.txt"), []byte("1 0.5 0.5 0.2 0.2\n"), 0o644))
	must(t, os.Symlink("/dev/zero", filepath.Join(lab, "b.txt")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(lab, "c.txt")))
	must(t, os.WriteFile(filepath.Join(secret, "d.txt"), []byte("0 0.25 0.25 0.125 0.125\n"), 0o644))
	must(t, os.Symlink(filepath.Join("..", "..", "..", filepath.Base(secret), "d.txt"), filepath.Join(lab, "d.txt")))
	must(t, syscall.Mkfifo(filepath.Join(lab, "e.txt"), 0o644))
	yaml = filepath.Join(root, "data.yaml")
	must(t, os.WriteFile(yaml, []byte("names: [x, y]\n"), 0o644))
	return img, yaml, secret
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestYOLOLabelFilesBeneath: a YOLO dataset's label files are opened as
// its images are. A link to /dev/zero, to /etc/passwd or to a file of
// another directory, and a FIFO, are each its image's error (ErrCorrupt),
// naming the label file and why, never read (the open returns at once, the
// FIFO never waited on); the good one is served. Through
// OpenAnnotatedSource too, as a server opens it.
func TestYOLOLabelFilesBeneath(t *testing.T) {
	img, yaml, _ := hostileYOLO(t)
	for _, open := range []struct {
		name string
		f    func() (Dataset, error)
	}{
		{"OpenYOLO", func() (Dataset, error) { return OpenYOLO(img, yaml) }},
		{"OpenAnnotatedSource", func() (Dataset, error) { return OpenAnnotatedSource(context.Background(), img, yaml) }},
	} {
		var ds Dataset
		must(t, withTimeout(t, func() (err error) { ds, err = open.f(); return err }))
		d := ds.(*YOLODataset)
		if ins, err := d.Labels(0); err != nil || len(ins) != 1 || ins[0].Class != 1 {
			t.Fatalf("%s: a.jpg: %v, %v", open.name, ins, err)
		}
		for i, want := range map[int]string{
			1: "labels/train/b.txt: file: field file: a symbolic link that does not resolve beneath the dataset's root",
			2: "labels/train/c.txt: file: field file: a symbolic link that does not resolve beneath the dataset's root",
			3: "labels/train/d.txt: file: field file: a symbolic link that does not resolve beneath the dataset's root",
			4: "labels/train/e.txt: file: field file: not a regular file (a FIFO): not read",
		} {
			ins, err := d.Labels(i)
			if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), want) || ins != nil {
				t.Errorf("%s: %s: %v, %v; want %q", open.name, d.Name(i), ins, err, want)
			}
			if b, err := d.ReadField(i, fieldIDYOLO, nil); err == nil || b != nil {
				t.Errorf("%s: %s: its field read: %q", open.name, d.Name(i), b)
			}
			var tg Instances
			if err := d.SourceTargets(i, 10, 10, &tg); !errors.Is(err, ErrCorrupt) || len(tg.Labels) != 0 {
				t.Errorf("%s: %s: targets %v, %v", open.name, d.Name(i), tg.Labels, err)
			}
		}
		ds.Close()
	}
}

// TestYOLOLabelsDirOutside: a labels directory that is a link out of the
// dataset's root refuses the dataset, saying so; one within it is read.
func TestYOLOLabelsDirOutside(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	img := filepath.Join(root, "images", "train")
	must(t, os.MkdirAll(img, 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "labels"), 0o755))
	must(t, os.WriteFile(filepath.Join(img, "a.jpg"), []byte("a"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "a.txt"), []byte("1 0.5 0.5 0.2 0.2\n"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(root, "labels", "train")))
	yaml := filepath.Join(root, "data.yaml")
	must(t, os.WriteFile(yaml, []byte("names: [x, y]\n"), 0o644))
	_, err := OpenYOLO(img, yaml)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "labels directory labels/train") || !strings.Contains(err.Error(), "may not lead out of it") {
		t.Fatalf("labels/train linked outside: %v", err)
	}
	// Linked within the root: read.
	must(t, os.Remove(filepath.Join(root, "labels", "train")))
	must(t, os.MkdirAll(filepath.Join(root, "other"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "other", "a.txt"), []byte("1 0.5 0.5 0.2 0.2\n"), 0o644))
	must(t, os.Symlink(filepath.Join("..", "other"), filepath.Join(root, "labels", "train")))
	d, err := OpenYOLO(img, yaml)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ins, err := d.Labels(0); err != nil || len(ins) != 1 {
		t.Fatalf("labels/train linked within the root: %v, %v", ins, err)
	}
}

// TestDatasetYAMLBounded: a dataset YAML that is over MaxDatasetYAML, a
// link to /dev/zero (a device: its size, 0, says nothing) or a FIFO is
// refused at once, before it is read.
func TestDatasetYAMLBounded(t *testing.T) {
	img, yaml, _ := hostileYOLO(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	must(t, os.WriteFile(big, append([]byte("names: [x, y]\n"), make([]byte, MaxDatasetYAML)...), 0o644))
	zero := filepath.Join(dir, "zero.yaml")
	must(t, os.Symlink("/dev/zero", zero))
	fifo := filepath.Join(dir, "fifo.yaml")
	must(t, syscall.Mkfifo(fifo, 0o644))
	for _, tc := range []struct {
		yaml string
		is   error
		want string
	}{
		{big, ErrTooLarge, fmt.Sprintf("over the %d allowed", MaxDatasetYAML)},
		{zero, ErrUnsupported, "is not a regular file (a device)"},
		{fifo, ErrUnsupported, "is not a regular file (a FIFO)"},
	} {
		for _, open := range []func() error{
			func() error { _, err := OpenYOLO(img, tc.yaml); return err },
			func() error { _, err := OpenAnnotatedSource(context.Background(), img, tc.yaml); return err },
		} {
			err := withTimeout(t, open)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v; want %v, %q", filepath.Base(tc.yaml), err, tc.is, tc.want)
			}
		}
	}
	if _, err := OpenYOLO(img, yaml); err != nil {
		t.Fatal(err)
	}
}

// TestLocalFileReadBounded: a regular file whose size lies (/proc's say
// 0) is read through its bound and one byte, and refused past it: what a
// read takes is bounded by the bound, not by the file's stat.
func TestLocalFileReadBounded(t *testing.T) {
	const max = 64
	rc, err := openLocalFile("/proc/self/maps", "maps", max, " allowed")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "it grew, or its size lies") {
		t.Fatalf("/proc/self/maps read with a bound of %d: %d bytes, %v", max, n, err)
	}
	if bf := rc.(*boundedFile); n > max+1 || bf.left < -1 {
		t.Fatalf("read %d bytes (%d past the bound): want at most the bound and one", n, -bf.left)
	}
	// A COCO file whose size lies: the parse is refused by the bound, not
	// taken as a JSON error.
	if _, err := openCOCO(t.TempDir(), "/proc/self/maps", 7*max); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a COCO file past its bound: %v", err)
	}
}

// TestCOCOAnnotationsBudget: a COCO file is refused before it is read
// when COCOParseFactor times its size passes the annotations budget,
// saying so, and opened when it fits; a FIFO or a link to /dev/zero is
// refused at once.
func TestCOCOAnnotationsBudget(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("a"), 0o644))
	ann := filepath.Join(t.TempDir(), "instances.json")
	doc := `{"images": [{"id": 1, "file_name": "a.jpg", "width": 4, "height": 4}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2]}], "categories": [{"id": 1, "name": "x"}]}`
	must(t, os.WriteFile(ann, []byte(doc), 0o644))
	size := int64(len(doc))
	ctx := context.Background()
	_, err := OpenAnnotatedSource(ctx, dir, ann, WithAnnotationsBudget(COCOParseFactor*size-1))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "annotations budget") || !strings.Contains(err.Error(), "--memory-budget") {
		t.Fatalf("a file whose parse passes the budget: %v", err)
	}
	d, err := OpenAnnotatedSource(ctx, dir, ann, WithAnnotationsBudget(COCOParseFactor*size))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	fifo := filepath.Join(t.TempDir(), "fifo.json")
	must(t, syscall.Mkfifo(fifo, 0o644))
	zero := filepath.Join(t.TempDir(), "zero.json")
	must(t, os.Symlink("/dev/zero", zero))
	for _, a := range []string{fifo, zero} {
		for _, open := range []func() error{
			func() error { _, err := OpenCOCO(dir, a); return err },
			func() error { _, err := OpenAnnotatedSource(ctx, dir, a); return err },
			func() error { _, err := annot.OpenCOCO(a); return err },
		} {
			if err := withTimeout(t, open); err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: %v", filepath.Base(a), err)
			}
		}
	}
}

// TestLabelRootsLocate: a label file's root is the directory that holds
// the image path's last "images" component, wherever that is (in the
// dataset's directory or below it), and its name "labels/..." beneath;
// an image with none has its label beside it, beneath the directory.
func TestLabelRootsLocate(t *testing.T) {
	for _, c := range []struct{ dir, f, root, rel string }{
		{"/d/images/train", "a.jpg", "/d", "labels/train/a.txt"},
		{"/d/images/train", "sub/a.png", "/d", "labels/train/sub/a.txt"},
		{"/d/images/train", "x/images/a.jpg", "/d/images/train/x", "labels/a.txt"},
		{"/d", "images/train/a.jpg", "/d", "labels/train/a.txt"},
		{"/d/photos", "a.jpg", "/d/photos", "a.txt"},
		{"/images/train", "a.jpg", "/", "labels/train/a.txt"},
	} {
		root, rel := newLabelRoots(c.dir).locate(c.f)
		if root != c.root || rel != c.rel {
			t.Errorf("%s + %s: %s, %s; want %s, %s", c.dir, c.f, root, rel, c.root, c.rel)
		}
	}
}
