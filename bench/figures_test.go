package bench

import (
	"flag"
	"image"
	"image/color"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var updateFigures = flag.Bool("update", false, "rewrite bench/plots' figures of measured numbers (TestDocFigures)")

// TestDocFigures: each figure of measured numbers in bench/plots is what
// its data in figures.go draws (-update redraws them).
func TestDocFigures(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(docFigures())) {
		img := docFigures()[name].render()
		path := filepath.Join("plots", name)
		if *updateFigures {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, img); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			t.Errorf("%v (go test ./bench -run TestDocFigures -update draws it)", err)
			continue
		}
		committed, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !sameImage(committed, img) {
			t.Errorf("%s is not what figures.go draws: go test ./bench -run TestDocFigures -update", path)
		}
	}
}

func sameImage(a image.Image, b *image.RGBA) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	for y := a.Bounds().Min.Y; y < a.Bounds().Max.Y; y++ {
		for x := a.Bounds().Min.X; x < a.Bounds().Max.X; x++ {
			r1, g1, b1, a1 := a.At(x, y).RGBA()
			r2, g2, b2, a2 := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
				return false
			}
		}
	}
	return true
}

// TestBarRender: a bar's length is its value over the axis' end, its
// label sits left of the axis, and a reference line is dashed across.
func TestBarRender(t *testing.T) {
	red, green := color.RGBA{200, 0, 0, 255}, color.RGBA{0, 160, 0, 255}
	f := &barFigure{Title: "t", Note: "n", Width: 600, Panels: []barPanel{{Title: "p", Max: 100,
		Ref: &barRef{Value: 75, Label: "ref"}, Bars: []bar{{Label: "half", Value: 50, Color: red}, {Label: "all", Value: 100, Color: green}}}}}
	img := f.render()
	w, h := f.size()
	if img.Bounds() != image.Rect(0, 0, w, h) {
		t.Fatalf("image %v, size %dx%d", img.Bounds(), w, h)
	}
	r := f.barRect(f.top(), &f.Panels[0])
	mid := func(k int) int { return r.Min.Y + k*barRowH + barRowH/2 }
	at := func(x, y int) color.RGBA { return img.RGBAAt(x, y) }
	half := r.Min.X + (r.Dx()-1)/2
	if at(half-2, mid(0)) != red || at(half+3, mid(0)) == red {
		t.Errorf("the half bar does not end half-way (%d)", half)
	}
	if at(r.Max.X-2, mid(1)) != green {
		t.Error("the full bar does not reach the axis' end")
	}
	ink := 0
	for x := 0; x < r.Min.X; x++ {
		if at(x, mid(0)) == plotInk {
			ink++
		}
	}
	if ink == 0 {
		t.Error("no label left of the axis")
	}
	for in, want := range map[string]string{"21188": "21,188", "1234567.5": "1,234,567.5", "-1000": "-1,000", "999": "999"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%s) = %s, want %s", in, got, want)
		}
	}
}
