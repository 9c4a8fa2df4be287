package kernels

import (
	"errors"
	"testing"
)

// TestPerspectiveCoeffs: the corners left where they are give the
// identity; a pure shift gives its translation; corners in a line are
// ErrSingular; and Perspective through the identity leaves the pixels
// (python/tests/test_perspective.py holds the rest to torchvision's bytes).
func TestPerspectiveCoeffs(t *testing.T) {
	start := [4][2]int{{0, 0}, {99, 0}, {99, 49}, {0, 49}}
	if c, err := PerspectiveCoeffs(&start, &start); err != nil || c != [8]float32{1, 0, 0, 0, 1, 0, 0, 0} {
		t.Errorf("identity: %v %v", c, err)
	}
	// The output's corners 3 right and 2 down of the input's: an output
	// point samples (x - 3, y - 2).
	shifted := [4][2]int{{3, 2}, {102, 2}, {102, 51}, {3, 51}}
	if c, err := PerspectiveCoeffs(&start, &shifted); err != nil || c != [8]float32{1, 0, -3, 0, 1, -2, 0, 0} {
		t.Errorf("shift: %v %v", c, err)
	}
	line := [4][2]int{{0, 0}, {50, 0}, {99, 0}, {0, 49}}
	if _, err := PerspectiveCoeffs(&start, &line); !errors.Is(err, ErrSingular) {
		t.Errorf("corners in a line: %v", err)
	}
	w, h := 100, 50
	p := Planes{W: w, H: h, Pix: make([]byte, 3*w*h)}
	for i := range p.Pix {
		p.Pix[i] = byte(i * 31)
	}
	want := append([]byte(nil), p.Pix...)
	c := [8]float32{1, 0, 0, 0, 1, 0, 0, 0}
	var s Scratch
	for _, in := range []Interpolation{Bilinear, Nearest} {
		Perspective(p, &c, in, [3]float64{9, 9, 9}, false, &s)
		for i := range want {
			if p.Pix[i] != want[i] {
				t.Fatalf("%s: the identity moved byte %d: %d, want %d", in, i, p.Pix[i], want[i])
			}
		}
	}
}
