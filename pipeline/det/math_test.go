package det

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestDetMathGolden pins Exp and Log to the bit: they feed every
// RandomResizedCrop aspect ratio, and must give the same bits on every
// machine. The values are math.Exp's and math.Log's on an x86-64 CPU with
// FMA (see TestDetMathMatchesAmd64), except log of a subnormal, where
// amd64's assembly is wrong and Log is not.
func TestDetMathGolden(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		bits uint64
	}{
		{0, 0x3ff0000000000000},
		{1, 0x4005bf0a8b145769},
		{-1, 0x3fd78b56362cef38},
		{0.01, 0x3ff0292a5d2f2227},                // ...26 by amd64's non-FMA assembly
		{-0.2876820724517809, 0x3fe8000000000000}, // log(3/4)
		{0.2876820724517809, 0x3ff5555555555555},  // log(4/3)
		{0.123456789, 0x3ff21a380e17ced3},
		{-0.2, 0x3fea330ad6166159},
		{2.5, 0x40285d6fd931e0bb},
		{100, 0x48f3494a9b171bf5},
		{-100, 0x36ea8c1f14e2af5d},
		{700, 0x7f0d945df4f8ec8e},
		{-708.5, 0x000e6cf6d08897ac}, // subnormal
		{-740, 0x0000000000000055},
		{-746, 0},
		{709.78, 0x7ff0000000000000}, // +Inf a little early, as amd64's math.Exp
		{math.Inf(-1), 0},
	} {
		if got := math.Float64bits(Exp(tc.x)); got != tc.bits {
			t.Errorf("Exp(%v) = %#016x, want %#016x", tc.x, got, tc.bits)
		}
	}
	for _, tc := range []struct {
		x    float64
		bits uint64
	}{
		{0.75, 0xbfd269621134db92},
		{4.0 / 3, 0x3fd269621134db92},
		{0.08, 0xc00434b1382efeb8},
		{1, 0},
		{2, 0x3fe62e42fefa39ef},
		{0.5, 0xbfe62e42fefa39ef},
		{1e-300, 0xc085963447f87fb5},
		{3.5e10, 0x403847533d8dfe31},
		{123.456, 0x401343774f3e2362},
		{5e-324, 0xc0874385446d71c3},
	} {
		if got := math.Float64bits(Log(tc.x)); got != tc.bits {
			t.Errorf("Log(%v) = %#016x, want %#016x", tc.x, got, tc.bits)
		}
	}
	for _, x := range []float64{math.NaN(), math.Inf(1)} {
		if got := Exp(x); math.Float64bits(got) != math.Float64bits(x) {
			t.Errorf("Exp(%v) = %v", x, got)
		}
		if got := Log(x); math.Float64bits(got) != math.Float64bits(x) {
			t.Errorf("Log(%v) = %v", x, got)
		}
	}
	if !math.IsInf(Log(0), -1) || !math.IsNaN(Log(-1)) {
		t.Errorf("Log(0) = %v, Log(-1) = %v", Log(0), Log(-1))
	}
}

// ulps is how many representable doubles apart a and b are (same sign).
func ulps(a, b float64) uint64 {
	x, y := math.Float64bits(a), math.Float64bits(b)
	if x > y {
		return x - y
	}
	return y - x
}

// TestDetMathMatchesAmd64: Exp and Log are within 2 ulps of math's
// everywhere (amd64's exp assembly is off by up to about 1.2 ulps, other
// machines' math.Exp by under one, in either direction), and on amd64,
// where math.Exp is the assembly Exp transcribes, the very same bits:
// Exp for CPUs with FMA (the assembly's other branch differs at 0.01),
// Log for normal numbers always.
func TestDetMathMatchesAmd64(t *testing.T) {
	exact := runtime.GOARCH == "amd64"
	exactExp := exact && math.Exp(0.01) == Exp(0.01)
	if exact && !exactExp {
		t.Logf("math.Exp takes amd64's non-FMA branch on this CPU: Exp is checked to within 2 ulps only")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		var x float64
		switch i % 3 {
		case 0:
			x = math.Log(3.0/4) + r.Float64()*(math.Log(4.0/3)-math.Log(3.0/4))
		case 1:
			x = (r.Float64() - 0.5) * 1400
		default:
			x = (r.Float64() - 0.5) * 8
		}
		got, want := Exp(x), math.Exp(x)
		if exactExp && got != want || ulps(got, want) > 2 {
			t.Fatalf("Exp(%v) = %v, math.Exp = %v", x, got, want)
		}
		y := math.Ldexp(1+r.Float64(), r.IntN(2000)-1000)
		got, want = Log(y), math.Log(y)
		if exact && got != want || ulps(got, want) > 2 {
			t.Fatalf("Log(%v) = %v, math.Log = %v", y, got, want)
		}
	}
}
