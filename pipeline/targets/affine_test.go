package targets

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestBoxFMA32 checks boxFMA32 against the exact a*b + c rounded once to
// float32 (big.Float), on random and near-tie operands.
func TestBoxFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	f := func() float32 {
		return float32(math.Ldexp(r.Float64()*2-1, r.IntN(40)-20))
	}
	for i := range 200000 {
		a, b, c := f(), f(), f()
		if i%3 == 0 { // c near -a*b: cancellation
			c = -float32(a*b) * (1 + float32(r.IntN(5)-2)*0x1p-23)
		}
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetFloat64(float64(c)))
		want, _ := x.Float32()
		if got := boxFMA32(a, b, c); got != want {
			t.Fatalf("boxFMA32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
}
