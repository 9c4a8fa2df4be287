package bench

// Horizontal bar charts, for figures that compare a few configurations
// (BENCHMARKS.md's and the README's): a title and a note saying where and
// when the figures were measured, then panels of labelled bars sharing
// nothing but the width, each with its value axis, its values written at
// the bars' ends, and an optional reference line (a ceiling).

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
)

// barFigure is one PNG of bar panels, stacked.
type barFigure struct {
	Title string
	// Note is a line under the title: the machine, the date, the command.
	Note   string
	Width  int // pixels; 0: 900
	Panels []barPanel
}

// barPanel is one set of bars on one value axis.
type barPanel struct {
	// Title says what the bars measure, with its unit.
	Title string
	Bars  []bar
	// Max is the axis' end (0: from the data and Ref, ending on a tick).
	Max float64
	// Ref, when set, is a dashed line across the bars (a ceiling).
	Ref *barRef
}

// bar is one labelled value.
type bar struct {
	Label string
	Value float64
	// Text is written at the bar's end (empty: the value).
	Text  string
	Color color.RGBA // zero: the palette's colour for its place
}

// barRef is a labelled reference value.
type barRef struct {
	Value float64
	Label string
}

const (
	barRowH    = 24 // a bar's row
	barH       = 16 // the bar within it
	barTitleH  = 22 // a panel's title line
	barAxisH   = 26 // below a panel's bars: its tick labels
	barRightM  = 110
	barNoteGap = 4
)

func (f *barFigure) width() int {
	if f.Width > 0 {
		return f.Width
	}
	return 900
}

// labelWidth is the label column's width: the longest label, plus room.
func (f *barFigure) labelWidth() int {
	w := 0
	for _, p := range f.Panels {
		for _, b := range p.Bars {
			w = max(w, textWidth(b.Label))
		}
	}
	return w + 20
}

func (f *barFigure) top() int {
	if f.Note != "" {
		return plotTop + plotLineH + barNoteGap
	}
	return plotTop
}

func (p *barPanel) height() int { return barTitleH + len(p.Bars)*barRowH + barAxisH }

// size is the figure's size in pixels.
func (f *barFigure) size() (w, h int) {
	h = f.top() + 6
	for i := range f.Panels {
		h += f.Panels[i].height()
	}
	return f.width(), h
}

// axisMax is the panel's axis end.
func (p *barPanel) axisMax() float64 {
	if p.Max > 0 {
		return p.Max
	}
	hi := 0.0
	for _, b := range p.Bars {
		hi = max(hi, b.Value)
	}
	if p.Ref != nil {
		hi = max(hi, p.Ref.Value)
	}
	if hi <= 0 {
		return 1
	}
	_, step := niceTicks(0, hi, 5)
	return math.Ceil(hi/step) * step
}

// barRect is panel i's plot area (bars and grid), from its top y.
func (f *barFigure) barRect(y0 int, p *barPanel) image.Rectangle {
	x0 := f.labelWidth()
	return image.Rect(x0, y0+barTitleH, f.width()-barRightM, y0+barTitleH+len(p.Bars)*barRowH)
}

// render draws the figure.
func (f *barFigure) render() *image.RGBA {
	w, h := f.size()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(plotBG), image.Point{}, draw.Src)
	drawText(img, f.Title, (w-textWidth(f.Title))/2, 8, plotInk)
	if f.Note != "" {
		drawText(img, f.Note, (w-textWidth(f.Note))/2, 8+plotLineH+barNoteGap, plotMarkC)
	}
	y := f.top()
	for i := range f.Panels {
		p := &f.Panels[i]
		r := f.barRect(y, p)
		drawText(img, p.Title, 8, y+4, plotInk)
		hi := p.axisMax()
		px := func(v float64) int { return r.Min.X + int(math.Round(v/hi*float64(r.Dx()-1))) }
		ticks, step := niceTicks(0, hi, 5)
		for _, v := range ticks {
			x := px(v)
			vline(img, x, r.Min.Y, r.Max.Y-1, plotGrid)
			vline(img, x, r.Max.Y, r.Max.Y+3, plotInk)
			l := thousands(tickLabel(v, step))
			drawText(img, l, x-textWidth(l)/2, r.Max.Y+5, plotInk)
		}
		for k, b := range p.Bars {
			c := b.Color
			if c == (color.RGBA{}) {
				c = plotPalette[k%len(plotPalette)]
			}
			top := r.Min.Y + k*barRowH + (barRowH-barH)/2
			end := px(math.Min(math.Max(b.Value, 0), hi))
			draw.Draw(img, image.Rect(r.Min.X, top, end+1, top+barH), image.NewUniform(c), image.Point{}, draw.Src)
			drawText(img, b.Label, r.Min.X-8-textWidth(b.Label), top+(barH-plotLineH)/2, plotInk)
			text := b.Text
			if text == "" {
				text = thousands(strconv.FormatFloat(b.Value, 'f', -1, 64))
			}
			drawText(img, text, end+5, top+(barH-plotLineH)/2, plotInk)
		}
		vline(img, r.Min.X, r.Min.Y, r.Max.Y-1, plotInk)
		hline(img, r.Min.X, r.Max.X-1, r.Max.Y-1, plotInk)
		if p.Ref != nil && p.Ref.Value <= hi {
			x := px(p.Ref.Value)
			dashedVLine(img, x, r.Min.Y-barTitleH/2, r.Max.Y-1, plotMarkC)
			lx := min(x+4, w-textWidth(p.Ref.Label)-2)
			drawText(img, p.Ref.Label, lx, r.Min.Y-barTitleH+4, plotMarkC)
		}
		y += p.height()
	}
	return img
}

// thousands puts commas in the integer part of a number's text: 21188 ->
// 21,188.
func thousands(s string) string {
	intPart, frac := s, ""
	for i, c := range s {
		if c == '.' {
			intPart, frac = s[:i], s[i:]
			break
		}
	}
	neg := len(intPart) > 0 && intPart[0] == '-'
	if neg {
		intPart = intPart[1:]
	}
	for i := len(intPart) - 3; i > 0; i -= 3 {
		intPart = intPart[:i] + "," + intPart[i:]
	}
	if neg {
		intPart = "-" + intPart
	}
	return intPart + frac
}

// writePNG renders the figure to path, making its folder.
func (f *barFigure) writePNG(path string) error {
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
