package dataset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCOCOAbsoluteFileNames: an absolute file_name under the directory is
// read from it (torchvision's CocoDetection opens it as it is); one
// outside is refused at start, saying why; an index of such a file is
// refused, saying why.
func TestCOCOAbsoluteFileNames(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "a.jpg"), []byte("aaaa"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.jpg"), []byte("bbbbbb"), 0o644)
	outside := filepath.Join(t.TempDir(), "c.jpg")
	os.WriteFile(outside, []byte("cc"), 0o644)
	doc := func(a string) string {
		return fmt.Sprintf(`{"images": [{"id": 1, "file_name": %q, "width": 4, "height": 3}, {"id": 2, "file_name": "b.jpg", "width": 4, "height": 3}],
 "categories": [{"id": 5, "name": "x"}], "annotations": []}`, a)
	}
	ann := filepath.Join(t.TempDir(), "instances.json")
	os.WriteFile(ann, []byte(doc(filepath.Join(dir, "sub", "a.jpg"))), 0o644)
	d, err := OpenCOCO(dir, ann)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := d.Read(0, nil); err != nil || string(b) != "aaaa" || d.Name(0) != filepath.Join(dir, "sub", "a.jpg") {
		t.Fatalf("Read(0): %q %v, name %q", b, err, d.Name(0))
	}
	if b, err := d.Read(1, nil); err != nil || string(b) != "bbbbbb" {
		t.Fatalf("Read(1): %q %v", b, err)
	}
	d.Close()
	if _, err := IndexAnnotated(t.Context(), dir, ann); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "absolute file_names") {
		t.Fatalf("index: %v, want a refusal naming the absolute file_names", err)
	}
	for _, name := range []string{outside, filepath.Join(dir, "..", "c.jpg")} {
		os.WriteFile(ann, []byte(doc(name)), 0o644)
		_, err = OpenCOCO(dir, ann)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "is absolute and not under the dataset's directory") {
			t.Fatalf("%s: %v, want a refusal saying it is outside the directory", name, err)
		}
	}
}

// TestCOCONegativeBox: a box of negative width or height is kept as
// torchvision's CocoDetection wrapper keeps it (x2 = x + w in float32,
// below x), beside the image's other instances; its labels are the
// category ids.
func TestCOCONegativeBox(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("aaaa"), 0o644)
	ann := filepath.Join(t.TempDir(), "instances.json")
	os.WriteFile(ann, []byte(`{"images": [{"id": 1, "file_name": "a.jpg", "width": 8, "height": 6}],
 "categories": [{"id": 9, "name": "y"}, {"id": 5, "name": "x"}],
 "annotations": [{"id": 1, "image_id": 1, "category_id": 9, "bbox": [4.5, 1, -3.25, 2]},
                 {"id": 2, "image_id": 1, "category_id": 5, "bbox": [1, 2, 3, -0.5]}]}`), 0o644)
	d, err := OpenCOCO(dir, ann)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var in Instances
	if err := d.SourceTargets(0, 8, 6, &in); err != nil {
		t.Fatal(err)
	}
	want := [][4]float32{{4.5, 1, 1.25, 3}, {1, 2, 4, 1.5}}
	if len(in.Boxes) != 2 || in.Boxes[0] != want[0] || in.Boxes[1] != want[1] || in.Labels[0] != 9 || in.Labels[1] != 5 {
		t.Fatalf("boxes %v labels %v, want %v and the category ids [9 5]", in.Boxes, in.Labels, want)
	}
}
