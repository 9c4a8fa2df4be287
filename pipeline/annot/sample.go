package annot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxSampleJSON bounds one sample's annotations member (a WebDataset's
// key.json): 4 MiB, hundreds of times a COCO image's (crowd masks
// included).
const MaxSampleJSON = 4 << 20

// SampleJSON is one sample's annotations, COCO-style, as a WebDataset's
// member key.json gives them (ReadSampleJSON):
//
//	{"image_id": 42, "width": 640, "height": 480,
//	 "annotations": [{"bbox": [x, y, w, h], "category_id": 3, "iscrowd": 0,
//	                  "segmentation": [[x0, y0, ...]] | {"size": [h, w], "counts": ...},
//	                  "keypoints": [x0, y0, v0, ...], "area": 12.5, "id": 7}, ...]}
//
// "annotations" is required (an empty list: no instances); "image_id",
// "width" and "height" are optional (a width or height given must be the
// decoded image's). Each annotation is checked as a COCO file's is, bbox
// and category_id required; keys neither names are ignored.
type SampleJSON struct {
	ImageID   int64
	HasID     bool
	Instances []Instance
}

// ReadSampleJSON reads sample data (named name in messages: the shard and
// the member) of a w x h image. Anything malformed is a *SampleError
// naming name, the annotation (its index in the list, or the whole file)
// and the field.
func ReadSampleJSON(name string, data []byte, w, h int) (*SampleJSON, error) {
	whole := func(field, format string, args ...any) error {
		return &SampleError{File: name, Annotation: "file", Field: field, Err: fmt.Errorf(format, args...)}
	}
	if len(data) > MaxSampleJSON {
		return nil, whole("size", "%d bytes, more than the %d allowed", len(data), MaxSampleJSON)
	}
	type rawAnn struct {
		ID           json.RawMessage `json:"id"`
		CategoryID   json.RawMessage `json:"category_id"`
		BBox         json.RawMessage `json:"bbox"`
		Area         json.RawMessage `json:"area"`
		IsCrowd      json.RawMessage `json:"iscrowd"`
		Segmentation json.RawMessage `json:"segmentation"`
		Keypoints    json.RawMessage `json:"keypoints"`
		NumKeypoints json.RawMessage `json:"num_keypoints"`
	}
	var doc struct {
		ImageID     json.RawMessage   `json:"image_id"`
		Width       json.RawMessage   `json:"width"`
		Height      json.RawMessage   `json:"height"`
		Annotations []json.RawMessage `json:"annotations"`
	}
	dec := json.NewDecoder(&nanReader{r: bytes.NewReader(data)})
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, whole(te.Field, "a JSON %s, want %s", te.Value, map[string]string{"annotations": "a list of annotations"}[te.Field])
		}
		return nil, whole("json", "%v: want a JSON object with \"annotations\", a list of COCO annotations ({\"bbox\": [x, y, w, h], \"category_id\": ...})", err)
	}
	if dec.More() {
		return nil, whole("json", "more after the top-level object")
	}
	if doc.Annotations == nil {
		return nil, whole("annotations", "none: want \"annotations\", a list (empty for no instances) of COCO annotations")
	}
	if len(doc.Annotations) > MaxInstances {
		return nil, whole("annotations", "%d instances, more than the %d allowed", len(doc.Annotations), MaxInstances)
	}
	out := &SampleJSON{}
	if id, ok, err := intField(doc.ImageID); err != nil {
		return nil, whole("image_id", "%s: want an integer", short(doc.ImageID))
	} else if ok {
		out.ImageID, out.HasID = id, true
	}
	for _, side := range []struct {
		field string
		raw   json.RawMessage
		want  int
	}{{"width", doc.Width, w}, {"height", doc.Height, h}} {
		if v, ok, err := intField(side.raw); err != nil || (ok && v != int64(side.want)) {
			return nil, whole(side.field, "%s: the decoded image's is %d", short(side.raw), side.want)
		}
	}
	// The image's own categories, each its id: keypoints are checked as
	// (x, y, v) triplets, no category naming them.
	c := &COCO{name: name, catByID: map[int64]int{}}
	im := Image{ID: out.ImageID, FileName: name, Width: w, Height: h}
	for n, raw := range doc.Annotations {
		var a rawAnn
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&a); err != nil {
			return nil, &SampleError{File: name, Annotation: fmt.Sprintf("annotation %d", n), Field: "json", Err: fmt.Errorf("%s: want an object", short(raw))}
		}
		cat, ok, err := intField(a.CategoryID)
		if err != nil || !ok {
			return nil, &SampleError{File: name, Annotation: fmt.Sprintf("annotation %d", n), Field: "category_id", Err: fmt.Errorf("%s: want an integer", short(a.CategoryID))}
		}
		if _, seen := c.catByID[cat]; !seen {
			c.catByID[cat] = len(c.categories)
			c.categories = append(c.categories, Category{ID: cat})
		}
		in, err := c.instance(int64(n), im, json.Number(fmt.Sprint(cat)), a.BBox, a.Area, a.IsCrowd, a.Segmentation, a.Keypoints, a.NumKeypoints)
		if err != nil {
			var se *SampleError
			if errors.As(err, &se) {
				se.Annotation = fmt.Sprintf("annotation %d", n)
			}
			return nil, err
		}
		if id, ok, err := intField(a.ID); err != nil {
			return nil, &SampleError{File: name, Annotation: fmt.Sprintf("annotation %d", n), Field: "id", Err: fmt.Errorf("%s: want an integer within int64", short(a.ID))}
		} else if ok {
			in.ID = id
		}
		in.Label = 0 // no contiguous labels: a sample knows its own categories alone
		out.Instances = append(out.Instances, in)
	}
	return out, nil
}

// intField is an optional integer field: ok false when it is absent or
// null.
func intField(raw json.RawMessage) (v int64, ok bool, err error) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || string(s) == "null" {
		return 0, false, nil
	}
	v, err = json.Number(s).Int64()
	return v, err == nil, err
}

// SegmentationMask is a segmentation (an Instance's, as the file gives
// it) as one run-length mask of an h x w image, as pycocotools'
// annToRLE: the union of its polygons, or its run-length mask (from a
// counts list or string). ok is false when there is none.
func SegmentationMask(seg json.RawMessage, h, w int) (RLE, bool, error) {
	seg = bytes.TrimSpace(seg)
	if len(seg) == 0 {
		return RLE{}, false, nil
	}
	if seg[0] != '[' {
		rs, err := parseSegmentation(seg, h, w)
		if err != nil {
			return RLE{}, false, err
		}
		return rs[0], true, nil
	}
	var polys [][]float64
	if err := decodeNumbers(seg, &polys); err != nil {
		return RLE{}, false, err
	}
	rs := make([]RLE, len(polys))
	for i, p := range polys {
		r, err := FromPolygon(p, h, w)
		if err != nil {
			return RLE{}, false, fmt.Errorf("polygon %d: %v", i, err)
		}
		rs[i] = r
	}
	r, err := Merge(rs, false)
	if err != nil {
		return RLE{}, false, err
	}
	return r, true, nil
}
