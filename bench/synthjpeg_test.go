package bench

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// TestAppendJPEGDecodes: the synthetic sets' JPEG writer writes files that
// image/jpeg decodes to the planes it was given, within what the
// quantization of each quality allows: sizes that are no multiple of the
// MCU, noise (whose bytes include 0xff, stuffed) and flat areas, quality
// 100 (steps of 1: off by the DCTs' rounding alone), 90 (the sets') and 50.
func TestAppendJPEGDecodes(t *testing.T) {
	for _, tc := range []struct {
		w, h, quality int
		maxMean       float64 // mean absolute error, per plane
		maxAbs        int     // at quality 100
	}{
		{17, 9, 100, 1, 3},
		{320, 321, 100, 1, 3},
		{479, 480, 90, 3, 0},
		{64, 48, 50, 6, 0},
	} {
		t.Run(fmt.Sprintf("%dx%d/q%d", tc.w, tc.h, tc.quality), func(t *testing.T) {
			img := newYCbCr420(tc.w, tc.h)
			r := det.Key{Seed: 3, Index: uint64(tc.w)}.Stream(0)
			fill := func(p []uint8, stride, scale int) {
				for i := range p {
					x, y := i%stride, i/stride
					v := scale*(x+2*y)/4%256 + r.Intn(17) - 8 // a gradient and noise
					if x < stride/4 {
						v = 255 // flat, at the top of the range
					}
					p[i] = uint8(min(max(v, 0), 255))
				}
			}
			fill(img.y, img.yStride, 1)
			fill(img.cb, img.cStride, 2)
			fill(img.cr, img.cStride, 3)
			data := appendJPEG(nil, img, newJPEGTables(tc.quality))
			m, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := m.(*image.YCbCr)
			if !ok || got.SubsampleRatio != image.YCbCrSubsampleRatio420 {
				t.Fatalf("decoded %T, want 4:2:0 YCbCr", m)
			}
			if b := got.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
				t.Fatalf("decoded %v, want %dx%d", b, tc.w, tc.h)
			}
			cw, ch := (tc.w+1)/2, (tc.h+1)/2
			for _, pl := range []struct {
				name      string
				want, got []uint8
				ws, gs    int
				w, h      int
			}{
				{"Y", img.y, got.Y, img.yStride, got.YStride, tc.w, tc.h},
				{"Cb", img.cb, got.Cb, img.cStride, got.CStride, cw, ch},
				{"Cr", img.cr, got.Cr, img.cStride, got.CStride, cw, ch},
			} {
				sum, worst := 0, 0
				for y := range pl.h {
					for x := range pl.w {
						d := int(pl.want[y*pl.ws+x]) - int(pl.got[y*pl.gs+x])
						d = max(d, -d)
						sum += d
						worst = max(worst, d)
					}
				}
				mean := float64(sum) / float64(pl.w*pl.h)
				if mean > tc.maxMean || (tc.maxAbs > 0 && worst > tc.maxAbs) {
					t.Errorf("%s: mean absolute error %.2f (at most %g), worst %d (at most %d at quality 100)",
						pl.name, mean, tc.maxMean, worst, tc.maxAbs)
				}
			}
		})
	}
}

// TestSyntheticImages: the synthetic set's images are 320 to 480 pixels a
// side, decode, and show their class: the stripes' hue is the class's, so
// the mean colour of two classes differs, and the noise and stripes keep
// each image far from flat.
func TestSyntheticImages(t *testing.T) {
	dir := t.TempDir()
	const n, classes = 8, 2
	if err := WriteSyntheticSet(context.Background(), dir, n, classes, 1); err != nil {
		t.Fatal(err)
	}
	var meanCr [classes]float64
	for i := range n {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("class%02d", i%classes), fmt.Sprintf("%06d.jpg", i)))
		if err != nil {
			t.Fatal(err)
		}
		m, err := jpeg.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		b := m.Bounds()
		if b.Dx() < 320 || b.Dx() > 480 || b.Dy() < 320 || b.Dy() > 480 {
			t.Errorf("image %d is %dx%d, want 320 to 480 a side", i, b.Dx(), b.Dy())
		}
		yc := m.(*image.YCbCr)
		var sum, sq, cr float64
		for y := range b.Dy() {
			for x := range b.Dx() {
				v := float64(yc.Y[y*yc.YStride+x])
				sum += v
				sq += v * v
				cr += float64(yc.Cr[yc.COffset(x, y)])
			}
		}
		px := float64(b.Dx() * b.Dy())
		if sd := sq/px - (sum/px)*(sum/px); sd < 100 {
			t.Errorf("image %d: luma variance %.1f: nearly flat", i, sd)
		}
		meanCr[i%classes] += cr / px / (n / classes)
	}
	if d := meanCr[0] - meanCr[1]; d > -5 && d < 5 {
		t.Errorf("mean Cr of the classes %.1f and %.1f: their hues should differ", meanCr[0], meanCr[1])
	}
}
