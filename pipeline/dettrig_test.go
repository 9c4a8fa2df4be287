package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
)

// detTrigArgs are arguments for the trig tests: the radians of every tenth
// of a degree in -400..400, and pseudo-random ones up to 1e7.
func detTrigArgs() []float64 {
	var xs []float64
	for d := -4000; d <= 4000; d++ {
		xs = append(xs, float64(d)/10*degToRad)
	}
	r := RNG{k: 99}
	for range 20000 {
		xs = append(xs, (r.Float64()*2-1)*math.Pow(10, float64(r.Intn(8))))
	}
	return append(xs, 0, math.Copysign(0, -1), 1e-300, math.Pi/2, math.Pi, 2*math.Pi, 1e7)
}

// TestDetTrigGolden pins detSin, detCos and detTan's bits: the same hash
// on every machine (a compiler that fused a product would change it).
func TestDetTrigGolden(t *testing.T) {
	h := sha256.New()
	var b [8]byte
	for _, x := range detTrigArgs() {
		for _, v := range []float64{detSin(x), detCos(x), detTan(x)} {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			h.Write(b[:])
		}
	}
	const want = "74a8271ae1170394b2365c579f1a6b833989651bde6e3a8747f3540a5f367d0a"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("det trig hash %s, want %s", got, want)
	}
}

// TestDetAtanErfcGolden pins detAtan's and detErfc's bits: the same hash
// on every machine (a compiler that fused a product would change it).
func TestDetAtanErfcGolden(t *testing.T) {
	h := sha256.New()
	var b [8]byte
	for i := -30000; i <= 30000; i++ {
		x := float64(i) / 1000
		for _, v := range []float64{detAtan(x), detErfc(x)} {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			h.Write(b[:])
		}
	}
	const want = "a0228c321905101540004c70c2b544535aa11d351d0a0cd5962e6c8caeb64355"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("detAtan and detErfc hash %s, want %s", got, want)
	}
}

// TestDetTrigSpecial checks the special cases, as math's.
func TestDetTrigSpecial(t *testing.T) {
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), detTrigMax, -detTrigMax} {
		if !math.IsNaN(detCos(x)) || !math.IsNaN(detTan(x)) || !math.IsNaN(detSin(x)) {
			t.Errorf("at %v: %v %v %v, want NaN", x, detSin(x), detCos(x), detTan(x))
		}
	}
	if z := math.Copysign(0, -1); math.Float64bits(detSin(z)) != math.Float64bits(z) || math.Float64bits(detTan(z)) != math.Float64bits(z) {
		t.Error("sin(-0) and tan(-0) must be -0")
	}
	if detCos(0) != 1 {
		t.Errorf("cos(0) = %v", detCos(0))
	}
}

// TestDegToRad: CPython's math.radians multiplies by Py_MATH_PI / 180.0,
// rounded once.
func TestDegToRad(t *testing.T) {
	pi := math.Pi
	if degToRad != 0.017453292519943295 || degToRad != pi/180 {
		t.Fatalf("degToRad = %v", degToRad)
	}
}
