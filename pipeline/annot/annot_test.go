package annot

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomMask is an h x w row-major mask of about density set pixels.
func randomMask(r *rand.Rand, h, w int, density float64) []byte {
	m := make([]byte, h*w)
	for i := range m {
		if r.Float64() < density {
			m[i] = 1
		}
	}
	return m
}

// TestRLERoundTrip: Encode, String, FromString and Mask give the mask
// back; Area counts its pixels; BBox is the box of its set pixels; Merge
// is the pixelwise or/and.
func TestRLERoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 500 {
		h, w := 1+r.IntN(40), 1+r.IntN(40)
		m := randomMask(r, h, w, r.Float64())
		e, err := Encode(m, h, w)
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromString(e.String(), h, w)
		if err != nil {
			t.Fatalf("case %d: FromString(String()): %v", n, err)
		}
		got, err := back.Mask()
		if err != nil || !bytes.Equal(got, m) {
			t.Fatalf("case %d: the mask does not come back (%v)", n, err)
		}
		var area uint32
		x0, y0, x1, y1 := w, h, -1, -1
		for y := range h {
			for x := range w {
				if m[y*w+x] != 0 {
					area++
					x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
				}
			}
		}
		if e.Area() != area {
			t.Fatalf("case %d: area %d, want %d", n, e.Area(), area)
		}
		// pycocotools 2.0.11's box: a run crossing columns spans the height.
		if area > 0 {
			bb := e.BBox()
			if bb[0] != float64(x0) || bb[2] != float64(x1-x0+1) || bb[1] > float64(y0) || bb[1]+bb[3] < float64(y1+1) {
				t.Fatalf("case %d: bbox %v does not hold x %d..%d, y %d..%d", n, bb, x0, x1, y0, y1)
			}
		}
		m2 := randomMask(r, h, w, r.Float64())
		e2, _ := Encode(m2, h, w)
		for _, inter := range []bool{false, true} {
			u, err := Merge([]RLE{e, e2}, inter)
			if err != nil {
				t.Fatal(err)
			}
			um, err := u.Mask()
			if err != nil {
				t.Fatal(err)
			}
			for i := range m {
				want := m[i] | m2[i]
				if inter {
					want = m[i] & m2[i]
				}
				if um[i] != want {
					t.Fatalf("case %d: merge(intersect=%v) pixel %d is %d, want %d", n, inter, i, um[i], want)
				}
			}
		}
	}
}

// TestFromPolygonSquare: an axis-aligned square on pixel edges covers
// the pixels whose centres it holds.
func TestFromPolygonSquare(t *testing.T) {
	rl, err := FromPolygon([]float64{2, 1, 6, 1, 6, 4, 2, 4}, 6, 8)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := rl.Mask()
	for y := range 6 {
		for x := range 8 {
			want := byte(0)
			if x >= 2 && x < 6 && y >= 1 && y < 4 {
				want = 1
			}
			if m[y*8+x] != want {
				t.Fatalf("pixel (%d,%d) is %d, want %d\n%v", x, y, m[y*8+x], want, m)
			}
		}
	}
	if rl.Area() != 12 || rl.BBox() != [4]float64{2, 1, 4, 3} {
		t.Fatalf("area %d bbox %v, want 12 and [2 1 4 3]", rl.Area(), rl.BBox())
	}
}

// TestBadRLE: strings and counts that are not an h x w mask are errors.
func TestBadRLE(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{"\x01", "want characters"},
		{"PPPPPPPP0", "more than 7 characters"},
		{"P", "ends inside"},
		{"52", "cover"},
	} {
		if _, err := FromString(c.s, 4, 4); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromString(%q): %v, want an error saying %q", c.s, err, c.want)
		}
	}
	for _, p := range [][]float64{{1, 2, 3, 4}, {1, 2, 3, 4, 5}, {0, 0, 1e300, 0, 1, 1}} {
		if _, err := FromPolygon(p, 4, 4); err == nil {
			t.Errorf("FromPolygon(%v) gave no error", p)
		}
	}
}

const goodCOCO = `{"info": {"year": 2017}, "licenses": [],
 "images": [{"id": 9, "file_name": "b.jpg", "width": 20, "height": 10},
            {"id": 3, "file_name": "a.jpg", "width": 8, "height": 6}],
 "categories": [{"id": 18, "name": "dog"}, {"id": 1, "name": "person", "keypoints": ["nose", "eye"]}],
 "annotations": [
  {"id": 1, "image_id": 9, "category_id": 18, "bbox": [1, 2, 3, 4], "area": 12, "iscrowd": 0,
   "segmentation": [[1, 2, 4, 2, 4, 6, 1, 6]]},
  {"id": 2, "image_id": 3, "category_id": 1, "bbox": [0, 0, 2, 2], "area": 4, "iscrowd": 0,
   "keypoints": [1, 1, 2, 0, 0, 0], "num_keypoints": 1},
  {"id": 3, "image_id": 9, "category_id": 18, "bbox": [0, 0, 20, 10], "area": 200, "iscrowd": 1,
   "segmentation": {"size": [10, 20], "counts": [0, 200]}}]}`

// TestReadCOCO: images by id, categories by id with contiguous labels,
// instances per image in the file's order, looked up by id and file_name.
func TestReadCOCO(t *testing.T) {
	c, err := ReadCOCO("x.json", strings.NewReader(goodCOCO))
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 2 || c.Image(0).ID != 3 || c.Image(1).FileName != "b.jpg" {
		t.Fatalf("images %v %v, want id 3 then 9", c.Image(0), c.Image(1))
	}
	if cs := c.Categories(); cs[0].ID != 1 || cs[0].Label != 0 || cs[1].ID != 18 || cs[1].Label != 1 {
		t.Fatalf("categories %+v", cs)
	}
	i, ok := c.IndexOfFile("b.jpg")
	if !ok || i != 1 {
		t.Fatalf("IndexOfFile(b.jpg) = %d, %v", i, ok)
	}
	s, err := c.Sample(i)
	if err != nil || len(s.Instances) != 2 || s.Instances[0].ID != 1 || s.Instances[1].ID != 3 {
		t.Fatalf("sample %+v, %v", s, err)
	}
	if in := s.Instances[0]; in.CategoryID != 18 || in.Label != 1 || in.BBox != [4]float64{1, 2, 3, 4} || in.Area != 12 || in.IsCrowd {
		t.Fatalf("instance %+v", in)
	}
	if !s.Instances[1].IsCrowd {
		t.Fatal("annotation 3 is a crowd")
	}
	m, ok, err := c.Mask(&s, &s.Instances[0])
	if err != nil || !ok || m.Area() != 12 {
		t.Fatalf("mask of the polygon: area %d, %v %v; want 12", m.Area(), ok, err)
	}
	m, ok, err = c.Mask(&s, &s.Instances[1])
	if err != nil || !ok || m.Area() != 200 {
		t.Fatalf("mask of the crowd: area %d, %v %v; want 200", m.Area(), ok, err)
	}
	s0, _ := c.Sample(0)
	if kp := s0.Instances[0].Keypoints; len(kp) != 6 || kp[2] != 2 {
		t.Fatalf("keypoints %v", kp)
	}
	var js struct {
		Image       Image
		Annotations []map[string]any
	}
	b, err := c.JSON(1)
	if err != nil || json.Unmarshal(b, &js) != nil || js.Image.ID != 9 || len(js.Annotations) != 2 || js.Annotations[0]["label"] != 1.0 {
		t.Fatalf("JSON: %s, %v", b, err)
	}
	if c.Bytes() <= 0 || c.Annotations() != 3 {
		t.Fatalf("bytes %d annotations %d", c.Bytes(), c.Annotations())
	}
}

// TestCOCOBadAnnotation: each malformed annotation is its sample's error,
// naming the file, the annotation and the field; the other sample reads.
func TestCOCOBadAnnotation(t *testing.T) {
	for _, c := range []struct{ ann, field, says string }{
		{`"bbox": [1, 2, NaN, 4]`, "bbox", "finite"},
		{`"bbox": [1, 2, Infinity, 4]`, "bbox", "finite"},
		{`"bbox": [1, 2, 3]`, "bbox", "4 finite numbers"},
		{`"bbox": [1, 2, 3, 4], "segmentation": [[1, 2, 3, 4]]`, "segmentation", "at least 6"},
		{`"bbox": [1, 2, 3, 4], "segmentation": [[1, 2, 3, 4, 5, 6, 7]]`, "segmentation", "even"},
		{`"bbox": [1, 2, 3, 4], "category_id": 5`, "category_id", "not among"},
		{`"bbox": [1, 2, 3, 4], "keypoints": [1, 2, 2]`, "keypoints", "want 6"},
		{`"bbox": [1, 2, 3, 4], "keypoints": [1, 2, 2, 1, 1, 7]`, "keypoints", "visibility"},
		{`"bbox": [1, 2, 3, 4], "segmentation": {"size": [6, 8], "counts": [0, 40]}`, "segmentation", "cover"},
		{`"bbox": [1, 2, 3, 4], "segmentation": {"size": [5, 8], "counts": [0, 40]}`, "segmentation", "size 5x8"},
		{`"bbox": [1, 2, 3, 4], "segmentation": {"size": [6, 8], "counts": "0\u0001"}`, "segmentation", "want characters"},
		{`"bbox": [1, 2, 3, 4], "iscrowd": 3`, "iscrowd", "0 or 1"},
		{`"bbox": [1, 2, 3, 4], "area": -1`, "area", "at least 0"},
		// Finite in float64, not in float32 (the targets'): refused, never inf.
		{`"bbox": [1, 2, 1e39, 4]`, "bbox", "past float32's range"},
		{`"bbox": [-1e39, 2, 3, 4]`, "bbox", "past float32's range"},
		{`"bbox": [3e38, 2, 3e38, 4]`, "bbox", "past float32's range"}, // x + w
		{`"bbox": [1, 2, 3, 4], "keypoints": [1e39, 2, 2, 1, 1, 1]`, "keypoints", "past float32's range"},
		{`"bbox": [1, 2, 3, 4], "category_id": 99999999999999999999`, "category_id", "within int64"},
	} {
		ann := `{"id": 7, "image_id": 3, ` + c.ann
		if !strings.Contains(c.ann, "category_id") {
			ann += `, "category_id": 1`
		}
		ann += "}"
		doc := `{"images": [{"id": 3, "file_name": "a.jpg", "width": 8, "height": 6}, {"id": 4, "file_name": "b.jpg", "width": 8, "height": 6}],
		  "categories": [{"id": 1, "name": "p", "keypoints": ["a", "b"]}],
		  "annotations": [` + ann + `, {"id": 8, "image_id": 4, "category_id": 1, "bbox": [0, 0, 1, 1]}]}`
		co, err := ReadCOCO("inst.json", strings.NewReader(doc))
		if err != nil {
			t.Fatalf("%s: the file was refused: %v", c.ann, err)
		}
		_, err = co.Sample(0)
		var se *SampleError
		if !errors.As(err, &se) || se.Field != c.field || se.File != "inst.json" || !strings.Contains(se.Annotation, "annotation 7") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want a SampleError of inst.json, annotation 7, field %s, saying %q", c.ann, err, c.field, c.says)
		}
		if s, err := co.Sample(1); err != nil || len(s.Instances) != 1 {
			t.Errorf("%s: the other sample: %v", c.ann, err)
		}
	}
}

// TestNotCOCO: what is not a COCO file is refused, saying what was
// expected.
func TestNotCOCO(t *testing.T) {
	for _, doc := range []string{
		``, `[]`, `{"images": []}`, `{"images": {}, "annotations": [], "categories": []}`,
		`{"type": "instances"`, `not json`, `{"images": [], "annotations": [], "categories": []} extra`,
	} {
		_, err := ReadCOCO("f.json", strings.NewReader(doc))
		if !errors.Is(err, ErrNotCOCO) || !strings.Contains(err.Error(), `want a JSON object with "images"`) {
			t.Errorf("%q: %v, want ErrNotCOCO saying what was expected", doc, err)
		}
	}
	for _, doc := range []string{
		`{"images": [{"id": 1, "file_name": "a", "width": 1, "height": 1}, {"id": 1, "file_name": "b", "width": 1, "height": 1}], "annotations": [], "categories": []}`,
		`{"images": [], "annotations": [{"id": 1, "image_id": 5, "category_id": 1}], "categories": []}`,
		`{"images": [{"id": 1, "file_name": "a", "width": 0, "height": 1}], "annotations": [], "categories": []}`,
	} {
		if _, err := ReadCOCO("f.json", strings.NewReader(doc)); err == nil {
			t.Errorf("%s: read, want an error", doc)
		}
	}
}

// TestNaNReaderAcrossReads: the words are turned even when a read splits
// them, and not inside strings.
func TestNaNReaderAcrossReads(t *testing.T) {
	in := `{"a": "NaN -Infinity", "b": [NaN, -Infinity, Infinity, -1]}`
	for split := 1; split < len(in); split++ {
		r := &nanReader{r: &chunked{s: in, n: split}}
		var b bytes.Buffer
		if _, err := b.ReadFrom(r); err != nil {
			t.Fatal(err)
		}
		want := `{"a": "NaN -Infinity", "b": [1e999, -1e999, 1e999, -1]}`
		if b.String() != want {
			t.Fatalf("split %d: %s, want %s", split, b.String(), want)
		}
	}
}

type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, errEOF
	}
	k := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[k:]
	return k, nil
}

var errEOF = io.EOF

// TestCOCOIntegersOverflow: an annotation id past int64 is its image's
// error, naming the file, the annotation and the field (the others read);
// an image_id past it, or an image whose width and height would wrap
// their product, refuses the file, naming the entry and the field.
func TestCOCOIntegersOverflow(t *testing.T) {
	doc := `{"images": [{"id": 3, "file_name": "a.jpg", "width": 8, "height": 6}, {"id": 4, "file_name": "b.jpg", "width": 8, "height": 6}],
	  "categories": [{"id": 1, "name": "p"}],
	  "annotations": [{"id": 99999999999999999999, "image_id": 3, "category_id": 1, "bbox": [0, 0, 1, 1]}, {"id": 8, "image_id": 4, "category_id": 1, "bbox": [0, 0, 1, 1]}]}`
	co, err := ReadCOCO("inst.json", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = co.Sample(0)
	var se *SampleError
	if !errors.As(err, &se) || se.Field != "id" || se.Annotation != `annotations[0] (image 3 "a.jpg")` || !strings.Contains(err.Error(), "99999999999999999999") {
		t.Errorf("an id past int64: %v", err)
	}
	if s, err := co.Sample(1); err != nil || len(s.Instances) != 1 || s.Instances[0].ID != 8 {
		t.Errorf("the other sample: %v", err)
	}
	for _, c := range []struct{ doc, says string }{
		{strings.Replace(doc, `"image_id": 3`, `"image_id": 99999999999999999999`, 1), "annotations[0]: field image_id"},
		{strings.Replace(doc, `"width": 8, "height": 6}, {"id": 4`, `"width": 4294967296, "height": 4294967296}, {"id": 4`, 1), "images[0] (id 3, \"a.jpg\"): size 4294967296x4294967296"},
		{strings.Replace(doc, `{"id": 3, "file_name"`, `{"id": 99999999999999999999, "file_name"`, 1), "images[0]"},
	} {
		if _, err := ReadCOCO("inst.json", strings.NewReader(c.doc)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v; want it refused, saying %q", err, c.says)
		}
	}
}
