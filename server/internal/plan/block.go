package plan

import (
	"fmt"
	"math"
	"sort"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// CheckShardStarts checks a dataset's dataset.Sharded starts for n samples.
func CheckShardStarts(starts []int, n int) error {
	if len(starts) == 0 {
		return fmt.Errorf("its shard index names no shards")
	}
	if starts[0] != 0 {
		return fmt.Errorf("its shard index starts at sample %d, not 0", starts[0])
	}
	if len(starts) > math.MaxInt32 {
		return fmt.Errorf("%d shards: the limit is %d", len(starts), math.MaxInt32)
	}
	for s := 1; s < len(starts); s++ {
		if starts[s] < starts[s-1] || starts[s] > n {
			return fmt.Errorf("its shard index is not ascending within its %d samples (shard %d starts at %d)", n, s, starts[s])
		}
	}
	return nil
}

// blockOrder is one epoch's order under the block shuffle (after
// mosaicml-streaming's py1b): the dataset's shards in a keyed permutation
// of (seed, epoch), cut into windows of window consecutive shards of that
// order, and the samples of each window in a keyed permutation of (seed,
// epoch, window number). Position x of the order is evaluated on its own
// (two binary searches and a Feistel permutation); building it costs
// O(shards) time and memory, the permuted shard order and its prefix sums,
// never O(samples).
type blockOrder struct {
	starts      []int    // the dataset's, read-only
	shard       []uint32 // the shard at position q of the permuted order
	pre         []uint64 // samples in positions before q; pre[len(shard)] = n
	window      uint64
	seed, epoch uint64
}

// The permutations' key indices: like the global permutation's
// (math.MaxUint64), no sample's index, so that no order shares keys with a
// sample's augmentation stream.
const (
	shardKeyIndex  = math.MaxUint64 - 1
	windowKeyIndex = math.MaxUint64 - 2
)

func newBlockOrder(starts []int, n, window, seed, epoch uint64) *blockOrder {
	o := &blockOrder{starts: starts, window: window, seed: seed, epoch: epoch}
	s := uint64(len(starts))
	perm := newPermutationFrom(s, det.Key{Seed: seed, Epoch: epoch, Index: shardKeyIndex}.Stream(s))
	o.shard = make([]uint32, s)
	o.pre = make([]uint64, s+1)
	for q := range s {
		sh := perm.at(q)
		end := n
		if sh+1 < s {
			end = uint64(starts[sh+1])
		}
		o.shard[q] = uint32(sh)
		o.pre[q+1] = o.pre[q] + end - uint64(starts[sh])
	}
	return o
}

// windowPerm caches the permutation of the window last used: a batch's
// samples mostly fall in one window.
type windowPerm struct {
	ok bool
	w  uint64
	p  permutation
}

// at is the dataset index at position x < n of the order.
func (o *blockOrder) at(x uint64, c *windowPerm) uint64 {
	q := o.find(x, 0, len(o.shard))
	w := uint64(q) / o.window
	qlo := int(w * o.window)
	qhi := int(min(uint64(qlo)+o.window, uint64(len(o.shard))))
	lo, hi := o.pre[qlo], o.pre[qhi]
	if !c.ok || c.w != w {
		r := det.Key{Seed: o.seed, Epoch: o.epoch, Index: windowKeyIndex}.Stream(w)
		*c = windowPerm{ok: true, w: w, p: newPermutationFrom(hi-lo, r)}
	}
	y := lo + c.p.at(x-lo)
	q = o.find(y, qlo, qhi)
	return uint64(o.starts[o.shard[q]]) + y - o.pre[q]
}

// find is the position in [lo, hi) of the shard that holds position x:
// the first q with pre[q+1] > x (a shard with no samples holds none).
func (o *blockOrder) find(x uint64, lo, hi int) int {
	return lo + sort.Search(hi-lo, func(i int) bool { return o.pre[lo+i+1] > x })
}

// spanned maps a position of the lockstep order of k spans to a position
// of the block order: the order is cut into k contiguous spans (the first
// n mod k of them one longer), and the lockstep order takes the first
// sample of every span, then the second of every span, and so on. Rank r
// of a world of k takes lockstep positions r, r+k, r+2k, …: span r, front
// to back.
func spanned(x, n, k uint64) uint64 {
	m, r := n/k, n%k
	c, off := x%k, x/k
	if x >= k*m {
		c, off = x-k*m, m
	}
	return c*m + min(c, r) + off
}
