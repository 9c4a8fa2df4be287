package det

// Floating point in this file: every product that is added or subtracted is
// wrapped in float64(...), which rounds it and so stops the compiler from
// fusing it into a multiply-add (the Go spec allows that, and arm64, ppc64,
// s390x, riscv64 and amd64 with GOAMD64=v3 do it): a Key's numbers must be
// the same bits on every machine. Exp and Log are this package's, not
// math's, for the same reason (see math.go).

import "math/bits"

// Key names one sample of one epoch of one job. Everything random about the
// sample is a pure function of its Key.
type Key struct {
	Seed  uint64
	Epoch uint64
	Index uint64
	// View is the view of a transform of several views (NewViews) the
	// draws are for: 0 for the first view, and for a one-view transform.
	View uint64
	// Copy is which copy of the sample the draws are for, under repeated
	// augmentation (each copy its own draw): 0 for the first, and without
	// it.
	Copy uint64
}

// RNG is a counter-based generator: value n of stream s is a hash of (key,
// s, n). It holds no hidden state beyond its counter, so the same Key gives
// the same numbers on any machine and in any order of evaluation.
type RNG struct {
	k   uint64
	ctr uint64
}

// Seeded returns the generator whose key is k itself, not a Key's hash:
// for a draw already keyed by a seed the trace carries (a random erase's
// noise).
func Seeded(k uint64) RNG { return RNG{k: k} }

// Stream returns the generator for sub-stream s of key k. Each op draws from
// its own stream, so adding an op never shifts the numbers another op sees.
func (k Key) Stream(s uint64) RNG {
	h := Mix64(k.Seed ^ 0x243f6a8885a308d3)
	h = Mix64(h ^ k.Epoch*0x9e3779b97f4a7c15)
	h = Mix64(h ^ k.Index*0xbf58476d1ce4e5b9)
	if k.View != 0 {
		// Keyed in only when set, so that view 0 (and every one-view
		// job) draws the numbers it always did.
		h = Mix64(h ^ k.View*0xd6e8feb86659fd93)
	}
	if k.Copy != 0 {
		h = Mix64(h ^ k.Copy*0xa0761d6478bd642f)
	}
	h = Mix64(h ^ s*0x94d049bb133111eb)
	return Seeded(h)
}

// Mix64 is SplitMix64's finalizer: a bijection with full avalanche.
func Mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Uint64 returns the next value of the stream.
func (r *RNG) Uint64() uint64 {
	r.ctr++
	return Mix64(r.k + r.ctr*0x9e3779b97f4a7c15)
}

// Float64 returns a uniform value in [0, 1).
func (r *RNG) Float64() float64 {
	return float64(float64(r.Uint64()>>11) / (1 << 53))
}

// Float32 returns a uniform float32 in [0, 1) on torch.rand's grid: a
// 24-bit integer over 2^24.
func (r *RNG) Float32() float32 {
	return float32(r.Uint64()>>40) / (1 << 24)
}

// Uniform returns a uniform value in [lo, hi).
func (r *RNG) Uniform(lo, hi float64) float64 {
	return lo + float64((hi-lo)*r.Float64())
}

// Intn returns a uniform integer in [0, n); n must be > 0.
func (r *RNG) Intn(n int) int {
	// Lemire's multiply-shift; the bias for n far below 2^64 is negligible
	// and, more to the point, identical on every machine.
	hi, _ := bits.Mul64(r.Uint64(), uint64(n))
	return int(hi)
}

// LogUniform returns exp(Uniform(log lo, log hi)).
func (r *RNG) LogUniform(lo, hi float64) float64 {
	return Exp(r.Uniform(Log(lo), Log(hi)))
}

// Perm fills p with a permutation of 0..len(p)-1 (Fisher-Yates).
func (r *RNG) Perm(p []int) {
	for i := range p {
		p[i] = i
	}
	for i := len(p) - 1; i > 0; i-- {
		j := r.Intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
}
