//go:build amd64 && !amd64.v3

package pipeline

import (
	"math"
	"testing"
)

// TestDetTrigMatchesMath: on amd64 without FMA (GOAMD64 v1, v2) math's
// sin, cos and tan are the same Go code, unfused, so they must give the
// same bits as detSin, detCos and detTan.
func TestDetTrigMatchesMath(t *testing.T) {
	for _, x := range detTrigArgs() {
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"sin", detSin(x), math.Sin(x)}, {"cos", detCos(x), math.Cos(x)}, {"tan", detTan(x), math.Tan(x)}} {
			if math.Float64bits(c.got) != math.Float64bits(c.want) {
				t.Fatalf("%s(%v) = %v, math's %v", c.name, x, c.got, c.want)
			}
		}
	}
}

// detAtanErfcArgs are arguments for detAtan and detErfc: every thousandth
// in -30..30 (the shears' magnitudes, erfc's every branch) and the trig
// tests' arguments.
func detAtanErfcArgs() []float64 {
	var xs []float64
	for i := -30000; i <= 30000; i++ {
		xs = append(xs, float64(i)/1000)
	}
	return append(xs, detTrigArgs()...)
}

// TestDetAtanErfcMatchMath: on amd64 without FMA in the build (GOAMD64 v1,
// v2) math's atan and erfc are the same Go code, unfused, so detAtan
// gives math.Atan's bits, and detErfc math.Erfc's where math.Exp is
// detExp (a CPU with FMA: TestDetMathMatchesAmd64).
func TestDetAtanErfcMatchMath(t *testing.T) {
	exactErfc := math.Exp(0.01) == detExp(0.01)
	if !exactErfc {
		t.Logf("math.Exp takes amd64's non-FMA branch on this CPU: detErfc is checked to within 4 ulps only")
	}
	for _, x := range append(detAtanErfcArgs(), math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)) {
		if got, want := detAtan(x), math.Atan(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("detAtan(%v) = %v, math's %v", x, got, want)
		}
		got, want := detErfc(x), math.Erfc(x)
		if exactErfc && math.Float64bits(got) != math.Float64bits(want) || ulps(got, want) > 4 {
			t.Fatalf("detErfc(%v) = %v, math's %v", x, got, want)
		}
	}
}
