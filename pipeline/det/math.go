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

// Erfc is the complementary error function, the same bits on every
// machine: Go's math/erf.go (FreeBSD's s_erf.c) with every product that is
// added wrapped in float64(...) and Exp for math.Exp, so it gives
// math.Erfc's bits on x86-64 CPUs with FMA (where math.Exp is Exp) with
// the default GOAMD64 (TestDetTrigMatchesMath). math.Erfc's polynomials
// fuse on arm64 and under GOAMD64=v3. GaussianNoise's quantile tables come
// from it.
func Erfc(x float64) float64 {
	const tiny = 1.0 / (1 << 56) // 2**-56
	switch {
	case math.IsNaN(x):
		return math.NaN()
	case math.IsInf(x, 1):
		return 0
	case math.IsInf(x, -1):
		return 2
	}
	sign := false
	if x < 0 {
		x = -x
		sign = true
	}
	if x < 0.84375 { // |x| < 0.84375
		var temp float64
		if x < tiny {
			temp = x
		} else {
			z := x * x
			r := horner(z, 1.28379167095512558561e-01, -3.25042107247001499370e-01,
				-2.84817495755985104766e-02, -5.77027029648944159157e-03, -2.37630166566501626084e-05)
			s := horner(z, 1, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
				5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06)
			y := r / s
			if x < 0.25 {
				temp = x + float64(x*y)
			} else {
				temp = 0.5 + (float64(x*y) + (x - 0.5))
			}
		}
		if sign {
			return 1 + temp
		}
		return 1 - temp
	}
	const erx = 8.45062911510467529297e-01
	if x < 1.25 { // 0.84375 <= |x| < 1.25
		s := x - 1
		p := horner(s, -2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
			3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
			-2.16637559486879084300e-03)
		q := horner(s, 1, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
			1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
		if sign {
			return 1 + erx + p/q
		}
		return 1 - erx - p/q
	}
	if x < 28 { // |x| < 28
		s := 1 / (x * x)
		var r, q float64
		if x < 1/0.35 { // |x| < 1/0.35 ~ 2.857143
			r = horner(s, -9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
				-6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
				-8.12874355063065934246e+01, -9.81432934416914548592e+00)
			q = horner(s, 1, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
				6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
				6.57024977031928170135e+00, -6.04244152148580987438e-02)
		} else { // |x| >= 1/0.35 ~ 2.857143
			if sign && x > 6 {
				return 2 // x < -6
			}
			r = horner(s, -9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
				-1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
				-4.83519191608651397019e+02)
			q = horner(s, 1, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
				3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
				-2.24409524465858183362e+01)
		}
		z := math.Float64frombits(math.Float64bits(x) & 0xffffffff00000000) // pseudo-single (20-bit) precision x
		e := Exp(float64(-z*z)-0.5625) * Exp(float64((z-x)*(z+x))+r/q)
		if sign {
			return 2 - e/x
		}
		return e / x
	}
	if sign {
		return 2
	}
	return 0
}
