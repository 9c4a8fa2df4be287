package plan

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// Packing is one epoch cut into batches by vision tokens for every rank
// of a world (batch_tokens): each rank's batch at step k holds at most
// Budget tokens (a sample is never split), every sample of the epoch is in
// exactly one batch of one rank, every rank has the same number of steps,
// and the batches of a step hold nearly the same tokens. It is a pure
// function of its PackSpec: every machine, and a resumed job, computes the
// same batches, so step k of rank r is known without the steps before it.
//
// The algorithm (docs/ARCHITECTURE.md, "Batches cut by vision tokens"):
//
//  1. The epoch's order: the global shuffle's permutation of (seed,
//     epoch, size), the identity without Shuffle.
//  2. Windows of Window consecutive samples of the order, each packed by
//     first fit decreasing: its samples by tokens, largest first (ties by
//     their place in the order), each into the first batch with room (a
//     segment tree of the batches' room: O(log) a sample). A batch's
//     samples keep their order.
//  3. The count of batches made a multiple of the world: while it is not,
//     the batch of the most samples is split in two by tokens (largest
//     first, each to the lighter half); where no batch has two samples,
//     the two lightest are merged while they fit.
//  4. The batches sorted by tokens, heaviest first, and cut into steps of
//     World consecutive ones, so that a step's batches are of nearly the
//     same tokens; the last steps, where the batches more than t_max from
//     full sort, dealt again largest first to the lightest batch (LPT).
//  5. Within a step the ranks take its batches in a keyed permutation (no
//     rank always the heaviest); the steps are put in a keyed permutation
//     (with Shuffle) or by their first sample in the order (without).
//
// The bound: first fit leaves every batch of a window but its last with
// fewer than t_max free tokens (the sample that opened the next batch did
// not fit), t_max the largest sample, and, samples coming largest first,
// every batch before the one the window's smallest sample went to with
// fewer than t_min free; LPT leaves a tail step's batches within t_max of
// each other (each batch's last sample went to the then lightest). So a
// step's batches differ by at most t_max tokens: max/mean <= 1 +
// t_max/mean (unless the tail's deal would overfill a batch, when the
// tail is left as first fit made it).
//
// A sample whose tokens cannot be known or are over the budget fails
// alone: it is planned as a member of no tokens (the window's failures
// dealt round its batches) and Err says why.
type Packing struct {
	world   int
	steps   int
	start   []int // batch b's samples are members[start[b]:start[b+1]]; b = step*world + rank
	members []int64
	tokens  []int64 // per batch
	errs    map[int64]error
}

// PackSpec is what a Packing is computed from.
type PackSpec struct {
	// Size is the dataset's samples, >= 0.
	Size int
	// Tokens is sample i's vision tokens, from the manifest's image sizes
	// and the job's geometry (for Qwen2-VL, h'*w'/(patch*merge)^2 after
	// smart_resize). An error, or a count over Budget or below 0, makes
	// the sample fail alone. It is called once a sample.
	Tokens func(i int) (int64, error)
	// Budget is batch_tokens: the most tokens a rank's batch holds, > 0.
	Budget      int64
	Seed, Epoch uint64
	Shuffle     bool
	// World is the ranks, >= 1.
	World int
	// Window is the samples of the order packed together (0:
	// DefaultPackWindow).
	Window int
	// Resumed are the elastic resumes of the epoch before this plan, in
	// order: the epoch began with Resumed[0].World ranks, which consumed
	// their first Resumed[0].Steps steps; the samples left were packed
	// for Resumed[1].World ranks, and so on. The plan packs what is left
	// after them for World ranks (in the order's order), so every sample
	// is still in one batch once.
	Resumed []PackResume
}

// PackResume is one elastic resume: a world of World ranks consumed the
// first Steps steps of its packing.
type PackResume struct{ World, Steps int }

// DefaultPackWindow is the samples first fit packs together when
// PackSpec.Window is 0: large enough that a window's last, part-full batch
// is a small share of its batches, small enough that its sort stays in
// cache and a batch's samples are near each other in the order.
const DefaultPackWindow = 1 << 16

// The packing's key indices (see block.go): no sample's, nor another
// order's.
const (
	packStepKeyIndex = math.MaxUint64 - 3
	packRankKeyIndex = math.MaxUint64 - 4
)

// ErrPackTooFew is returned (wrapped) when an epoch's samples left cannot
// give every rank a batch.
var ErrPackTooFew = errors.New("too few samples for the ranks")

// Pack computes the packing of s, or says why the spec cannot be packed.
func Pack(s PackSpec) (*Packing, error) {
	if s.Size < 0 || s.Budget <= 0 || s.World < 1 || s.Window < 0 || s.Tokens == nil {
		return nil, fmt.Errorf("plan: invalid PackSpec (size %d, budget %d, world %d, window %d)", s.Size, s.Budget, s.World, s.Window)
	}
	window := s.Window
	if window == 0 {
		window = DefaultPackWindow
	}
	tokens := make([]int64, s.Size)
	errs := map[int64]error{}
	for i := range tokens {
		t, err := s.Tokens(i)
		switch {
		case err != nil:
		case t < 0:
			err = fmt.Errorf("sample %d: %d vision tokens", i, t)
		case t > s.Budget:
			err = fmt.Errorf("sample %d has %d vision tokens, over the batch's budget of %d (batch_tokens; a sample is never split)", i, t, s.Budget)
		}
		if err != nil {
			errs[int64(i)], t = err, -1
		}
		tokens[i] = t
	}
	order := make([]int64, s.Size)
	if s.Shuffle && s.Size > 0 {
		perm := det.EpochPermutation(uint64(s.Size), s.Seed, s.Epoch)
		for i := range order {
			order[i] = int64(perm.At(uint64(i)))
		}
	} else {
		for i := range order {
			order[i] = int64(i)
		}
	}
	pk := packer{tokens: tokens, budget: s.Budget, window: window, seed: s.Seed, epoch: s.Epoch, shuffle: s.Shuffle}
	for depth, r := range s.Resumed {
		if r.World < 1 || r.Steps < 0 {
			return nil, fmt.Errorf("plan: invalid PackResume %d (world %d, steps %d)", depth, r.World, r.Steps)
		}
		p, err := pk.pack(order, r.World, uint64(depth))
		if err != nil {
			return nil, fmt.Errorf("resume %d: %w", depth, err)
		}
		used := map[int64]bool{}
		for _, i := range p.members[:p.start[min(r.Steps, p.steps)*p.world]] {
			used[i] = true
		}
		order = slices.DeleteFunc(order, func(i int64) bool { return used[i] })
	}
	p, err := pk.pack(order, s.World, uint64(len(s.Resumed)))
	if err != nil {
		return nil, err
	}
	p.errs = map[int64]error{}
	for _, i := range p.members {
		if e := errs[i]; e != nil {
			p.errs[i] = e
		}
	}
	return p, nil
}

// Steps is how many batches every rank gets (len(loader)).
func (p *Packing) Steps() int { return p.steps }

// World is the ranks the packing is for.
func (p *Packing) World() int { return p.world }

// Samples is how many samples the packing holds, over every rank.
func (p *Packing) Samples() int { return len(p.members) }

// Batch returns the dataset indices of rank's batch at step, in a new
// slice.
func (p *Packing) Batch(rank, step int) []int64 {
	b := p.bin(rank, step)
	return slices.Clone(p.members[p.start[b]:p.start[b+1]])
}

// Tokens is the vision tokens of rank's batch at step (its failing
// samples count none).
func (p *Packing) Tokens(rank, step int) int64 { return p.tokens[p.bin(rank, step)] }

// Err says why sample i fails alone (its tokens unknown or over the
// budget); nil for a sample that does not.
func (p *Packing) Err(i int64) error { return p.errs[i] }

// RankPacking is one rank's share of a Packing, as a coordinator reads
// a Plan: batch k is the rank's batch at step k.
type RankPacking struct {
	p    *Packing
	rank int
}

// Rank is rank's share of p, 0 <= rank < World().
func (p *Packing) Rank(rank int) RankPacking {
	if rank < 0 || rank >= p.world {
		panic(fmt.Sprintf("plan: rank %d of a packing of %d ranks", rank, p.world))
	}
	return RankPacking{p: p, rank: rank}
}

// Batches is how many batches the rank gets: every rank's, Steps.
func (r RankPacking) Batches() int { return r.p.steps }

// Samples is how many samples the rank's batches hold.
func (r RankPacking) Samples() int {
	n := 0
	for s := range r.p.steps {
		b := r.p.bin(r.rank, s)
		n += r.p.start[b+1] - r.p.start[b]
	}
	return n
}

// Batch is the dataset indices of the rank's batch k, in a new slice.
func (r RankPacking) Batch(k int) []int64 { return r.p.Batch(r.rank, k) }

func (p *Packing) bin(rank, step int) int {
	if rank < 0 || rank >= p.world || step < 0 || step >= p.steps {
		panic(fmt.Sprintf("plan: batch (rank %d, step %d) of a packing of %d ranks and %d steps", rank, step, p.world, p.steps))
	}
	return step*p.world + rank
}

// packer packs one order for one world.
type packer struct {
	tokens      []int64 // by dataset index; -1: fails alone
	budget      int64
	window      int
	seed, epoch uint64
	shuffle     bool
}

// bin is a batch being made: its samples' places in the order, in the
// order's order (the first one, unique to the batch, its sort key), and
// their tokens.
type bin struct {
	places []int
	tokens int64
}

func (k *packer) pack(order []int64, world int, depth uint64) (*Packing, error) {
	if len(order) > 0 && len(order) < world {
		return nil, fmt.Errorf("%w: %d samples left in the epoch cannot give %d ranks a batch each", ErrPackTooFew, len(order), world)
	}
	tok := func(q int) int64 { return max(k.tokens[order[q]], 0) }
	var bins []bin
	var ff firstFit
	for lo := 0; lo < len(order); lo += k.window {
		bins = k.packWindow(bins, order, lo, min(lo+k.window, len(order)), &ff)
	}
	if err := splitTo(&bins, world, k.budget, tok); err != nil {
		return nil, err
	}
	// Steps of World batches of nearly the same tokens.
	slices.SortFunc(bins, func(a, b bin) int {
		return cmp.Or(cmp.Compare(b.tokens, a.tokens), cmp.Compare(a.places[0], b.places[0]))
	})
	steps := len(bins) / world
	rebalanceTail(bins, world, k.budget, tok)
	stepOrder := make([]int, steps)
	for i := range stepOrder {
		stepOrder[i] = i
	}
	if k.shuffle && steps > 0 {
		perm := det.NewPermutation(uint64(steps), det.Key{Seed: k.seed, Epoch: k.epoch, Index: packStepKeyIndex}.Stream(depth))
		for i := range stepOrder {
			stepOrder[i] = int(perm.At(uint64(i)))
		}
	} else {
		first := make([]int, steps)
		for s := range first {
			first[s] = slices.MinFunc(bins[s*world:(s+1)*world], func(a, b bin) int { return cmp.Compare(a.places[0], b.places[0]) }).places[0]
		}
		slices.SortFunc(stepOrder, func(a, b int) int { return cmp.Compare(first[a], first[b]) })
	}
	p := &Packing{world: world, steps: steps, start: make([]int, 1, len(bins)+1), members: make([]int64, 0, len(order)), tokens: make([]int64, 0, len(bins))}
	rk := det.Key{Seed: k.seed, Epoch: k.epoch, Index: packRankKeyIndex, View: depth}
	for _, s := range stepOrder {
		ranks := det.NewPermutation(uint64(world), rk.Stream(uint64(s)))
		for r := range world {
			b := bins[s*world+int(ranks.At(uint64(r)))]
			for _, q := range b.places {
				p.members = append(p.members, order[q])
			}
			p.start = append(p.start, len(p.members))
			p.tokens = append(p.tokens, b.tokens)
		}
	}
	return p, nil
}

// packWindow packs the places [lo, hi) of the order by first fit
// decreasing and appends their batches to bins.
func (k *packer) packWindow(bins []bin, order []int64, lo, hi int, ff *firstFit) []bin {
	var ok, failing []int // places in the order
	for q := lo; q < hi; q++ {
		if k.tokens[order[q]] < 0 {
			failing = append(failing, q)
		} else {
			ok = append(ok, q)
		}
	}
	k.sortDecreasing(ok, order, lo)
	binOf := make([]int32, hi-lo)
	ff.reset(len(ok), k.budget)
	used := 0
	for _, q := range ok {
		b := ff.place(k.tokens[order[q]])
		binOf[q-lo] = int32(b)
		used = max(used, b+1)
	}
	if used == 0 && len(failing) > 0 {
		used = 1
	}
	for j, q := range failing { // dealt round the window's batches
		binOf[q-lo] = int32(j % used)
	}
	base := len(bins)
	for range used {
		bins = append(bins, bin{})
	}
	for q := lo; q < hi; q++ { // the order's order within a batch
		b := &bins[base+int(binOf[q-lo])]
		b.places = append(b.places, q)
		b.tokens += max(k.tokens[order[q]], 0)
	}
	return bins
}

// rebalanceTail deals the samples of the last steps of bins (sorted by
// tokens, heaviest first) again: the batches more than the largest
// sample from full (a window's last, the splits' halves and merges) and
// one step more, their samples largest first each to the lightest batch
// (LPT), so that a tail step's batches differ by at most the largest
// sample as a full step's do. The batches keep their count; if a sample
// would not fit the lightest batch's room, the tail is left as it was.
func rebalanceTail(bins []bin, world int, budget int64, tok func(q int) int64) {
	var tmax int64
	for _, b := range bins {
		for _, q := range b.places {
			tmax = max(tmax, tok(q))
		}
	}
	loose := 0
	for _, b := range bins {
		if b.tokens <= budget-tmax {
			loose++
		}
	}
	if loose == 0 {
		return
	}
	steps := min(len(bins)/world, (loose+world-1)/world+1)
	tail := bins[len(bins)-steps*world:]
	var pool []int
	for _, b := range tail {
		pool = append(pool, b.places...)
	}
	slices.SortFunc(pool, func(a, b int) int { return cmp.Or(cmp.Compare(tok(b), tok(a)), cmp.Compare(a, b)) })
	dealt := make([]bin, len(tail))
	h := &lightHeap{bins: dealt}
	for i := range dealt {
		h.idx = append(h.idx, i)
	}
	for _, q := range pool { // the heap starts ordered: every batch empty
		b := &dealt[h.idx[0]]
		if b.tokens+tok(q) > budget {
			return
		}
		b.places = append(b.places, q)
		b.tokens += tok(q)
		heap.Fix(h, 0)
	}
	for i := range dealt {
		slices.Sort(dealt[i].places)
	}
	slices.SortFunc(dealt, func(a, b bin) int {
		return cmp.Or(cmp.Compare(b.tokens, a.tokens), cmp.Compare(a.places[0], b.places[0]))
	})
	copy(tail, dealt)
}

// lightHeap is batches' indices, the lightest on top (ties: the one of
// fewer samples, so that samples of no tokens are dealt round too, then
// the lower index).
type lightHeap struct {
	bins []bin
	idx  []int
}

func (h *lightHeap) Len() int { return len(h.idx) }
func (h *lightHeap) Less(a, b int) bool {
	x, y := &h.bins[h.idx[a]], &h.bins[h.idx[b]]
	return cmp.Or(cmp.Compare(x.tokens, y.tokens), cmp.Compare(len(x.places), len(y.places)), cmp.Compare(h.idx[a], h.idx[b])) < 0
}
func (h *lightHeap) Swap(a, b int) { h.idx[a], h.idx[b] = h.idx[b], h.idx[a] }
func (h *lightHeap) Push(x any)    { h.idx = append(h.idx, x.(int)) }
func (h *lightHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// sortDecreasing sorts places of the order (at least lo, within a
// window) by their samples' tokens, largest first, then by place: as one
// uint64 key each (room left under the budget, place) where both fit 32
// bits, the common case and 3-4x faster than comparing through the order.
func (k *packer) sortDecreasing(places []int, order []int64, lo int) {
	if k.budget >= 1<<32 || k.window >= 1<<32 {
		slices.SortFunc(places, func(a, b int) int {
			return cmp.Or(cmp.Compare(k.tokens[order[b]], k.tokens[order[a]]), cmp.Compare(a, b))
		})
		return
	}
	keys := make([]uint64, len(places))
	for i, q := range places {
		keys[i] = uint64(k.budget-k.tokens[order[q]])<<32 | uint64(q-lo)
	}
	slices.Sort(keys)
	for i, key := range keys {
		places[i] = lo + int(key&(1<<32-1))
	}
}

// splitTo makes the count of batches a multiple of world: it splits the
// batch of the most samples in two while it is not, and where no batch
// has two samples left, merges the two lightest while they fit the
// budget.
func splitTo(bins *[]bin, world int, budget int64, tok func(q int) int64) error {
	need := (world - len(*bins)%world) % world
	if need == 0 {
		return nil
	}
	h := &binHeap{bins: bins}
	for i := range *bins {
		h.idx = append(h.idx, i)
	}
	heap.Init(h)
	for ; need > 0; need-- {
		top := h.idx[0]
		if len((*bins)[top].places) < 2 {
			return mergeTo(bins, world, budget)
		}
		halves := splitBin((*bins)[top], tok)
		(*bins)[top] = halves[0]
		heap.Fix(h, 0)
		*bins = append(*bins, halves[1])
		heap.Push(h, len(*bins)-1)
	}
	return nil
}

// mergeTo merges the two lightest batches while the count is not a
// multiple of world, or says the epoch cannot be cut for the ranks.
func mergeTo(bins *[]bin, world int, budget int64) error {
	for len(*bins)%world != 0 {
		b := *bins
		slices.SortFunc(b, func(x, y bin) int {
			return cmp.Or(cmp.Compare(x.tokens, y.tokens), cmp.Compare(x.places[0], y.places[0]))
		})
		if len(b) < 2 || b[0].tokens+b[1].tokens > budget {
			return fmt.Errorf("%w: the epoch's %d batches, each of one sample and no two within the budget of %d tokens, cannot be dealt to %d ranks evenly (a larger batch_tokens can)", ErrPackTooFew, len(b), budget, world)
		}
		m := bin{places: slices.Sorted(slices.Values(append(slices.Clone(b[0].places), b[1].places...))), tokens: b[0].tokens + b[1].tokens}
		*bins = append(b[2:], m)
	}
	return nil
}

// splitBin cuts b in two of nearly the same tokens (largest first, each
// to the lighter half), each keeping the order's order.
func splitBin(b bin, tok func(q int) int64) [2]bin {
	byTok := slices.Clone(b.places)
	slices.SortStableFunc(byTok, func(x, y int) int { return cmp.Compare(tok(y), tok(x)) })
	side := make(map[int]int, len(byTok))
	var out [2]bin
	for _, q := range byTok {
		s := 0
		if out[1].tokens < out[0].tokens || (out[1].tokens == out[0].tokens && len(out[1].places) < len(out[0].places)) {
			s = 1
		}
		side[q] = s
		out[s].tokens += tok(q)
		out[s].places = append(out[s].places, q) // counted here, refilled below
	}
	out[0].places, out[1].places = out[0].places[:0], out[1].places[:0]
	for _, q := range b.places {
		out[side[q]].places = append(out[side[q]].places, q)
	}
	return out
}

// binHeap is the batches' indices, the one of the most samples on top
// (ties: the first in the order).
type binHeap struct {
	bins *[]bin
	idx  []int
}

func (h *binHeap) Len() int { return len(h.idx) }
func (h *binHeap) Less(a, b int) bool {
	x, y := (*h.bins)[h.idx[a]], (*h.bins)[h.idx[b]]
	if len(x.places) != len(y.places) {
		return len(x.places) > len(y.places)
	}
	return x.places[0] < y.places[0]
}
func (h *binHeap) Swap(a, b int) { h.idx[a], h.idx[b] = h.idx[b], h.idx[a] }
func (h *binHeap) Push(x any)    { h.idx = append(h.idx, x.(int)) }
func (h *binHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// firstFit is a segment tree of batches' room, size leaves (a power of
// two), each a batch's free tokens (a batch not yet opened: the budget),
// each node the most of its leaves: the first batch with room for t is
// found from the root in O(log size).
type firstFit struct {
	size int
	room []int64
}

// reset makes room for k batches of budget tokens.
func (f *firstFit) reset(k int, budget int64) {
	f.size = 1
	for f.size < k {
		f.size *= 2
	}
	if cap(f.room) < 2*f.size {
		f.room = make([]int64, 2*f.size)
	}
	f.room = f.room[:2*f.size]
	for i := range f.room {
		f.room[i] = budget
	}
}

// place puts t tokens (at most the budget) in the first batch with room
// for them and returns it.
func (f *firstFit) place(t int64) int {
	i := 1
	for i < f.size {
		i *= 2
		if f.room[i] < t {
			i++
		}
	}
	f.room[i] -= t
	for j := i / 2; j >= 1; j /= 2 {
		f.room[j] = max(f.room[2*j], f.room[2*j+1])
	}
	return i - f.size
}
