package annot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestCOCOKeypoints: Keypoints is the most keypoints of a category or of
// a well-formed annotation (a file without keypoints: 0); more than
// MaxKeypoints named by a category refuses the file, and an annotation
// with more fails its sample, naming the field.
func TestCOCOKeypoints(t *testing.T) {
	doc := func(names, kps string) string {
		return fmt.Sprintf(`{"images": [{"id": 1, "file_name": "a.jpg", "width": 9, "height": 9}, {"id": 2, "file_name": "b.jpg", "width": 9, "height": 9}],
		 "categories": [{"id": 1, "name": "p", "keypoints": [%s]}, {"id": 2, "name": "q"}],
		 "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "keypoints": [1, 2, 2, 3, 4, 1]},
		                 {"id": 2, "image_id": 2, "category_id": 2, "bbox": [0, 0, 1, 1], "keypoints": [%s]}]}`, names, kps)
	}
	for _, tc := range []struct {
		names, kps string
		want       int
	}{
		{`"a", "b"`, `1, 1, 1`, 2},                   // the category's
		{`"a", "b"`, `1, 1, 1, 2, 2, 2, 3, 3, 0`, 3}, // an annotation of a category that names none
		{``, ``, 2}, // the first annotation's
	} {
		c, err := ReadCOCO("k.json", strings.NewReader(doc(tc.names, tc.kps)))
		if err != nil {
			t.Fatal(err)
		}
		if c.Keypoints() != tc.want {
			t.Errorf("names [%s], keypoints [%s]: Keypoints() %d, want %d", tc.names, tc.kps, c.Keypoints(), tc.want)
		}
	}
	plain, err := ReadCOCO("i.json", strings.NewReader(doc(``, ``)))
	if err != nil || plain.Keypoints() != 2 {
		t.Errorf("%d %v", plain.Keypoints(), err)
	}
	none := `{"images": [{"id": 1, "file_name": "a.jpg", "width": 9, "height": 9}], "categories": [{"id": 1, "name": "p"}],
	 "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]}]}`
	if c, err := ReadCOCO("i.json", strings.NewReader(none)); err != nil || c.Keypoints() != 0 {
		t.Errorf("a file without keypoints: %d %v", c.Keypoints(), err)
	}
	many := strings.TrimSuffix(strings.Repeat(`"k", `, MaxKeypoints+1), ", ")
	if _, err := ReadCOCO("k.json", strings.NewReader(doc(many, ``))); err == nil || !strings.Contains(err.Error(), "1025 keypoints, more than the 1024 allowed") {
		t.Errorf("a category of %d keypoints: %v", MaxKeypoints+1, err)
	}
	big := strings.TrimSuffix(strings.Repeat(`1, 1, 2, `, MaxKeypoints+1), ", ")
	c, err := ReadCOCO("k.json", strings.NewReader(doc(`"a"`, big)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Sample(1)
	var se *SampleError
	if !errors.As(err, &se) || se.Field != "keypoints" || !strings.Contains(err.Error(), "more than the 1024 keypoints allowed") {
		t.Errorf("an annotation of %d keypoints: %v", MaxKeypoints+1, err)
	}
	if c.Keypoints() != 1 {
		t.Errorf("Keypoints() %d counts a malformed annotation's", c.Keypoints())
	}
}
