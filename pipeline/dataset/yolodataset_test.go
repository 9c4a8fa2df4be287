package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestYOLODataset: the images under the directory sorted by path, each
// with its label file (none: no instances); a bad line is the sample's
// ErrCorrupt naming labels/...; the fingerprint covers the label files.
func TestYOLODataset(t *testing.T) {
	root := t.TempDir()
	img := filepath.Join(root, "images", "train")
	lab := filepath.Join(root, "labels", "train")
	os.MkdirAll(filepath.Join(img, "sub"), 0o755)
	os.MkdirAll(filepath.Join(lab, "sub"), 0o755)
	os.WriteFile(filepath.Join(img, "b.jpg"), []byte("bb"), 0o644)
	os.WriteFile(filepath.Join(img, "sub", "a.png"), []byte("aa"), 0o644)
	os.WriteFile(filepath.Join(img, "c.jpg"), []byte("cc"), 0o644)
	os.WriteFile(filepath.Join(lab, "b.txt"), []byte("1 0.5 0.5 0.2 0.2\n"), 0o644)
	os.WriteFile(filepath.Join(lab, "c.txt"), []byte("7 0.5 0.5 0.2 0.2\n"), 0o644)
	yaml := filepath.Join(root, "data.yaml")
	os.WriteFile(yaml, []byte("names: [x, y]\n"), 0o644)
	d, err := OpenYOLO(img, yaml)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Len() != 3 || d.Name(0) != "b.jpg" || d.Name(2) != "sub/a.png" || d.Label(0) != -1 || d.Layout() != "yolo" {
		t.Fatalf("%d samples, %q %q, label %d", d.Len(), d.Name(0), d.Name(2), d.Label(0))
	}
	if ins, err := d.Labels(0); err != nil || len(ins) != 1 || ins[0].Class != 1 {
		t.Fatalf("b.jpg: %v %v", ins, err)
	}
	if ins, err := d.Labels(2); err != nil || ins != nil {
		t.Fatalf("sub/a.png (no label file): %v %v", ins, err)
	}
	_, err = d.ReadField(1, fieldIDYOLO, nil)
	if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "labels/train/c.txt: line 1: field class") {
		t.Fatalf("c.jpg's bad class: %v", err)
	}
	os.WriteFile(filepath.Join(lab, "b.txt"), []byte("0 0.5 0.5 0.2 0.2\n"), 0o644)
	d2, err := OpenYOLO(img, yaml)
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
	if d2.Fingerprint() == d.Fingerprint() {
		t.Fatal("the fingerprint does not cover the label files")
	}
	os.WriteFile(yaml, []byte("train: x\n"), 0o644)
	if _, err := OpenYOLO(img, yaml); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no names") {
		t.Fatalf("a YAML without names: %v", err)
	}
}
