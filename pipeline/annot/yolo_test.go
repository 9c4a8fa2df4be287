package annot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabelPath(t *testing.T) {
	for in, want := range map[string]string{
		"/d/images/train/x.jpg":         "/d/labels/train/x.txt",
		"/d/images/a/images/b/x.y.jpeg": "/d/images/a/labels/b/x.y.txt",
		"/d/imgs/x.png":                 "/d/imgs/x.txt",
	} {
		if got := LabelPath(in); got != want {
			t.Errorf("LabelPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseYOLOConfig(t *testing.T) {
	for doc, want := range map[string][]string{
		"path: ../d\nnames:\n  0: person\n  1: 'traffic light' # c\n":  {"person", "traffic light"},
		"names: [a, \"b, c\", d]\nnc: 3\n":                             {"a", "b, c", "d"},
		"names: {1: b, 0: a}\n":                                        {"a", "b"},
		"names:\n- cat\n- dog\nkpt_shape: [17, 3]\n":                   {"cat", "dog"},
		"train: images/train\nnames:\n\n  - x # only\nval: images/v\n": {"x"},
	} {
		c, err := ParseYOLOConfig("d.yaml", []byte(doc))
		if err != nil || strings.Join(c.Names, "|") != strings.Join(want, "|") {
			t.Errorf("%q: %+v, %v; want names %q", doc, c, err, want)
		}
	}
	c, _ := ParseYOLOConfig("d.yaml", []byte("names: [p]\nkpt_shape: [17, 3]\n"))
	if c.KptShape != [2]int{17, 3} {
		t.Errorf("kpt_shape %v", c.KptShape)
	}
	for _, doc := range []string{"nc: 2\n", "names: [a]\nnc: 2\n", "names:\n  0: a\n  2: c\n", "names: [a]\nkpt_shape: [17, 4]\n", "names: 5\n"} {
		if _, err := ParseYOLOConfig("d.yaml", []byte(doc)); err == nil {
			t.Errorf("%q: read, want an error", doc)
		}
	}
}

func TestParseYOLOLabels(t *testing.T) {
	cfg := &YOLOConfig{Names: []string{"a", "b", "c"}}
	got, err := ParseYOLOLabels("x.txt", []byte("0 0.5 0.5 0.2 0.4\n\n2 0.1 0.2 0.3 0.4\n"), cfg)
	if err != nil || len(got) != 2 || got[1].Class != 2 || got[1].Box != [4]float32{0.1, 0.2, 0.3, 0.4} || got[0].Polygon != nil {
		t.Fatalf("boxes: %+v, %v", got, err)
	}
	// A polygon line makes every line a polygon; the box is around it.
	got, err = ParseYOLOLabels("x.txt", []byte("1 0.1 0.2 0.5 0.2 0.5 0.6\n0 0.5 0.5 0.2 0.4\n"), cfg)
	x0, y0, x1, y1 := float32(0.1), float32(0.2), float32(0.5), float32(0.6) // float32, as ultralytics
	if err != nil || len(got) != 2 || len(got[0].Polygon) != 6 || got[0].Box != [4]float32{(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0} || len(got[1].Polygon) != 4 {
		t.Fatalf("segments: %+v, %v", got, err)
	}
	pose := &YOLOConfig{Names: []string{"p"}, KptShape: [2]int{2, 2}}
	got, err = ParseYOLOLabels("x.txt", []byte("0 0.5 0.5 0.2 0.4 0.1 0.2 -0.005 0\n"), pose)
	if err != nil || len(got) != 1 || len(got[0].Keypoints) != 6 || got[0].Keypoints[2] != 1 || got[0].Keypoints[5] != 0 {
		t.Fatalf("pose: %+v, %v", got, err)
	}
	for _, c := range []struct {
		cfg        *YOLOConfig
		data, want string
	}{
		{cfg, "3 0.5 0.5 0.2 0.2", "class"},
		{cfg, "0.5 0.5 0.5 0.2 0.2", "class"},
		{cfg, "0 0.5 0.5 nan 0.2", "box"},
		{cfg, "0 0.5 0.5 0.2", "box"},
		{cfg, "0 0.5 1.5 0.2 0.2", "box"},
		{cfg, "0 0.5 -0.5 0.2 0.2", "box"},
		{cfg, "0 0.1 0.1 0.2 0.2 0.3 0.3 0.4", "polygon"},
		{cfg, "0 0.1 0.1 0.2 0.2 0.3 0.3 0.4 0.4\n1 0.5", "polygon"},
		{pose, "0 0.5 0.5 0.2 0.2 0.1", "keypoints"},
		// Past int's range: refused, never converted (to -2^63, once).
		{cfg, "99999999999999999999999 0.5 0.5 0.2 0.2", "class"},
		{cfg, "1e30 0.5 0.5 0.2 0.2", "class"},
		{cfg, "0 0.5 0.5 1e39 0.2", "box"}, // past float32's range
	} {
		_, err := ParseYOLOLabels("x.txt", []byte(c.data), c.cfg)
		var se *SampleError
		if !errors.As(err, &se) || se.Field != c.want || se.File != "x.txt" || !strings.HasPrefix(se.Annotation, "line ") {
			t.Errorf("%q: %v, want a SampleError of x.txt, a line, field %s", c.data, err, c.want)
		}
	}
}

// TestYOLOClassOverflow: a class past int's range is refused naming the
// file, the line, the field and the class as written.
func TestYOLOClassOverflow(t *testing.T) {
	cfg := &YOLOConfig{Names: []string{"a", "b"}}
	_, err := ParseYOLOLabels("labels/train/x.txt", []byte("0 0.5 0.5 0.2 0.2\n99999999999999999999999 0.5 0.5 0.2 0.2\n"), cfg)
	want := "labels/train/x.txt: line 2: field class: 99999999999999999999999: want an integer class below nc=2"
	if err == nil || err.Error() != want {
		t.Fatalf("%v; want %q", err, want)
	}
}

func TestReadYOLOLabels(t *testing.T) {
	d := t.TempDir()
	os.MkdirAll(filepath.Join(d, "images", "train"), 0o755)
	os.MkdirAll(filepath.Join(d, "labels", "train"), 0o755)
	os.WriteFile(filepath.Join(d, "labels", "train", "a.txt"), []byte("0 0.5 0.5 0.1 0.1\n"), 0o644)
	cfg := &YOLOConfig{Names: []string{"x"}}
	got, err := ReadYOLOLabels(filepath.Join(d, "images", "train", "a.jpg"), cfg)
	if err != nil || len(got) != 1 {
		t.Fatalf("a.jpg: %v %v", got, err)
	}
	got, err = ReadYOLOLabels(filepath.Join(d, "images", "train", "b.jpg"), cfg)
	if err != nil || got != nil {
		t.Fatalf("b.jpg (no label file): %v %v, want no instances", got, err)
	}
}
