package bench

import (
	"fmt"
	"image"
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
	// Colours from tables, not per pixel: the stripe's level t in 256 steps
	// (its sine from a table too), the blob's (t, v) in 64 x 64. Writing a
	// set is then the JPEG encoder's time, not the colour maths'.
	var stripe [256][3]float64
	for i := range stripe {
		t := float64(i) / 255
		stripe[i][0], stripe[i][1], stripe[i][2] = hsv(hue+0.1*t, 0.55, 0.35+0.5*t)
	}
	var blob [64][64][3]float64
	for i := range blob {
		for j := range blob[i] {
			t, v := float64(i)/63, 1-0.6*float64(j)/63
			blob[i][j][0], blob[i][j][1], blob[i][j][2] = hsv(hue+0.1*t, 0.55, v)
		}
	}
	const sinSteps = 4096
	var sine [sinSteps]uint8 // t = 0.5 + 0.5 sin, in 0..255
	for i := range sine {
		sine[i] = uint8(math.Round(255 * (0.5 + 0.5*math.Sin(2*math.Pi*float64(i)/sinSteps))))
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	step := freq * ca * sinSteps / (2 * math.Pi)
	var noise uint64
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		at := (freq*sa*float64(y) + phase) * sinSteps / (2 * math.Pi)
		dy := float64(y) - by
		for x := 0; x < w; x++ {
			ti := sine[int(math.Floor(at+step*float64(x)))&(sinSteps-1)]
			c := &stripe[ti]
			if dx := float64(x) - bx; dx*dx+dy*dy < br*br {
				d := math.Sqrt(dx*dx+dy*dy) / br
				c = &blob[ti>>2][int(d*63)]
			}
			// Sensor-like noise, -8..8: four pixels' worth from one draw.
			if x&3 == 0 {
				noise = r.Uint64()
			}
			n := float64(int((noise>>(16*(x&3)))&0xffff%17) - 8)
			p := row[4*x : 4*x+4 : 4*x+4]
			p[0], p[1], p[2], p[3] = clamp8(c[0]*255+n), clamp8(c[1]*255+n), clamp8(c[2]*255+n), 255
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
