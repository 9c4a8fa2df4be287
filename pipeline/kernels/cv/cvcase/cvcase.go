// Package cvcase runs one case of the YOLO kernels (package cv) given as
// JSON: what `stoker ops cv` reads on stdin for the parity tests
// (python/tests/test_yolo_kernels.py, which runs the same case through
// ultralytics). It reads the images and labels and writes the result;
// each kernel's case, the arguments it reads and what it gives, is
// registered by the kernel's own file in package cv (cv.RunCase), so a
// kernel added touches nothing here. Images are
// {"w", "h", "pix"}: pix the base64 of 3*h*w uint8, R, G, B planes (CHW).
package cvcase

import (
	"encoding/json"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// Image is an image of a case: its planes' bytes, CHW.
type Image struct {
	W   int    `json:"w"`
	H   int    `json:"h"`
	Pix []byte `json:"pix"`
}

func (im Image) planes() (kernels.Planes, error) {
	if im.W < 1 || im.H < 1 || im.W > 1<<14 || im.H > 1<<14 || len(im.Pix) != 3*im.W*im.H {
		return kernels.Planes{}, fmt.Errorf("image %dx%d with %d bytes: want 1..16384 a side and 3*w*h bytes", im.W, im.H, len(im.Pix))
	}
	return kernels.Planes{Pix: im.Pix, W: im.W, H: im.H}, nil
}

// Labels are a case's instances, as cv.Instances: boxes XYXY in pixels,
// segments [n][k][2], keypoints [n][k][3] (x, y, visibility), classes.
type Labels struct {
	Boxes     [][4]float32   `json:"boxes"`
	Segments  [][][2]float32 `json:"segments,omitempty"`
	Keypoints [][][3]float32 `json:"keypoints,omitempty"`
	Cls       []int64        `json:"cls"`
}

func (l *Labels) instances() cv.Instances {
	return cv.Instances{Boxes: l.Boxes, Segments: l.Segments, Keypoints: l.Keypoints, Cls: l.Cls}
}

func labelsOf(in cv.Instances) *Labels {
	return &Labels{Boxes: in.Boxes, Segments: in.Segments, Keypoints: in.Keypoints, Cls: in.Cls}
}

// Case is one call: the kernel's name, its images (with their labels
// where it moves them) and its arguments, the other fields of its JSON
// object, which the kernel's own case reads (cv.RunCase; each kernel's
// file in package cv says its fields).
type Case struct {
	Op     string   `json:"op"`
	Images []Image  `json:"images"`
	Labels []Labels `json:"labels,omitempty"`
	// Args is the case's whole object, as read.
	Args json.RawMessage `json:"-"`
}

// UnmarshalJSON reads a case: its op, images and labels, and the whole
// object as its arguments.
func (c *Case) UnmarshalJSON(b []byte) error {
	type plain Case
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = Case(p)
	c.Args = append(json.RawMessage(nil), b...)
	return nil
}

// Result is what a case gives: its images, labels and numbers.
type Result struct {
	Images []Image   `json:"images,omitempty"`
	Labels *Labels   `json:"labels,omitempty"`
	Matrix []float32 `json:"m,omitempty"`
	Ints   []int     `json:"ints,omitempty"`
	Mask   []int32   `json:"mask,omitempty"`
	Error  string    `json:"error,omitempty"`
}
