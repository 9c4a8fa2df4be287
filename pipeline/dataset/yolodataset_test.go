package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
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

// TestUltralyticsTargets: UltralyticsTargets' boxes are ultralytics'
// arithmetic (pipeline/kernels/cv's FromYOLO: xywh2xyxy in float32, then
// times the size), its keypoints x*W; SourceTargets' are torchvision's
// CXCYWH conversion of the scaled box, which differs in the last bits.
func TestUltralyticsTargets(t *testing.T) {
	root := t.TempDir()
	img := filepath.Join(root, "images", "train")
	lab := filepath.Join(root, "labels", "train")
	os.MkdirAll(img, 0o755)
	os.MkdirAll(lab, 0o755)
	os.WriteFile(filepath.Join(img, "a.jpg"), []byte("aa"), 0o644)
	lines := "0 0.512345 0.4321 0.33333 0.21111 0.1 0.2 2 0.7 0.31 1\n1 0.1 0.9 0.123457 0.1 0 0 0 0.5 0.5 2\n"
	os.WriteFile(filepath.Join(lab, "a.txt"), []byte(lines), 0o644)
	yaml := filepath.Join(root, "data.yaml")
	os.WriteFile(yaml, []byte("names: [x, y]\nkpt_shape: [2, 3]\n"), 0o644)
	d, err := OpenYOLO(img, yaml)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ls, err := d.Labels(0)
	if err != nil {
		t.Fatal(err)
	}
	var u Instances
	if err := d.UltralyticsTargets(0, 640, 427, &u); err != nil {
		t.Fatal(err)
	}
	if len(u.Boxes) != 2 || u.P != 2 || u.Labels[1] != 1 {
		t.Fatalf("%+v", u)
	}
	var xywh [][4]float32
	for _, l := range ls {
		xywh = append(xywh, l.Box)
	}
	want := cv.FromYOLO(xywh, 640, 427)
	for k := range want {
		if u.Boxes[k] != want[k] {
			t.Errorf("box %d: %v, want ultralytics' %v", k, u.Boxes[k], want[k])
		}
		for j := range 2 {
			x, y := ls[k].Keypoints[3*j]*640, ls[k].Keypoints[3*j+1]*427
			if u.Points[2*k+j] != [2]float32{x, y} || u.Vis[2*k+j] != uint8(ls[k].Keypoints[3*j+2]) {
				t.Errorf("instance %d point %d: %v %d", k, j, u.Points[2*k+j], u.Vis[2*k+j])
			}
		}
	}
}
