package cvcase

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// TestCaseNames: every kernel the parity tests call is registered by its
// file in package cv.
func TestCaseNames(t *testing.T) {
	want := []string{"copypaste", "hsv", "letterbox", "mixup", "mosaic", "perspective", "perspective_matrix",
		"polygons2masks", "polygons2masks_overlap", "resize", "warp_affine", "warp_perspective", "yolox_mixup"}
	if got := cv.CaseNames(); !slices.Equal(got, want) {
		t.Fatalf("cv.CaseNames() = %v, want %v", got, want)
	}
}

func run(t *testing.T, line string) Result {
	t.Helper()
	var c Case
	if err := json.Unmarshal([]byte(line), &c); err != nil {
		t.Fatal(err)
	}
	return Run(&c)
}

// TestRunRefuses: a case the kernels cannot run is its error, never a
// panic or a result.
func TestRunRefuses(t *testing.T) {
	img := `{"w": 2, "h": 1, "pix": "AAAAAAAA"}`
	for _, tc := range []struct{ line, want string }{
		{`{"op": "blur", "images": []}`, `unknown op "blur"`},
		{`{"op": "mixup", "images": [` + img + `]}`, "mixup wants 2 images, got 1"},
		{`{"op": "resize", "images": [` + img + `], "dw": 0, "dh": 3}`, "dw and dh 0x3"},
		{`{"op": "resize", "images": [` + img + `], "dw": "wide", "dh": 3}`, "resize's arguments"},
		{`{"op": "warp_affine", "images": [` + img + `], "dw": 2, "dh": 2, "m": [1, 0, 0]}`, "m: want 6 numbers"},
		{`{"op": "letterbox", "images": [` + img + `]}`, "letterbox: no arguments"},
		{`{"op": "mosaic", "images": [` + strings.Repeat(img+",", 3) + img + `]}`, "mosaic: want its arguments"},
		{`{"op": "hsv", "images": [{"w": 2, "h": 2, "pix": "AAAA"}]}`, "want 1..16384 a side and 3*w*h bytes"},
		{`{"op": "polygons2masks", "images": [], "dw": 4, "dh": 4, "ratio": 8, "labels": [{"boxes": [], "cls": []}]}`, "ratio 1..min(dw, dh)"},
	} {
		if r := run(t, tc.line); !strings.Contains(r.Error, tc.want) || r.Images != nil {
			t.Errorf("%s: error %q, want one containing %q and no images", tc.line, r.Error, tc.want)
		}
	}
}

// TestRunResize: a case's arguments reach its kernel, and its image comes
// back in the case's form.
func TestRunResize(t *testing.T) {
	r := run(t, `{"op": "resize", "images": [{"w": 1, "h": 1, "pix": "AQID"}], "dw": 2, "dh": 3}`)
	if r.Error != "" || len(r.Images) != 1 {
		t.Fatalf("%+v", r)
	}
	im := r.Images[0]
	want := []byte{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3}
	if im.W != 2 || im.H != 3 || !slices.Equal(im.Pix, want) {
		t.Fatalf("resize of one pixel (1, 2, 3) to 2x3: %dx%d %v, want %v", im.W, im.H, im.Pix, want)
	}
}
