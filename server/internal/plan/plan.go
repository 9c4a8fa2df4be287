package plan

import (
	"math"
	"math/bits"
	"sort"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// Plan is one rank's share of one epoch, cut into batches. It is a pure
// function of its inputs: every machine that computes the plan of the same
// Spec gets the same batches.
//
// The epoch's order is a permutation of 0..n-1 keyed by (seed, epoch, n)
// when shuffling (the global shuffle), the identity otherwise. Rank r
// takes positions r, r+w, r+2w, … of that order, wrapping around to its
// start so that every rank gets ceil(n/w) samples (torch's
// DistributedSampler with drop_last=False): ranks never wait on each
// other, and when w divides n every index goes to exactly one rank once.
//
// A Plan holds no per-sample state: the permutation is a keyed bijection
// evaluated one position at a time (a Feistel network, see permutation), so
// a plan of a 100-million-sample dataset costs a few words, not 800 MB,
// and every stream computes its own for free.
//
// Elastic resume: when a job of world size w consumed its first c batches of
// b samples on every rank (as in DDP, where ranks step together), it
// consumed exactly the first c*b*w positions of the epoch's order. A job
// restarted with another world size w' gives that count as Consumed: its
// ranks then split the remaining positions the same way (rank r' takes
// every w'-th of them, wrapping around within them), so every sample is
// consumed at least once in the epoch and the only repeats are the wrapped
// padding.
//
// The block shuffle (Window > 0, for sharded datasets) orders the epoch as
// blockOrder says: shards permuted, then samples permuted within each
// window of Window shards. Split by stride, every rank would read from
// every shard of the current window at once (each rank's makers fetching
// the window's shards to use 1/w of them); instead each rank takes a
// contiguous span of the order and reads its own few shards. That split
// is the strided one applied to a lockstep order of Spans spans (see
// spanned): the block order is cut into Spans contiguous spans, and the
// lockstep order takes the first sample of each span, then the second of
// each, and so on. With Spans = w, rank r takes span r front to back
// (ceil(n/w) samples: a shorter span is padded by wrapping around to the
// lockstep order's start, the first samples of the first spans), and the
// first c batches of every rank are again the first c*b*w positions of
// the (lockstep) order, so Consumed means the same as long as Spans stays
// the world size the epoch began with through its elastic resumes
// (OpenJob.epoch_world_size); a fresh epoch takes Spans = w. The counts of
// batches and samples do not depend on Spans.
type Plan struct {
	perm      permutation
	shuffle   bool
	block     *blockOrder // the block shuffle's order; nil for the others
	mix       *mixOrder   // a mix's draws from its datasets (global shuffle); nil for one dataset
	mixBlocks *mixBlocks  // a mix's drawn shards (block shuffle); nil otherwise
	n         uint64      // positions of the epoch's order
	repeats   uint64      // repeated augmentation's copies of a sample (1: off)
	spans     uint64      // block shuffle: spans of the lockstep order
	start     uint64      // positions consumed before the plan (Consumed, at most n)
	rest      uint64      // positions left: n - start
	rank      uint64
	world     uint64
	samples   int // this rank's, after drop_last
	batchSize int
	batches   int
}

// Spec is what a Plan is computed from.
type Spec struct {
	Size      int // samples in the dataset, > 0
	Seed      uint64
	Epoch     uint64
	Shuffle   bool
	Rank      int // 0..World-1
	World     int // >= 1
	BatchSize int // >= 1
	DropLast  bool
	// Consumed is how many positions of the epoch's order were consumed
	// before the plan starts (elastic resume); 0 normally. At or past Size
	// the plan is empty.
	Consumed uint64
	// Window > 0 selects the block shuffle (with Shuffle): shards per
	// window, of the shards Shards starts (dataset.Sharded's ShardStarts,
	// valid for Size: CheckShardStarts).
	Window int
	Shards []int
	// Spans cuts the block shuffle's order for the ranks: the world size
	// the epoch began with (elastic resume); 0 means World.
	Spans int
	// Repeats > 1 is repeated augmentation (RASampler's): the epoch's
	// order is every sample Repeats times in a row (copies 0..Repeats-1 of
	// the shuffled order's sample at position q are at Repeats*q ...),
	// cut to RASampler's length, floor(Size//256*256 / W) positions a rank
	// for the world W the epoch began with (EpochWorld), so that the
	// copies of a sample go to consecutive ranks. Not with the block
	// shuffle.
	Repeats int
	// EpochWorld is the world size the epoch began with (elastic resume;
	// 0 means World): a repeated-augmentation epoch's length is its.
	EpochWorld int
	// Mix, when set, plans a mix of datasets (dataset.Mixed; with
	// Shuffle, not with Repeats). Under the global shuffle Size is the
	// epoch's positions, the parts' quotas added up: the epoch's order is
	// the global shuffle's permutation of Size draws, part p's Quota of
	// them in a block; part p's j-th draw is its sample at position j mod
	// its size of its own permutation for round j / its size (a fresh one
	// each time a part is drawn past its size within an epoch, and each
	// epoch). Under the block shuffle (Window > 0; Size 0, Shards unused)
	// the draws are shards, drawn the same way, part p's Quota of them;
	// the drawn shards, back to back, are the block shuffle's shards, and
	// the epoch's positions their samples (mixBlocks).
	Mix []MixShare
}

// MixShare is one dataset of a mix, as a plan sees it: its samples are
// [Start, Start+Size) of the mix's indices, and an epoch draws Quota of
// them.
type MixShare struct {
	Start, Size int
	Quota       uint64
	// Shards are the dataset's shard starts (dataset.Sharded), for the
	// block shuffle: its Quota then counts shards, not samples.
	Shards []int
}

// New computes the plan of s. It panics on a spec that breaks the
// bounds stated on Spec: the server validates requests first.
func New(s Spec) Plan {
	mixBlock := len(s.Mix) > 0 && s.Window > 0
	if (s.Size <= 0) != mixBlock || s.World < 1 || s.Rank < 0 || s.Rank >= s.World || s.BatchSize < 1 {
		panic("plan: invalid Spec")
	}
	n := uint64(s.Size)
	p := Plan{shuffle: s.Shuffle, n: n, repeats: 1, rank: uint64(s.Rank), world: uint64(s.World), batchSize: s.BatchSize}
	if s.Repeats > 1 {
		if s.Window > 0 || s.EpochWorld < 0 {
			panic("plan: invalid Spec")
		}
		p.repeats = uint64(s.Repeats)
		p.n = RepeatedLength(s.Size, max(s.EpochWorld, 0), s.World)
	}
	if len(s.Mix) > 0 {
		if !s.Shuffle || s.Repeats > 1 || s.Spans < 0 {
			panic("plan: invalid Spec")
		}
		if !mixBlock {
			p.mix = newMixOrder(s.Mix, s.Seed, s.Epoch, n)
		}
	}
	switch {
	case mixBlock:
		p.mixBlocks = newMixBlocks(s.Mix, s.Seed, s.Epoch)
		p.n = p.mixBlocks.n
		if p.n > 0 {
			p.block = newBlockOrder(p.mixBlocks.vstarts, p.n, uint64(s.Window), s.Seed, s.Epoch)
		}
		p.spans = uint64(s.Spans)
		if p.spans == 0 {
			p.spans = p.world
		}
	case s.Shuffle && s.Window > 0:
		if CheckShardStarts(s.Shards, s.Size) != nil || s.Spans < 0 {
			panic("plan: invalid Spec")
		}
		p.block = newBlockOrder(s.Shards, n, uint64(s.Window), s.Seed, s.Epoch)
		p.spans = uint64(s.Spans)
		if p.spans == 0 {
			p.spans = p.world
		}
	case s.Shuffle:
		p.perm = newPermutation(n, s.Seed, s.Epoch)
	}
	p.start = min(s.Consumed, p.n)
	p.rest = p.n - p.start
	if p.rest == 0 {
		return p
	}
	m := int((p.rest + p.world - 1) / p.world)
	p.batches = m / s.BatchSize
	if m%s.BatchSize != 0 {
		if s.DropLast {
			m = p.batches * s.BatchSize
		} else {
			p.batches++
		}
	}
	p.samples = m
	return p
}

// Batches is how many batches the rank gets.
func (p Plan) Batches() int { return p.batches }

// Samples is how many samples the rank gets (after drop_last).
func (p Plan) Samples() int { return p.samples }

// RepeatedLength is a repeated-augmentation epoch's positions over a
// dataset of size samples: RASampler's floor(size//256*256 / w) a rank for
// the world w it began with (epochWorld; 0: world), times w.
func RepeatedLength(size, epochWorld, world int) uint64 {
	w := uint64(world)
	if epochWorld > 0 {
		w = uint64(epochWorld)
	}
	return uint64(size) / 256 * 256 / w * w
}

// Copies returns, under repeated augmentation, which copy of its sample
// each of batch k's indices is; nil without it.
func (p Plan) Copies(k int) []uint32 {
	if p.repeats <= 1 {
		return nil
	}
	lo := k * p.batchSize
	hi := min(lo+p.batchSize, p.samples)
	out := make([]uint32, 0, max(hi-lo, 0))
	for j := lo; j < hi; j++ {
		out = append(out, uint32(p.pos(uint64(j))%p.repeats))
	}
	return out
}

// Batch returns the dataset indices of batch k, 0 <= k < Batches(), in a
// new slice.
func (p Plan) Batch(k int) []int64 { return p.AppendBatch(nil, k) }

// AppendBatch appends the dataset indices of batch k to dst.
func (p Plan) AppendBatch(dst []int64, k int) []int64 {
	lo := k * p.batchSize
	hi := min(lo+p.batchSize, p.samples)
	var c windowPerm
	for j := lo; j < hi; j++ {
		dst = append(dst, int64(p.at(uint64(j), &c)))
	}
	return dst
}

// pos is the position in the epoch's order of the rank's j-th sample.
func (p Plan) pos(j uint64) uint64 {
	// (rank + j*world) mod rest, without overflow for any size.
	hi, lo := bits.Mul64(j%p.rest, p.world%p.rest)
	off := (p.rank%p.rest + bits.Rem64(hi, lo, p.rest)) % p.rest
	return p.start + off
}

// at is the dataset index of the rank's j-th sample; c caches the block
// shuffle's window.
func (p Plan) at(j uint64, c *windowPerm) uint64 {
	pos := p.pos(j)
	if p.repeats > 1 {
		pos /= p.repeats // a sample's copies are consecutive positions
	}
	switch {
	case p.mixBlocks != nil:
		return p.mixBlocks.global(p.block.at(spanned(pos, p.n, p.spans), c))
	case p.block != nil:
		return p.block.at(spanned(pos, p.n, p.spans), c)
	case p.mix != nil:
		return p.mix.at(p.perm.at(pos))
	case p.shuffle:
		return p.perm.at(pos)
	}
	return pos
}

// mixOrder maps a mix's draws to its samples: draw v is part p's
// (v - ends[p-1])-th, where ends are the quotas' running sums.
type mixOrder struct {
	ends, starts, sizes []uint64
	seed, epoch         uint64
}

func newMixOrder(mix []MixShare, seed, epoch, n uint64) *mixOrder {
	m := &mixOrder{seed: seed, epoch: epoch}
	var end uint64
	for _, s := range mix {
		if s.Size <= 0 || s.Start < 0 {
			panic("plan: invalid Spec")
		}
		end += s.Quota
		m.ends = append(m.ends, end)
		m.starts = append(m.starts, uint64(s.Start))
		m.sizes = append(m.sizes, uint64(s.Size))
	}
	if end != n {
		panic("plan: invalid Spec")
	}
	return m
}

// at is draw v's index in the mix. Part p's permutation for its cycle c
// is keyed by (seed, epoch, an index no sample has, c): the same on every
// machine, and unrelated to the epoch's order and to the other parts'.
func (m *mixOrder) at(v uint64) uint64 {
	p := sort.Search(len(m.ends), func(k int) bool { return m.ends[k] > v })
	j := v
	if p > 0 {
		j -= m.ends[p-1]
	}
	c, r := j/m.sizes[p], j%m.sizes[p]
	return m.starts[p] + newPermutationFrom(m.sizes[p], mixKey(m.seed, m.epoch, p).Stream(c)).at(r)
}

// mixKey keys part p's rounds: an index no sample has, nor the global and
// block orders' keys (math.MaxUint64 down to math.MaxUint64-2).
func mixKey(seed, epoch uint64, p int) det.Key {
	return det.Key{Seed: seed, Epoch: epoch, Index: math.MaxUint64 - 16 - uint64(p)}
}

// mixBlocks is a mix's epoch under the block shuffle: part p's Quota
// shard draws (its j-th draw its shard at j mod its shards of its own
// permutation for round j / its shards, as mixOrder draws samples), part
// after part, laid back to back as the shards of a virtual dataset of n
// samples, which the block shuffle then orders as it orders one
// dataset's shards (windows of shards from every part: shard-level
// mixing). Building it costs O(draws) time and memory, never O(samples).
type mixBlocks struct {
	vstarts []int    // drawn shard k's first position in the virtual dataset
	gstarts []uint64 // its first index in the mix
	n       uint64
}

func newMixBlocks(mix []MixShare, seed, epoch uint64) *mixBlocks {
	m := &mixBlocks{}
	var v uint64
	for p, s := range mix {
		shards := uint64(len(s.Shards))
		if shards == 0 || s.Shards[0] != 0 {
			panic("plan: invalid Spec")
		}
		var perm permutation
		round := ^uint64(0)
		for j := range s.Quota {
			if c := j / shards; c != round {
				perm, round = newPermutationFrom(shards, mixKey(seed, epoch, p).Stream(c)), c
			}
			sh := perm.at(j % shards)
			lo, hi := s.Shards[sh], s.Size
			if sh+1 < shards {
				hi = s.Shards[sh+1]
			}
			m.vstarts = append(m.vstarts, int(v))
			m.gstarts = append(m.gstarts, uint64(s.Start+lo))
			v += uint64(hi - lo)
		}
	}
	m.n = v
	return m
}

// global is the mix's index of position x of the virtual dataset.
func (m *mixBlocks) global(x uint64) uint64 {
	k := sort.Search(len(m.vstarts), func(i int) bool { return uint64(m.vstarts[i]) > x }) - 1
	return m.gstarts[k] + x - uint64(m.vstarts[k])
}

// Positions is how many positions the epoch's order has.
func (p Plan) Positions() uint64 { return p.n }

// permutation is a keyed pseudorandom bijection of [0, n)
// (det.Permutation: a Feistel network with cycle-walking, integer
// arithmetic only, the same on every machine). A multi-image op's partner draw
// reads the same order (pipeline/partners.go), so it lives in pipeline.
type permutation struct{ det.Permutation }

// newPermutation is the global shuffle's order of epoch of n samples.
func newPermutation(n, seed, epoch uint64) permutation {
	return permutation{det.EpochPermutation(n, seed, epoch)}
}

// newPermutationFrom is a permutation of [0, n), n > 0, keyed by r's next
// values.
func newPermutationFrom(n uint64, r det.RNG) permutation {
	return permutation{det.NewPermutation(n, r)}
}

// at is the position i's image, i < n.
func (p permutation) at(i uint64) uint64 { return p.At(i) }
