package det

import (
	"math"
	"math/bits"
)

// Permutation is a keyed pseudorandom bijection of [0, n): a balanced
// Feistel network of permRounds rounds on the smallest even number of bits
// that covers n, with SplitMix64's finalizer keyed per round as the round
// function, and cycle-walking (values past n are encrypted again until
// they fall inside, which keeps it a bijection of [0, n)). The domain is
// less than four times n, so a position takes fewer than four walks on
// average. It is integer arithmetic only: the same on every machine.
// (Grain's index_shuffle and format-preserving encryption use the same
// construction.) Index is its inverse, walking back with the decryption.
type Permutation struct {
	n    uint64
	half uint // bits in each half
	mask uint64
	keys [permRounds]uint64
}

const permRounds = 6

// EpochPermutation is the global shuffle's order of an epoch of a dataset
// of n samples (server/internal/plan's): keyed by (seed, epoch, n), its
// keys drawn from index MaxUint64, no sample's, so that they never
// coincide with a sample's augmentation stream; n is keyed in so that
// datasets of other sizes get unrelated orders.
func EpochPermutation(n, seed, epoch uint64) Permutation {
	return NewPermutation(n, Key{Seed: seed, Epoch: epoch, Index: math.MaxUint64}.Stream(n))
}

// NewPermutation is a permutation of [0, n), n > 0, keyed by r's next
// values.
func NewPermutation(n uint64, r RNG) Permutation {
	half := uint(1)
	if b := uint(bits.Len64(n - 1)); b > 2 {
		half = (b + 1) / 2
	}
	p := Permutation{n: n, half: half, mask: 1<<half - 1}
	for i := range p.keys {
		p.keys[i] = r.Uint64()
	}
	return p
}

// Len is n.
func (p Permutation) Len() uint64 { return p.n }

// At is position i's image, i < n.
func (p Permutation) At(i uint64) uint64 {
	x := i
	for {
		x = p.encrypt(x)
		if x < p.n {
			return x
		}
	}
}

// Index is At's inverse: the position whose image is x, x < n.
func (p Permutation) Index(x uint64) uint64 {
	for {
		x = p.decrypt(x)
		if x < p.n {
			return x
		}
	}
}

func (p Permutation) encrypt(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for _, k := range p.keys {
		l, r = r, l^(Mix64(r^k)&p.mask)
	}
	return l<<p.half | r
}

func (p Permutation) decrypt(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for i := len(p.keys) - 1; i >= 0; i-- {
		l, r = r^(Mix64(l^p.keys[i])&p.mask), l
	}
	return l<<p.half | r
}
