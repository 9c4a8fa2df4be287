package det

import "math"

// Sine, cosine and tangent that give the same bits on every machine, for
// the affine ops' matrix (a rotation's or shear's coefficients decide which
// source pixels a nearest resampling picks, so they must not depend on the
// CPU). math.Sin, Cos and Tan are pure Go on amd64 and arm64 (Cephes, as
// below) but their polynomials are products that are added, which the
// compiler fuses into multiply-adds on arm64, ppc64, s390x, riscv64 and
// amd64 with GOAMD64=v3, and s390x has assembly of its own. These are Go's
// math/sin.go and math/tan.go with every such product wrapped in
// float64(...), so they give math's bits wherever math does not fuse (amd64
// with the default GOAMD64=v1: TestDetTrigMatchesMath). Arguments must be
// below TrigMax in magnitude (Go's Payne-Hanek reduction for larger ones
// is left out; the callers reduce degrees first).

// TrigMax bounds the arguments of Sin, Cos and Tan: Go's
// Cody-Waite reduction (reduceThreshold in math/trig_reduce.go) is exact
// below it.
const TrigMax = 1 << 29

// The coefficients, from math/sin.go and math/tan.go (Cephes).
var (
	sinC = [...]float64{
		1.58962301576546568060e-10, // 0x3de5d8fd1fd19ccd
		-2.50507477628578072866e-8, // 0xbe5ae5e5a9291f5d
		2.75573136213857245213e-6,  // 0x3ec71de3567d48a1
		-1.98412698295895385996e-4, // 0xbf2a01a019bfdf03
		8.33333333332211858878e-3,  // 0x3f8111111110f7d0
		-1.66666666666666307295e-1, // 0xbfc5555555555548
	}
	cosC = [...]float64{
		-1.13585365213876817300e-11, // 0xbda8fa49a0861a9b
		2.08757008419747316778e-9,   // 0x3e21ee9d7b4e3f05
		-2.75573141792967388112e-7,  // 0xbe927e4f7eac4bc6
		2.48015872888517045348e-5,   // 0x3efa01a019c844f5
		-1.38888888888730564116e-3,  // 0xbf56c16c16c14f91
		4.16666666666665929218e-2,   // 0x3fa555555555554b
	}
	tanP = [...]float64{
		-1.30936939181383777646e4, // 0xc0c992d8d24f3f38
		1.15351664838587416140e6,  // 0x413199eca5fc9ddd
		-1.79565251976484877988e7, // 0xc1711fead3299176
	}
	tanQ = [...]float64{
		1.00000000000000000000e0,
		1.36812963470692954678e4,  // 0x40cab8a5eeb36572
		-1.32089234440210967447e6, // 0xc13427bc582abc96
		2.50083801823357915839e7,  // 0x4177d98fc2ead8ef
		-5.38695755929454629881e7, // 0xc189afe03cbe5a31
	}
)

// octant reduces x >= 0 to z in [-Pi/4, Pi/4] and its octant j (0..7,
// even), as math's Cody-Waite reduction.
func octant(x float64) (j uint64, z float64) {
	const (
		pi4A = 7.85398125648498535156e-1  // 0x3fe921fb40000000, Pi/4 split into three parts
		pi4B = 3.77489470793079817668e-8  // 0x3e64442d00000000,
		pi4C = 2.69515142907905952645e-15 // 0x3ce8469898cc5170,
	)
	j = uint64(x * (4 / math.Pi))
	y := float64(j)
	if j&1 == 1 { // map zeros to origin
		j++
		y++
	}
	return j, ((x - float64(y*pi4A)) - float64(y*pi4B)) - float64(y*pi4C)
}

// sinPoly is sin(z) for |z| <= Pi/4; cosPoly is cos(z).
func sinPoly(z float64) float64 {
	c := &sinC
	zz := float64(z * z)
	p := float64(c[0] * zz)
	for _, k := range c[1:5] {
		p = float64((p + k) * zz)
	}
	return z + float64(float64(z*zz)*(p+c[5]))
}

func cosPoly(z float64) float64 {
	c := &cosC
	zz := float64(z * z)
	p := float64(c[0] * zz)
	for _, k := range c[1:5] {
		p = float64((p + k) * zz)
	}
	return 1.0 - float64(0.5*zz) + float64(float64(zz*zz)*(p+c[5]))
}

// Sin is math.Sin with no fused operations.
func Sin(x float64) float64 {
	switch {
	case x == 0 || math.IsNaN(x):
		return x
	case math.IsInf(x, 0) || math.Abs(x) >= TrigMax:
		return math.NaN()
	}
	sign := false
	if x < 0 {
		x, sign = -x, true
	}
	j, z := octant(x)
	j &= 7
	if j > 3 { // reflect in x axis
		sign = !sign
		j -= 4
	}
	var y float64
	if j == 1 || j == 2 {
		y = cosPoly(z)
	} else {
		y = sinPoly(z)
	}
	if sign {
		y = -y
	}
	return y
}

// Cos is math.Cos with no fused operations.
func Cos(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) >= TrigMax {
		return math.NaN()
	}
	x = math.Abs(x)
	j, z := octant(x)
	j &= 7
	sign := false
	if j > 3 {
		j -= 4
		sign = !sign
	}
	if j > 1 {
		sign = !sign
	}
	var y float64
	if j == 1 || j == 2 {
		y = sinPoly(z)
	} else {
		y = cosPoly(z)
	}
	if sign {
		y = -y
	}
	return y
}

// Tan is math.Tan with no fused operations.
func Tan(x float64) float64 {
	switch {
	case x == 0 || math.IsNaN(x):
		return x
	case math.IsInf(x, 0) || math.Abs(x) >= TrigMax:
		return math.NaN()
	}
	sign := false
	if x < 0 {
		x, sign = -x, true
	}
	j, z := octant(x)
	zz := float64(z * z)
	y := z
	if zz > 1e-14 {
		p, q := &tanP, &tanQ
		num := float64(zz * (float64((float64(float64(p[0]*zz)+p[1]))*zz) + p[2]))
		den := float64((float64((float64((zz+q[1])*zz)+q[2])*zz)+q[3])*zz) + q[4]
		y = z + float64(z*(num/den))
	}
	if j&2 == 2 {
		y = -1 / y
	}
	if sign {
		y = -y
	}
	return y
}

// Atan is the arctangent, the same bits on every machine: Go's
// math/atan.go (Cephes) with every product that is added wrapped in
// float64(...), so it gives math.Atan's bits wherever math does not fuse
// (amd64 with GOAMD64 v1 or v2: TestDetTrigMatchesMath); math.Atan's
// polynomials fuse on arm64 and under GOAMD64=v3, and s390x has assembly.
// The affine ops' shear angles of the policies come from it.
func Atan(x float64) float64 {
	switch {
	case x == 0:
		return x
	case x > 0:
		return detSatan(x)
	}
	return -detSatan(-x)
}

// detSatan is math's satan: x > 0 reduced to [0, 0.66] for detXatan.
func detSatan(x float64) float64 {
	const (
		morebits = 6.123233995736765886130e-17 // pi/2 = Pi/2 + morebits
		tan3pio8 = 2.41421356237309504880      // tan(3*pi/8)
	)
	if x <= 0.66 {
		return detXatan(x)
	}
	if x > tan3pio8 {
		return math.Pi/2 - detXatan(1/x) + morebits
	}
	return math.Pi/4 + detXatan((x-1)/(x+1)) + 0.5*morebits
}

// detXatan is math's xatan, the series on [0, 0.66]: its
// ((((P0 z + P1) z + P2) z + P3) z + P4) is horner's with the
// coefficients the other way round, the same operations in the same order
// (a product and a sum of two doubles do not depend on their operands'
// order).
func detXatan(x float64) float64 {
	const (
		p0 = -8.750608600031904122785e-01
		p1 = -1.615753718733365076637e+01
		p2 = -7.500855792314704667340e+01
		p3 = -1.228866684490136173410e+02
		p4 = -6.485021904942025371773e+01
		q0 = +2.485846490142306297962e+01
		q1 = +1.650270098316988542046e+02
		q2 = +4.328810604912902668951e+02
		q3 = +4.853903996359136964868e+02
		q4 = +1.945506571482613964425e+02
	)
	z := x * x
	z = z * horner(z, p4, p3, p2, p1, p0) / horner(z, q4, q3, q2, q1, q0, 1)
	return float64(x*z) + x
}

// horner is c[0] + x (c[1] + x (c[2] + ...)), every product rounded
// before it is added (float64(...): never fused into a multiply-add).
func horner(x float64, c ...float64) float64 {
	acc := c[len(c)-1]
	for i := len(c) - 2; i >= 0; i-- {
		acc = c[i] + float64(x*acc)
	}
	return acc
}
