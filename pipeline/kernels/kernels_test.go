package kernels

import (
	"bytes"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/testfiles"
	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
)

// exactTest marks t as an exactness test: arithmetic on one goroutine (a
// fast path against its reference, bytes against bytes), where the race
// detector has nothing to find and costs 10 to 100 times the time. It
// skips under -race; make test-go runs it once more, without -race
// (its tests are named TestExact...).
func exactTest(t *testing.T) {
	t.Helper()
	testkit.Exact(t)
}

// noiseImage is the photometric kernels' test image
// (pipeline/internal/testfiles').
var noiseImage = testfiles.SmoothNoise

// TestGrayAllColours checks gray's integer sum against torchvision's
// float32 steps (grayFloat) on every 24-bit colour: the two differ for 3
// colours, which gray hands to grayFloat.
func TestGrayAllColours(t *testing.T) {
	bad := 0
	for c := range 1 << 24 {
		r, g, b := byte(c>>16), byte(c>>8), byte(c)
		if gray(r, g, b) != grayFloat(r, g, b) {
			if bad++; bad < 10 {
				t.Errorf("gray(%d, %d, %d) = %d, torchvision's steps give %d", r, g, b, gray(r, g, b), grayFloat(r, g, b))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d colours differ", bad)
	}
}

// TestHueRecip checks the sextant's division by reciprocal.
func TestHueRecip(t *testing.T) {
	for d := int64(1); d < 256; d++ {
		for n := int64(0); n < 6*256; n++ {
			if got := n * hueRecip[d] >> recipFrac; got != n/d {
				t.Fatalf("%d / %d: %d, want %d", n, d, got, n/d)
			}
		}
	}
}

// TestBlurWeights checks the Q14 weights: they sum to 1 << 14 over all the
// taps, fall away from the centre, and stay so for kernels far wider than
// the precision (where the centre takes the rounding down of all others).
func TestBlurWeights(t *testing.T) {
	for _, c := range []struct {
		k     int
		sigma float64
	}{{1, 1}, {3, 0.1}, {3, 5}, {9, 1}, {23, 1.5}, {23, 5}, {23, 1e6}, {513, 1e6}, {16383, 1e6}, {16383, 2}} {
		w := make([]int32, c.k/2+1)
		var bt blurTaps
		blurWeights(w, c.sigma, &bt)
		sum := w[0]
		for k := 1; k < len(w); k++ {
			sum += 2 * w[k]
			if w[k] > w[k-1] || w[k] < 0 {
				t.Errorf("k=%d sigma=%v: w[%d]=%d after w[%d]=%d", c.k, c.sigma, k, w[k], k-1, w[k-1])
			}
			if k > bt.r && w[k] != 0 {
				t.Errorf("k=%d sigma=%v: tap %d weighs %d past the radius %d", c.k, c.sigma, k, w[k], bt.r)
			}
		}
		if sum != 1<<blurPrec {
			t.Errorf("k=%d sigma=%v: weights sum to %d", c.k, c.sigma, sum)
		}
	}
}

// TestReflect checks reflect against torch's reflect padding (within one
// side's length) and its mirroring again beyond.
func TestReflect(t *testing.T) {
	// numpy.pad([0, 1, 2], 7, mode="reflect"), as indices.
	want := []int{1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1}
	for i, wnt := range want {
		if got := reflectIndex(i-7, 3); got != wnt {
			t.Errorf("reflectIndex(%d, 3) = %d, want %d", i-7, got, wnt)
		}
	}
	for i := -5; i < 6; i++ {
		if got := reflectIndex(i, 1); got != 0 {
			t.Errorf("reflectIndex(%d, 1) = %d", i, got)
		}
	}
}

// TestBlurStops: the blur polls the flag inside its passes, not only
// between steps: with the flag set, both versions return before writing
// a pixel.
func TestBlurStops(t *testing.T) {
	const w, h = 256, 192
	pix := make([]byte, 3*w*h)
	for i := range pix {
		pix[i] = byte(i * 31)
	}
	var bx blurTaps
	blurWeights(make([]int32, 1023/2+1), 1000, &bx)
	var stop int32 = 1
	for name, blur := range map[string]func(Planes, *blurTaps, *blurTaps, *Scratch){
		"c":  blurPlanes,
		"go": blurPlanesGo,
	} {
		got := bytes.Clone(pix)
		s := Scratch{Stop: &stop}
		blur(Planes{Pix: got, W: w, H: h}, &bx, &bx, &s)
		if !bytes.Equal(got, pix) {
			t.Errorf("%s: the blur wrote pixels with its flag set", name)
		}
	}
}
