// Package cvcase runs one case of the YOLO kernels (package cv) given as
// JSON: what `stoker ops cv` reads on stdin for the parity tests
// (python/tests/test_yolo_kernels.py, which runs the same case through
// ultralytics), and what the golden test here replays. Images are
// {"w", "h", "pix"}: pix the base64 of 3*h*w uint8, R, G, B planes (CHW).
package cvcase

import (
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

func newImage(w, h int) (Image, kernels.Planes) {
	im := Image{W: w, H: h, Pix: make([]byte, 3*w*h)}
	return im, kernels.Planes{Pix: im.Pix, W: w, H: h}
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
// where it moves them) and its arguments.
type Case struct {
	Op     string   `json:"op"`
	Images []Image  `json:"images"`
	Labels []Labels `json:"labels,omitempty"`
	// The arguments, by kernel (see Run).
	DW        int                   `json:"dw,omitempty"`
	DH        int                   `json:"dh,omitempty"`
	Matrix    []float64             `json:"m,omitempty"`
	Border    *int                  `json:"border,omitempty"`
	Gains     [3]float64            `json:"gains,omitempty"`
	Persp     *cv.PerspectiveParams `json:"perspective,omitempty"`
	LetterBox *cv.LetterBoxArgs     `json:"letterbox,omitempty"`
	Mosaic    *MosaicArgs           `json:"mosaic,omitempty"`
	R         float64               `json:"r,omitempty"`
	P         float64               `json:"p,omitempty"`
	Ratio     int                   `json:"ratio,omitempty"`
}

// MosaicArgs are a mosaic's: its n (4 or 9), imgsz and drawn centre.
type MosaicArgs struct {
	N     int `json:"n"`
	Imgsz int `json:"imgsz"`
	XC    int `json:"xc"`
	YC    int `json:"yc"`
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
