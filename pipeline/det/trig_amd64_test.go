//go:build amd64 && !amd64.v3

package det

import (
	"math"
	"testing"
)

// TestDetTrigMatchesMath: on amd64 without FMA (GOAMD64 v1, v2) math's
// sin, cos and tan are the same Go code, unfused, so they must give the
// same bits as Sin, Cos and Tan.
func TestDetTrigMatchesMath(t *testing.T) {
	for _, x := range trigArgs() {
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"sin", Sin(x), math.Sin(x)}, {"cos", Cos(x), math.Cos(x)}, {"tan", Tan(x), math.Tan(x)}} {
			if math.Float64bits(c.got) != math.Float64bits(c.want) {
				t.Fatalf("%s(%v) = %v, math's %v", c.name, x, c.got, c.want)
			}
		}
	}
}

// detAtanErfcArgs are arguments for Atan and Erfc: every thousandth
// in -30..30 (the shears' magnitudes, erfc's every branch) and the trig
// tests' arguments.
func detAtanErfcArgs() []float64 {
	var xs []float64
	for i := -30000; i <= 30000; i++ {
		xs = append(xs, float64(i)/1000)
	}
	return append(xs, trigArgs()...)
}

// TestDetAtanErfcMatchMath: on amd64 without FMA in the build (GOAMD64 v1,
// v2) math's atan and erfc are the same Go code, unfused, so Atan
// gives math.Atan's bits, and Erfc math.Erfc's where math.Exp is
// Exp (a CPU with FMA: TestDetMathMatchesAmd64).
func TestDetAtanErfcMatchMath(t *testing.T) {
	exactErfc := math.Exp(0.01) == Exp(0.01)
	if !exactErfc {
		t.Logf("math.Exp takes amd64's non-FMA branch on this CPU: Erfc is checked to within 4 ulps only")
	}
	for _, x := range append(detAtanErfcArgs(), math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)) {
		if got, want := Atan(x), math.Atan(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("Atan(%v) = %v, math's %v", x, got, want)
		}
		got, want := Erfc(x), math.Erfc(x)
		if exactErfc && math.Float64bits(got) != math.Float64bits(want) || ulps(got, want) > 4 {
			t.Fatalf("Erfc(%v) = %v, math's %v", x, got, want)
		}
	}
}
