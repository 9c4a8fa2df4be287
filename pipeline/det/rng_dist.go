package det

// Floating point in this file: as rng.go (no fused multiply-adds; Log
// and Exp, never math's).

import "math"

// Normal returns a standard normal value (Marsaglia's polar method, which
// needs only a logarithm and a square root, both the same bits on every
// machine here).
func (r *RNG) Normal() float64 {
	z, _ := r.normalPair()
	return z
}

// normalPair returns the two independent standard normal values of one
// step of the polar method.
func (r *RNG) normalPair() (float64, float64) {
	for {
		u := float64(2*r.Float64()) - 1
		v := float64(2*r.Float64()) - 1
		s := float64(u*u) + float64(v*v)
		if s > 0 && s < 1 {
			f := math.Sqrt(float64(-2*Log(s)) / s)
			return float64(u * f), float64(v * f)
		}
	}
}

// Gamma returns a Gamma(alpha, 1) value (Marsaglia and Tsang; alpha < 1
// through Gamma(alpha+1) * U^(1/alpha)).
func (r *RNG) Gamma(alpha float64) float64 {
	if alpha < 1 {
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		return float64(r.Gamma(alpha+1) * Exp(Log(u)/alpha))
	}
	d := alpha - 1.0/3
	c := 1 / math.Sqrt(float64(9*d))
	for {
		x := r.Normal()
		v := float64(1 + float64(c*x))
		if v <= 0 {
			continue
		}
		v = float64(float64(v*v) * v)
		u := r.Float64()
		if u == 0 {
			continue
		}
		x2 := float64(x * x)
		if u < 1-float64(0.0331*float64(x2*x2)) || Log(u) < float64(0.5*x2)+float64(d*(1-v+Log(v))) {
			return float64(d * v)
		}
	}
}

// Dirichlet fills out with a Dirichlet(alpha, ..., alpha) draw: Gamma
// draws normalized to sum to 1.
func (r *RNG) Dirichlet(alpha float64, out []float64) {
	var sum float64
	for i := range out {
		out[i] = r.Gamma(alpha)
		sum += out[i]
	}
	if !(sum > 0) {
		for i := range out {
			out[i] = 1 / float64(len(out))
		}
		return
	}
	for i := range out {
		out[i] /= sum
	}
}
