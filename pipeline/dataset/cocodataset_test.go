package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

const cocoDoc = `{"images": [{"id": 2, "file_name": "b.jpg", "width": 4, "height": 3}, {"id": 1, "file_name": "a.jpg", "width": 4, "height": 3}],
 "categories": [{"id": 5, "name": "x"}],
 "annotations": [{"id": 1, "image_id": 1, "category_id": 5, "bbox": [0, 0, 1, 1]},
                 {"id": 2, "image_id": 2, "category_id": 5, "bbox": [0, 0, 1]}]}`

// TestCOCODataset: samples are the images by id, read from the
// directory; each sample's "coco" field is its annotations, a malformed
// one the sample's ErrCorrupt; the fingerprint changes with the
// annotations' bytes; a file that is not COCO, or names images the
// directory has not, is refused.
func TestCOCODataset(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("aaaa"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.jpg"), []byte("bbbbbb"), 0o644)
	ann := filepath.Join(t.TempDir(), "instances.json")
	os.WriteFile(ann, []byte(cocoDoc), 0o644)
	d, err := OpenCOCO(dir, ann)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Len() != 2 || d.Name(0) != "a.jpg" || d.Label(0) != -1 || len(d.Classes()) != 1 || d.AnnotationBytes() <= 0 {
		t.Fatalf("len %d name %q label %d classes %v", d.Len(), d.Name(0), d.Label(0), d.Classes())
	}
	if b, err := d.Read(1, nil); err != nil || string(b) != "bbbbbb" {
		t.Fatalf("Read(1): %q %v", b, err)
	}
	fs, err := NewFieldSet(d, []string{FieldCOCO, FieldPath}, 1<<20, "coco")
	if err != nil {
		t.Fatal(err)
	}
	f := make([]Field, 2)
	if err := fs.Read(d, 0, f); err != nil || !strings.Contains(string(f[0].Data), `"label":0`) || string(f[1].Data) != "a.jpg" {
		t.Fatalf("fields of sample 0: %q %q %v", f[0].Data, f[1].Data, err)
	}
	if int64(len(f[0].Data)) != d.FieldSize(0, fieldIDCOCO) {
		t.Fatalf("coco field is %d bytes, FieldSize says %d", len(f[0].Data), d.FieldSize(0, fieldIDCOCO))
	}
	err = fs.Read(d, 1, f)
	var se *annot.SampleError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &se) || se.Field != "bbox" || !strings.Contains(err.Error(), "instances.json: annotation 2") {
		t.Fatalf("sample 1's malformed box: %v, want ErrCorrupt naming instances.json, annotation 2, field bbox", err)
	}
	// One byte more in the annotations: another fingerprint.
	os.WriteFile(ann, []byte(cocoDoc+" "), 0o644)
	d2, err := OpenCOCO(dir, ann)
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
	if d2.Fingerprint() == d.Fingerprint() {
		t.Fatal("the fingerprint does not cover the annotations")
	}
	os.WriteFile(ann, []byte(`{"labels": [1, 2]}`), 0o644)
	if _, err := OpenCOCO(dir, ann); !errors.Is(err, ErrUnsupported) || !errors.Is(err, annot.ErrNotCOCO) {
		t.Fatalf("a file that is not COCO: %v", err)
	}
	os.WriteFile(ann, []byte(strings.Replace(cocoDoc, "b.jpg", "c.jpg", 1)), 0o644)
	if _, err := OpenCOCO(dir, ann); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "c.jpg") {
		t.Fatalf("annotations naming a missing image: %v", err)
	}
}
