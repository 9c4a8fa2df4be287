package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// A synthetic image: stripes whose hue and orientation are its class's,
// their phase and frequency its own, a shaded disc at a place and size of
// its own, and sensor-like noise, 320 to 480 pixels a side, written as a
// quality-90 4:2:0 baseline JPEG (what cameras and image/jpeg write).
//
// It is drawn in YCbCr at the JPEG's own resolutions (luma full, chroma
// half each way), so the writer converts and downsamples nothing: the
// noise, the same in R, G and B as a grey sensor's, is the same in Y and
// none in Cb and Cr. What depends only on the class (its colours, as
// tables of the stripes' 256 levels and the disc's 64 x 64) or on nothing
// (the sine) is made once, not per image; the rest is integer arithmetic
// per pixel and the JPEG writer's (synthjpeg.go).

const synthSineSteps = 4096

// synthSine[i] is 0.5 + 0.5 sin(2 pi i / synthSineSteps) in 0..255.
var synthSine = sync.OnceValue(func() *[synthSineSteps]uint8 {
	var s [synthSineSteps]uint8
	for i := range s {
		s[i] = uint8(math.Round(255 * (0.5 + 0.5*math.Sin(2*math.Pi*float64(i)/synthSineSteps))))
	}
	return &s
})

// synthNoise[v+8] is v clamped to 0..255, for v in -8..263: a luma level
// plus noise.
var synthNoise = func() (t [272]uint8) {
	for i := range t {
		t[i] = uint8(min(max(i-8, 0), 255))
	}
	return t
}()

// synthColors are a class's colours in YCbCr: the stripes' by phase (the
// sine's steps) and the disc's, 64 levels of the stripe by 64 distances
// from its centre.
type synthColors struct {
	y, cb, cr [synthSineSteps]uint8
	blob      [64][64][3]uint8
}

var synthClassColors sync.Map // class (int) -> *synthColors

func classColors(class int) *synthColors {
	if c, ok := synthClassColors.Load(class); ok {
		return c.(*synthColors)
	}
	hue := float64(class) / 7.3
	c := new(synthColors)
	var stripe [256][3]uint8
	for i := range stripe {
		t := float64(i) / 255
		stripe[i] = toYCbCr(hsv(hue+0.1*t, 0.55, 0.35+0.5*t))
	}
	for i, t := range synthSine() {
		c.y[i], c.cb[i], c.cr[i] = stripe[t][0], stripe[t][1], stripe[t][2]
	}
	for i := range c.blob {
		for j := range c.blob[i] {
			t, v := float64(i)/63, 1-0.6*float64(j)/63
			c.blob[i][j] = toYCbCr(hsv(hue+0.1*t, 0.55, v))
		}
	}
	got, _ := synthClassColors.LoadOrStore(class, c)
	return got.(*synthColors)
}

// toYCbCr is JFIF's conversion of r, g, b in [0, 1].
func toYCbCr(r, g, b float64) [3]uint8 {
	r, g, b = 255*r, 255*g, 255*b
	y := 0.299*r + 0.587*g + 0.114*b
	cb := 128 - 0.168736*r - 0.331264*g + 0.5*b
	cr := 128 + 0.5*r - 0.418688*g - 0.081312*b
	return [3]uint8{clamp8(math.Round(y)), clamp8(math.Round(cb)), clamp8(math.Round(cr))}
}

// synthScratch is one writer goroutine's buffers, reused image to image.
type synthScratch struct {
	y, cb, cr []uint8
	blobDist  []uint8
	out       []byte
}

var synthTables = sync.OnceValue(func() *jpegTables { return newJPEGTables(90) })

func writeSynthetic(root string, i, class int, seed uint64, s *synthScratch) error {
	r := det.Key{Seed: seed, Index: uint64(i)}.Stream(0)
	w, h := 320+r.Intn(161), 320+r.Intn(161)
	// The class fixes the hue and the stripe orientation; the sample varies
	// the phase, frequency and a blob's position, plus sensor-like noise.
	angle := float64(class) * math.Pi / 5
	freq := 0.02 + 0.03*r.Float64()
	phase := r.Float64() * 2 * math.Pi
	bx, by, br := r.Uniform(0.2, 0.8)*float64(w), r.Uniform(0.2, 0.8)*float64(h), r.Uniform(30, 120)
	// The stripe's phase at (x, y) is at0 + ax*x + ay*y sine steps, in
	// 16.16 fixed point.
	toFixed := func(v float64) int64 { return int64(math.Round(v * synthSineSteps / (2 * math.Pi) * 65536)) }
	at0, ax, ay := toFixed(phase), toFixed(freq*math.Cos(angle)), toFixed(freq*math.Sin(angle))
	cx, cy := int(math.Round(bx)), int(math.Round(by))
	br2 := br * br
	// blobDist[d2] is the disc's shade at squared distance d2 < br2.
	s.blobDist = s.blobDist[:0]
	for d2 := 0; float64(d2) < br2; d2++ {
		s.blobDist = append(s.blobDist, uint8(math.Sqrt(float64(d2))/br*63))
	}
	sine, col := synthSine(), classColors(class)

	img := ycbcr420{w: w, h: h}
	yw, yh := (w+15)&^15, (h+15)&^15
	img.yStride, img.cStride = yw, yw/2
	img.y, s.y = grow(s.y, yw*yh)
	img.cb, s.cb = grow(s.cb, yw*yh/4)
	img.cr, s.cr = grow(s.cr, yw*yh/4)

	// Luma, the padding included (the pattern goes on past the edge).
	var noise uint64
	for y := range yh {
		row := img.y[y*yw : (y+1)*yw : (y+1)*yw]
		pos := at0 + ay*int64(y)
		for x := range row {
			row[x] = col.y[(pos>>16)&(synthSineSteps-1)]
			pos += ax
		}
		if x0, x1, ok := discSpan(y-cy, cx, br2, 1); ok {
			dy2 := (y - cy) * (y - cy)
			pos := at0 + ay*int64(y) + ax*int64(x0)
			for x := x0; x <= x1 && x < yw; x++ {
				if x >= 0 {
					ti := sine[(pos>>16)&(synthSineSteps-1)]
					row[x] = col.blob[ti>>2][s.blobDist[(x-cx)*(x-cx)+dy2]][0]
				}
				pos += ax
			}
		}
		// Noise in -8..8, eight pixels' worth from one draw.
		for x := range row {
			if x&7 == 0 {
				noise = r.Uint64()
			}
			n := int((noise>>(8*(x&7)))&0xff) * 17 >> 8
			row[x] = synthNoise[int(row[x])+n]
		}
	}
	// Chroma at every second pixel of every second row.
	cw := yw / 2
	for y := range yh / 2 {
		cbRow, crRow := img.cb[y*cw:(y+1)*cw:(y+1)*cw], img.cr[y*cw:(y+1)*cw:(y+1)*cw]
		pos := at0 + ay*int64(2*y)
		for x := range cbRow {
			i := (pos >> 16) & (synthSineSteps - 1)
			cbRow[x], crRow[x] = col.cb[i], col.cr[i]
			pos += 2 * ax
		}
		if x0, x1, ok := discSpan(2*y-cy, cx, br2, 2); ok {
			dy2 := (2*y - cy) * (2*y - cy)
			pos := at0 + ay*int64(2*y) + 2*ax*int64(x0)
			for x := x0; x <= x1 && x < cw; x++ {
				if x >= 0 {
					ti := sine[(pos>>16)&(synthSineSteps-1)]
					c := &col.blob[ti>>2][s.blobDist[(2*x-cx)*(2*x-cx)+dy2]]
					cbRow[x], crRow[x] = c[1], c[2]
				}
				pos += 2 * ax
			}
		}
	}

	s.out = appendJPEG(s.out[:0], &img, synthTables())
	dir := filepath.Join(root, fmt.Sprintf("class%02d", class))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d.jpg", i)), s.out, 0o666)
}

// discSpan is the pixels x (in steps of step luma pixels) of a row dy
// luma rows from the disc's centre cx whose squared distance from it,
// (step*x-cx)^2 + dy^2, is under br2; ok is false when there are none.
func discSpan(dy, cx int, br2 float64, step int) (x0, x1 int, ok bool) {
	rem := br2 - float64(dy*dy)
	if rem <= 0 {
		return 0, 0, false
	}
	k := int(math.Sqrt(rem)) // the largest k with k*k < rem, after the nudges
	for k > 0 && float64(k*k) >= rem {
		k--
	}
	for float64((k+1)*(k+1)) < rem {
		k++
	}
	// step*x in [cx-k, cx+k].
	x0 = ceilDiv(cx-k, step)
	x1 = floorDiv(cx+k, step)
	return x0, x1, x0 <= x1
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int) int { return -floorDiv(-a, b) }

// grow returns a slice of n bytes, buf's memory when it has room, and the
// buffer to keep.
func grow(buf []uint8, n int) ([]uint8, []uint8) {
	if cap(buf) < n {
		buf = make([]uint8, n)
	}
	return buf[:n], buf
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
