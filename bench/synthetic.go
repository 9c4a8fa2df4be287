package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"

	"github.com/stoker-dev/stoker/pipeline"
)

func writeSynthetic(root string, i, class int, seed uint64) error {
	r := pipeline.Key{Seed: seed, Index: uint64(i)}.Stream(0)
	w, h := 320+r.Intn(161), 320+r.Intn(161)
	// The class fixes the hue and the stripe orientation; the sample varies
	// the phase, frequency and a blob's position, plus sensor-like noise.
	hue := float64(class) / 7.3
	angle := float64(class) * math.Pi / 5
	freq := 0.02 + 0.03*r.Float64()
	phase := r.Float64() * 2 * math.Pi
	bx, by, br := r.Uniform(0.2, 0.8)*float64(w), r.Uniform(0.2, 0.8)*float64(h), r.Uniform(30, 120)
	ca, sa := math.Cos(angle), math.Sin(angle)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			t := 0.5 + 0.5*math.Sin(freq*(ca*float64(x)+sa*float64(y))+phase)
			v := 0.35 + 0.5*t
			if d := math.Hypot(float64(x)-bx, float64(y)-by); d < br {
				v = 1 - 0.6*d/br
			}
			cr, cg, cb := hsv(hue+0.1*t, 0.55, v)
			noise := float64(int(r.Uint64()%17) - 8)
			img.SetRGBA(x, y, color.RGBA{clamp8(cr*255 + noise), clamp8(cg*255 + noise), clamp8(cb*255 + noise), 255})
		}
	}
	dir := filepath.Join(root, fmt.Sprintf("class%02d", class))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%06d.jpg", i)))
	if err != nil {
		return err
	}
	if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 90}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func clamp8(v float64) uint8 { return uint8(min(max(v, 0), 255)) }

func hsv(h, s, v float64) (float64, float64, float64) {
	h = (h - math.Floor(h)) * 6
	i := math.Floor(h)
	f := h - i
	p, q, t := v*(1-s), v*(1-s*f), v*(1-s*(1-f))
	switch int(i) {
	case 0:
		return v, t, p
	case 1:
		return q, v, p
	case 2:
		return p, v, t
	case 3:
		return p, q, v
	case 4:
		return t, p, v
	}
	return v, p, q
}
