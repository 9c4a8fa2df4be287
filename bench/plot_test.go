package bench

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestPlotRender draws a two-panel figure and checks the PNG: its size,
// the series' colour where its line must pass, none where it has a gap,
// and ink (text) in the title band.
func TestPlotRender(t *testing.T) {
	red := color.RGBA{200, 0, 0, 255}
	var xs, flat, ramp []float64
	for i := 0; i <= 100; i++ {
		x := float64(i) / 10
		xs = append(xs, x)
		flat = append(flat, 0.5)
		y := x * 30
		if x > 6 && x < 8 {
			y = math.NaN() // a gap
		}
		ramp = append(ramp, y)
	}
	f := &plotFigure{
		Title: "test figure", XLabel: "seconds", Width: 640, PanelHeight: 120,
		Panels: []plotPanel{
			{YLabel: "ratio", YMin: 0, YMax: 1, Series: []plotSeries{{Name: "flat", X: xs, Y: flat, Color: red}}},
			{YLabel: "images/s", Series: []plotSeries{{Name: "ramp", X: xs, Y: ramp}, {Name: "dashed", X: xs, Y: flat, Dashed: true}}},
		},
		Marks: []plotMark{{X: 5, Label: "event"}},
	}
	path := filepath.Join(t.TempDir(), "sub", "fig.png")
	if err := f.writePNG(path); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	img, err := png.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	w, h := f.size()
	if b := img.Bounds(); b.Dx() != 640 || b.Dx() != w || b.Dy() != h {
		t.Fatalf("PNG is %v, want %dx%d", b, w, h)
	}
	same := func(x, y int, c color.RGBA) bool {
		r, g, b, _ := img.At(x, y).RGBA()
		return uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(b>>8) == c.B
	}
	// near: c within 2 pixels of (x, y).
	near := func(x, y int, c color.RGBA) bool {
		for dy := -2; dy <= 2; dy++ {
			for dx := -2; dx <= 2; dx++ {
				if same(x+dx, y+dy, c) {
					return true
				}
			}
		}
		return false
	}
	// Panel 0: y = 0.5 on [0, 1] runs through the middle of the plot area.
	r := f.plotRect(0)
	for _, fx := range []float64{0.1, 0.33, 0.9} {
		x := r.Min.X + int(fx*float64(r.Dx()))
		if !near(x, r.Min.Y+r.Dy()/2, red) {
			t.Errorf("panel 0: no line at x=%d, y=%d", x, r.Min.Y+r.Dy()/2)
		}
	}
	// Panel 1: the ramp, in the palette's first colour, from (0, 0) up to
	// (10, 300); its y range ends on a tick at 300.
	r = f.plotRect(1)
	if lo, hi := f.Panels[1].yRange(); lo != 0 || hi != 300 {
		t.Errorf("panel 1 y range [%v, %v], want [0, 300]", lo, hi)
	}
	at := func(x, y float64) (int, int) {
		return r.Min.X + int(math.Round(x/10*float64(r.Dx()-1))), r.Max.Y - 1 - int(math.Round(y/300*float64(r.Dy()-1)))
	}
	for _, x := range []float64{1, 3, 5, 9} {
		px, py := at(x, 30*x)
		if !near(px, py, plotPalette[0]) {
			t.Errorf("panel 1: no ramp at x=%v (pixel %d,%d)", x, px, py)
		}
	}
	if px, py := at(7, 210); near(px, py, plotPalette[0]) {
		t.Errorf("panel 1: the ramp is drawn across its NaN gap at x=7 (pixel %d,%d)", px, py)
	}
	// Ink in the title band, and in the legend column.
	ink := func(rect image.Rectangle) bool {
		for y := rect.Min.Y; y < rect.Max.Y; y++ {
			for x := rect.Min.X; x < rect.Max.X; x++ {
				if !same(x, y, plotBG) {
					return true
				}
			}
		}
		return false
	}
	if !ink(image.Rect(0, 0, w, plotTop)) {
		t.Error("no title")
	}
	if !ink(image.Rect(r.Max.X+1, r.Min.Y, w, r.Max.Y)) {
		t.Error("no legend")
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		n      int
		step   float64
		first  float64
		count  int
	}{
		{0, 1, 5, 0.2, 0, 6},
		{0, 300, 5, 100, 0, 4},
		{0, 37, 10, 5, 0, 8},
		{-1, 1, 4, 0.5, -1, 5},
	} {
		ticks, step := niceTicks(c.lo, c.hi, c.n)
		if math.Abs(step-c.step) > 1e-12 || len(ticks) != c.count || ticks[0] != c.first {
			t.Errorf("niceTicks(%v, %v, %d) = %v step %v; want %d ticks from %v step %v", c.lo, c.hi, c.n, ticks, step, c.count, c.first, c.step)
		}
	}
	if got := tickLabel(0.2, 0.2); got != "0.2" {
		t.Errorf("tickLabel(0.2, 0.2) = %q", got)
	}
	if got := tickLabel(0.05, 0.05); got != "0.05" {
		t.Errorf("tickLabel(0.05, 0.05) = %q", got)
	}
}
