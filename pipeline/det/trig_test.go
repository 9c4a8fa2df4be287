package det

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
)

// trigArgs are arguments for the trig tests: the radians of every tenth
// of a degree in -400..400, and pseudo-random ones up to 1e7.
func trigArgs() []float64 {
	var xs []float64
	for d := -4000; d <= 4000; d++ {
		xs = append(xs, float64(d)/10*(math.Pi/180))
	}
	r := Seeded(99)
	for range 20000 {
		xs = append(xs, (r.Float64()*2-1)*math.Pow(10, float64(r.Intn(8))))
	}
	return append(xs, 0, math.Copysign(0, -1), 1e-300, math.Pi/2, math.Pi, 2*math.Pi, 1e7)
}

// TestDetTrigGolden pins Sin, Cos and Tan's bits: the same hash
// on every machine (a compiler that fused a product would change it).
func TestDetTrigGolden(t *testing.T) {
	h := sha256.New()
	var b [8]byte
	for _, x := range trigArgs() {
		for _, v := range []float64{Sin(x), Cos(x), Tan(x)} {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			h.Write(b[:])
		}
	}
	const want = "74a8271ae1170394b2365c579f1a6b833989651bde6e3a8747f3540a5f367d0a"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("det trig hash %s, want %s", got, want)
	}
}

// TestDetAtanErfcGolden pins Atan's and Erfc's bits: the same hash
// on every machine (a compiler that fused a product would change it).
func TestDetAtanErfcGolden(t *testing.T) {
	h := sha256.New()
	var b [8]byte
	for i := -30000; i <= 30000; i++ {
		x := float64(i) / 1000
		for _, v := range []float64{Atan(x), Erfc(x)} {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			h.Write(b[:])
		}
	}
	const want = "a0228c321905101540004c70c2b544535aa11d351d0a0cd5962e6c8caeb64355"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("Atan and Erfc hash %s, want %s", got, want)
	}
}

// TestDetTrigSpecial checks the special cases, as math's.
func TestDetTrigSpecial(t *testing.T) {
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), TrigMax, -TrigMax} {
		if !math.IsNaN(Cos(x)) || !math.IsNaN(Tan(x)) || !math.IsNaN(Sin(x)) {
			t.Errorf("at %v: %v %v %v, want NaN", x, Sin(x), Cos(x), Tan(x))
		}
	}
	if z := math.Copysign(0, -1); math.Float64bits(Sin(z)) != math.Float64bits(z) || math.Float64bits(Tan(z)) != math.Float64bits(z) {
		t.Error("sin(-0) and tan(-0) must be -0")
	}
	if Cos(0) != 1 {
		t.Errorf("cos(0) = %v", Cos(0))
	}
}
