package annot

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzReadCOCO: any bytes are either refused or read; every sample is
// either an error or instances whose masks rasterize or fail, never a
// panic.
func FuzzReadCOCO(f *testing.F) {
	f.Add([]byte(goodCOCO))
	f.Add([]byte(`{"images": [{"id": 1, "file_name": "a", "width": 4, "height": 3}], "categories": [{"id": 1, "name": "x"}],
	  "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, NaN, 1], "segmentation": {"size": [3, 4], "counts": "12"}}]}`))
	f.Add([]byte(`{"images": [], "annotations": [], "categories": []}`))
	f.Add([]byte(`[1, 2]`))
	f.Add([]byte(`{"images": [{"id": 1, "file_name": "a", "width": 4294967296, "height": 4294967296}], "categories": [{"id": 1, "name": "x"}],
	  "annotations": [{"id": 99999999999999999999, "image_id": 1, "category_id": 99999999999999999999, "bbox": [3e38, 0, 3e38, 1e39]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadCOCO("f.json", bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := range c.Len() {
			s, err := c.Sample(i)
			if err != nil {
				continue
			}
			for j := range s.Instances {
				in := &s.Instances[j]
				b := in.BBox
				if !finite32(b[0]) || !finite32(b[1]) || !finite32(float64(float32(b[0])+float32(b[2]))) || !finite32(float64(float32(b[1])+float32(b[3]))) {
					t.Fatalf("box %v: not finite in float32", b)
				}
				if in.Label < 0 || in.Label >= len(c.Categories()) {
					t.Fatalf("label %d of %d categories", in.Label, len(c.Categories()))
				}
				if s.Image.Width*s.Image.Height > 1<<16 {
					continue // keep each run short
				}
				if r, ok, err := c.Mask(&s, &s.Instances[j]); err == nil && ok {
					if _, err := r.Mask(); err != nil {
						t.Fatalf("a mask that Mask made does not decode: %v", err)
					}
				}
			}
			if _, err := c.JSON(i); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzYOLOLine: any label file is either instances within the checks or
// an error naming a line.
func FuzzYOLOLine(f *testing.F) {
	for _, s := range []string{"0 0.5 0.5 0.2 0.4", "1 0.1 0.2 0.5 0.2 0.5 0.6", "0 0.5 0.5 0.2 0.4 0.1 0.2 1", "2 nan 1 1 1", "0 1e40 0 0 0", "99999999999999999999999 0.5 0.5 0.2 0.2"} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte("0 0.5 0.5 0.2 0.4 0.1 0.2 2"), true)
	f.Fuzz(func(t *testing.T, data []byte, pose bool) {
		cfg := &YOLOConfig{Names: []string{"a", "b", "c"}}
		if pose {
			cfg.KptShape = [2]int{1, 3}
		}
		got, err := ParseYOLOLabels("x.txt", data, cfg)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x.txt: line ") && !strings.HasPrefix(err.Error(), "x.txt: file") {
				t.Fatalf("error %q names no line", err)
			}
			return
		}
		for _, in := range got {
			if in.Class < 0 || in.Class >= 3 {
				t.Fatalf("class %d", in.Class)
			}
			for _, v := range in.Box {
				if !(v >= -0.01 && v <= 1.01) {
					t.Fatalf("box %v passed the checks", in.Box)
				}
			}
		}
	})
}

// FuzzRLEString: any string is an error or a mask whose string form
// decodes to the same runs.
func FuzzRLEString(f *testing.F) {
	for _, s := range []string{"52", "0P0", "PPPPPPP0", "o", "3L7", ""} {
		f.Add(s, uint8(3), uint8(4))
	}
	f.Fuzz(func(t *testing.T, s string, h, w uint8) {
		r, err := FromString(s, int(h), int(w))
		if err != nil {
			return
		}
		back, err := FromString(r.String(), int(h), int(w))
		if err != nil || len(back.Counts) != len(r.Counts) {
			t.Fatalf("%q: the string of its runs does not read back: %v", s, err)
		}
		for i := range r.Counts {
			if back.Counts[i] != r.Counts[i] {
				t.Fatalf("%q: run %d is %d, then %d", s, i, r.Counts[i], back.Counts[i])
			}
		}
	})
}
