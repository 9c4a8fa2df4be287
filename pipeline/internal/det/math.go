package det

import "math"

// Floating point in this file: a sample's plan must be the same bits on
// every machine, so every product that is added or subtracted is either an
// explicit math.FMA (one rounding, by definition the same everywhere) or
// wrapped in float64(...), which rounds it and so stops the compiler from
// fusing it into a multiply-add (the Go spec allows that fusion, and the
// compiler does it on arm64, ppc64, s390x, riscv64 and amd64 with
// GOAMD64=v3).

// Exp is e**x, the same bits on every machine. math.Exp is not: on amd64
// it is assembly that takes a different instruction sequence when the CPU
// has FMA (the results differ in the last bit for about 9% of arguments),
// arm64 and s390x have assemblies of their own, and elsewhere it is Go code
// the compiler may fuse. Exp transcribes the amd64 assembly's FMA branch
// (Shibata's method, from SLEEF) with math.FMA, so it gives the bits
// math.Exp gives on x86-64 CPUs with FMA: the plans made before it existed,
// on such machines, are unchanged.
func Exp(x float64) float64 {
	const (
		log2e    = 1.4426950408889634073599246810018920        // 1/ln(2)
		ln2U     = 0.69314718055966295651160180568695068359375 // ln(2), upper part
		ln2L     = 0.28235290563031577122588448175013436025525412068e-12
		overflow = 7.09782712893384e+02
	)
	switch {
	case math.IsNaN(x) || math.IsInf(x, 1):
		return x
	case math.IsInf(x, -1):
		return 0
	case x > overflow:
		return math.Inf(1)
	}
	// k = round(x/ln 2), as CVTSD2SL rounds (to nearest, ties to even); out
	// of int32's range only for huge negative x, whose exp underflows.
	kf := math.RoundToEven(log2e * x)
	if kf < math.MinInt32 {
		return 0
	}
	k := int32(kf)
	// r = x - k ln 2, in two steps for precision, then scaled by 1/16.
	r := math.FMA(-ln2U, kf, x)
	r = math.FMA(-ln2L, kf, r)
	r *= 0.0625
	// e**r - 1 by its Taylor series to r**8/8!, in Horner form.
	p := 2.4801587301587301587e-5 // 1/8!
	for _, c := range [...]float64{1.9841269841269841270e-4, 1.3888888888888888889e-3, 8.3333333333333333333e-3,
		4.1666666666666666667e-2, 1.6666666666666666667e-1, 0.5, 1} {
		p = math.FMA(p, r, c)
	}
	e := float64(r * p)
	// Square 1+e four times, as e(e+2) = (1+e)**2 - 1: e**(16r) - 1, then + 1.
	for range 3 {
		e = float64(e * (e + 2))
	}
	e = math.FMA(e+2, e, 1)
	// Times 2**k, through a subnormal step as the assembly does.
	k += 0x3FF
	switch {
	case k >= 0x7FF:
		return math.Inf(1)
	case k <= 0:
		if k < -52 {
			return 0
		}
		e *= math.Float64frombits(uint64(k+0x3FE) << 52)
		k = 1
	}
	return e * math.Float64frombits(uint64(k)<<52)
}

// Log is the natural logarithm, the same bits on every machine: Go's
// pure-Go math.log (FreeBSD's e_log.c) with no fused operations, which is
// what amd64's assembly computes too (same steps, same order), so on amd64
// it gives math.Log's bits.
func Log(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // 3fe62e42 fee00000
		ln2Lo = 1.90821492927058770002e-10 // 3dea39ef 35793c76
		l1    = 6.666666666666735130e-01   // 3FE55555 55555593
		l2    = 3.999999999940941908e-01   // 3FD99999 9997FA04
		l3    = 2.857142874366239149e-01   // 3FD24924 94229359
		l4    = 2.222219843214978396e-01   // 3FCC71C5 1D8E78AF
		l5    = 1.818357216161805012e-01   // 3FC74664 96CB03DE
		l6    = 1.531383769920937332e-01   // 3FC39A09 D078C69F
		l7    = 1.479819860511658591e-01   // 3FC2F112 DF3E5244
	)
	switch {
	case math.IsNaN(x) || math.IsInf(x, 1):
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}
	f1, ki := math.Frexp(x)
	if f1 < math.Sqrt2/2 {
		f1 *= 2
		ki--
	}
	f := f1 - 1
	k := float64(ki)
	s := f / (2 + f)
	s2 := s * s
	s4 := s2 * s2
	t1 := float64(s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7)))))))
	t2 := float64(s4 * (l2 + float64(s4*(l4+float64(s4*l6)))))
	R := t1 + t2
	hfsq := float64(0.5 * f * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+R)) + float64(k*ln2Lo))) - f)
}
