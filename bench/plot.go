package bench

// A small line-plot renderer for the benchmarks' figures, on the standard
// library's image packages and basicfont: a title, one or more panels
// stacked over a shared x axis, each with its axes, ticks, grid, series in
// colours (solid or dashed) and a legend in the right margin, and vertical
// marks (events) across every panel.

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// plotFigure is one PNG: panels stacked top to bottom, sharing the x axis.
type plotFigure struct {
	Title  string
	XLabel string
	// XMin, XMax: the x range (both 0: from the data).
	XMin, XMax float64
	Width      int // pixels; 0: 1000
	// PanelHeight is each panel's plot area in pixels; 0: 170.
	PanelHeight int
	Panels      []plotPanel
	// Marks are vertical lines drawn across every panel, labelled in the
	// first.
	Marks []plotMark
}

// plotPanel is one set of axes.
type plotPanel struct {
	YLabel string
	Series []plotSeries
	// YMin, YMax: the y range (both 0: from the data, from 0 when the data
	// are not negative).
	YMin, YMax float64
}

// plotSeries is one line. A NaN in Y leaves a gap.
type plotSeries struct {
	Name   string
	X, Y   []float64
	Color  color.RGBA // zero: the palette's colour for its place in the panel
	Dashed bool
}

// plotMark is a vertical line at X, labelled.
type plotMark struct {
	X     float64
	Label string
}

// plotPalette: distinguishable colours (matplotlib's tab10).
var plotPalette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255},
}

var (
	plotBG    = color.RGBA{255, 255, 255, 255}
	plotInk   = color.RGBA{0, 0, 0, 255}
	plotGrid  = color.RGBA{225, 225, 225, 255}
	plotMarkC = color.RGBA{120, 120, 120, 255}
)

// Layout, in pixels. basicfont.Face7x13 is 7 pixels a character, 13 a line.
const (
	plotCharW   = 7
	plotLineH   = 13
	plotTop     = 34  // the title band
	plotLeft    = 78  // rotated y label and tick labels
	plotRight   = 200 // the legend column
	plotGap     = 26  // below each panel: its x tick labels and space
	plotBottom  = 22  // the x label, below the last panel's tick labels
	plotPadTopY = 6   // space above each panel's plot area
)

func (f *plotFigure) width() int {
	if f.Width > 0 {
		return f.Width
	}
	return 1000
}

func (f *plotFigure) panelHeight() int {
	if f.PanelHeight > 0 {
		return f.PanelHeight
	}
	return 170
}

// size is the figure's size in pixels.
func (f *plotFigure) size() (w, h int) {
	return f.width(), plotTop + len(f.Panels)*(plotPadTopY+f.panelHeight()+plotGap) + plotBottom
}

// plotRect is panel i's plot area.
func (f *plotFigure) plotRect(i int) image.Rectangle {
	y0 := plotTop + i*(plotPadTopY+f.panelHeight()+plotGap) + plotPadTopY
	return image.Rect(plotLeft, y0, f.width()-plotRight, y0+f.panelHeight())
}

// xRange is the figure's x range.
func (f *plotFigure) xRange() (lo, hi float64) {
	if f.XMin != 0 || f.XMax != 0 {
		return f.XMin, f.XMax
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range f.Panels {
		for _, s := range p.Series {
			for _, x := range s.X {
				if !math.IsNaN(x) && !math.IsInf(x, 0) {
					lo, hi = min(lo, x), max(hi, x)
				}
			}
		}
	}
	if lo > hi {
		return 0, 1
	}
	if lo == hi {
		hi = lo + 1
	}
	return lo, hi
}

// yRange is panel p's y range: the configured one, or one from its data
// that ends on a tick.
func (p *plotPanel) yRange() (lo, hi float64) {
	if p.YMin != 0 || p.YMax != 0 {
		return p.YMin, p.YMax
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for _, y := range s.Y {
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				lo, hi = min(lo, y), max(hi, y)
			}
		}
	}
	if lo > hi {
		return 0, 1
	}
	if lo >= 0 {
		lo = 0
	}
	if hi <= lo {
		hi = lo + 1
	}
	_, step := niceTicks(lo, hi, 5)
	return math.Floor(lo/step) * step, math.Ceil(hi/step) * step
}

// niceTicks are about n round values (1, 2 or 5 times a power of ten
// apart) from lo to hi, and their step.
func niceTicks(lo, hi float64, n int) ([]float64, float64) {
	span := hi - lo
	if !(span > 0) || math.IsInf(span, 0) {
		return []float64{lo}, 1
	}
	raw := span / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw*(1-1e-9) {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ticks = append(ticks, v)
	}
	return ticks, step
}

// tickLabel formats v with as many decimals as step needs.
func tickLabel(v, step float64) string {
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// render draws the figure.
func (f *plotFigure) render() *image.RGBA {
	w, h := f.size()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(plotBG), image.Point{}, draw.Src)
	drawText(img, f.Title, (w-textWidth(f.Title))/2, 8, plotInk)
	xlo, xhi := f.xRange()
	xticks, xstep := niceTicks(xlo, xhi, 10)
	for i := range f.Panels {
		p := &f.Panels[i]
		r := f.plotRect(i)
		ylo, yhi := p.yRange()
		px := func(x float64) float64 { return float64(r.Min.X) + (x-xlo)/(xhi-xlo)*float64(r.Dx()-1) }
		py := func(y float64) float64 { return float64(r.Max.Y-1) - (y-ylo)/(yhi-ylo)*float64(r.Dy()-1) }
		// Grid and ticks.
		yticks, ystep := niceTicks(ylo, yhi, 5)
		for _, v := range yticks {
			y := int(math.Round(py(v)))
			hline(img, r.Min.X, r.Max.X-1, y, plotGrid)
			hline(img, r.Min.X-4, r.Min.X-1, y, plotInk)
			l := tickLabel(v, ystep)
			drawText(img, l, r.Min.X-6-textWidth(l), y-plotLineH/2, plotInk)
		}
		for _, v := range xticks {
			x := int(math.Round(px(v)))
			vline(img, x, r.Min.Y, r.Max.Y-1, plotGrid)
			vline(img, x, r.Max.Y, r.Max.Y+3, plotInk)
			l := tickLabel(v, xstep)
			drawText(img, l, x-textWidth(l)/2, r.Max.Y+5, plotInk)
		}
		// The y label, rotated, centred on the panel.
		drawTextUp(img, p.YLabel, 4, r.Min.Y+(r.Dy()+textWidth(p.YLabel))/2, plotInk)
		// Marks (their labels go over the series).
		for _, m := range f.Marks {
			if m.X < xlo || m.X > xhi {
				continue
			}
			x := int(math.Round(px(m.X)))
			dashedVLine(img, x, r.Min.Y, r.Max.Y-1, plotMarkC)
		}
		// Series, clipped to the plot area.
		for k, s := range p.Series {
			c := seriesColor(s, k)
			ln := &plotLine{img: img, clip: r, c: c, dashed: s.Dashed}
			prevOK := false
			var x0, y0 float64
			for j := range min(len(s.X), len(s.Y)) {
				x, y := s.X[j], s.Y[j]
				if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
					prevOK = false
					continue
				}
				x1, y1 := px(x), py(math.Min(math.Max(y, ylo), yhi))
				if prevOK {
					ln.segment(x0, y0, x1, y1)
				} else {
					ln.dot(int(math.Round(x1)), int(math.Round(y1)))
				}
				x0, y0, prevOK = x1, y1, true
			}
		}
		// Axes.
		hline(img, r.Min.X, r.Max.X-1, r.Max.Y-1, plotInk)
		vline(img, r.Min.X, r.Min.Y, r.Max.Y-1, plotInk)
		// The marks' labels, in the first panel, one under the other.
		for k, m := range f.Marks {
			if i > 0 || m.Label == "" || m.X < xlo || m.X > xhi {
				continue
			}
			x := int(math.Round(px(m.X)))
			lx, ly := min(x+3, r.Max.X-textWidth(m.Label)-2), r.Min.Y+2+k*(plotLineH+2)
			draw.Draw(img, image.Rect(lx-1, ly-1, lx+textWidth(m.Label)+1, ly+plotLineH+1), image.NewUniform(plotBG), image.Point{}, draw.Src)
			drawText(img, m.Label, lx, ly, plotMarkC)
		}
		// The legend, in the right margin.
		lx, ly := r.Max.X+12, r.Min.Y+2
		for k, s := range p.Series {
			if ly+plotLineH > r.Max.Y+plotGap {
				break
			}
			ln := &plotLine{img: img, clip: img.Bounds(), c: seriesColor(s, k), dashed: s.Dashed}
			mid := float64(ly + plotLineH/2)
			ln.segment(float64(lx), mid, float64(lx+22), mid)
			name := s.Name
			if maxChars := (plotRight - 12 - 28) / plotCharW; len(name) > maxChars {
				name = name[:maxChars-1] + "~"
			}
			drawText(img, name, lx+28, ly, plotInk)
			ly += plotLineH + 3
		}
	}
	if f.XLabel != "" {
		r := f.plotRect(len(f.Panels) - 1)
		drawText(img, f.XLabel, r.Min.X+(r.Dx()-textWidth(f.XLabel))/2, r.Max.Y+5+plotLineH+2, plotInk)
	}
	return img
}

func seriesColor(s plotSeries, k int) color.RGBA {
	if s.Color != (color.RGBA{}) {
		return s.Color
	}
	return plotPalette[k%len(plotPalette)]
}

// writePNG renders the figure to path, making its folder.
func (f *plotFigure) writePNG(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(out, f.render()); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return out.Close()
}

// plotLine draws 2-pixel-wide lines, solid or dashed (the dash pattern
// runs on along a series' segments).
type plotLine struct {
	img    *image.RGBA
	clip   image.Rectangle
	c      color.RGBA
	dashed bool
	run    float64 // length drawn so far, for the dashes
}

func (l *plotLine) dot(x, y int) {
	for dy := 0; dy < 2; dy++ {
		for dx := 0; dx < 2; dx++ {
			if p := image.Pt(x+dx, y+dy); p.In(l.clip) {
				l.img.SetRGBA(p.X, p.Y, l.c)
			}
		}
	}
}

// segment draws from (x0, y0) to (x1, y1), one dot per pixel step.
func (l *plotLine) segment(x0, y0, x1, y1 float64) {
	dx, dy := x1-x0, y1-y0
	n := int(math.Ceil(math.Max(math.Abs(dx), math.Abs(dy))))
	step := 0.0
	if n > 0 {
		step = math.Hypot(dx, dy) / float64(n)
	}
	for i := 0; i <= n; i++ {
		t := 0.0
		if n > 0 {
			t = float64(i) / float64(n)
		}
		if !l.dashed || int(l.run/7)%2 == 0 {
			l.dot(int(math.Round(x0+t*dx)), int(math.Round(y0+t*dy)))
		}
		if i < n {
			l.run += step
		}
	}
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		if image.Pt(x, y).In(img.Rect) {
			img.SetRGBA(x, y, c)
		}
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		if image.Pt(x, y).In(img.Rect) {
			img.SetRGBA(x, y, c)
		}
	}
}

func dashedVLine(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		if (y-y0)%8 < 5 && image.Pt(x, y).In(img.Rect) {
			img.SetRGBA(x, y, c)
		}
	}
}

func textWidth(s string) int { return len(s) * plotCharW }

// drawText writes s with its top-left corner at (x, y).
func drawText(dst draw.Image, s string, x, y int, c color.RGBA) {
	d := font.Drawer{Dst: dst, Src: image.NewUniform(c), Face: basicfont.Face7x13,
		Dot: fixed.P(x, y+basicfont.Face7x13.Ascent)}
	d.DrawString(s)
}

// drawTextUp writes s rotated a quarter turn anticlockwise (read bottom to
// top), starting at (x, y), the bottom-left corner of its box.
func drawTextUp(dst *image.RGBA, s string, x, y int, c color.RGBA) {
	if s == "" {
		return
	}
	w := textWidth(s)
	tmp := image.NewAlpha(image.Rect(0, 0, w, plotLineH))
	d := font.Drawer{Dst: tmp, Src: image.Opaque, Face: basicfont.Face7x13,
		Dot: fixed.P(0, basicfont.Face7x13.Ascent)}
	d.DrawString(s)
	for ty := 0; ty < plotLineH; ty++ {
		for tx := 0; tx < w; tx++ {
			if tmp.AlphaAt(tx, ty).A < 128 {
				continue
			}
			if p := image.Pt(x+ty, y-tx); p.In(dst.Rect) {
				dst.SetRGBA(p.X, p.Y, c)
			}
		}
	}
}
