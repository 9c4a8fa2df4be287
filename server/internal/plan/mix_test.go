package plan

import (
	"math"
	"slices"
	"testing"
)

// mixPlan is the plan of a mix of parts of the given sizes and quotas.
func mixPlan(sizes []int, quotas []uint64, epoch uint64, rank, world int) Plan {
	var mix []MixShare
	start := 0
	var n uint64
	for i, s := range sizes {
		mix = append(mix, MixShare{Start: start, Size: s, Quota: quotas[i]})
		start += s
		n += quotas[i]
	}
	return New(Spec{Size: int(n), Seed: 7, Epoch: epoch, Shuffle: true, Rank: rank, World: world, BatchSize: 64, Mix: mix})
}

// TestMixPlan: an epoch of a mix draws each part exactly its quota (so
// the realized share is the weight's within one sample in 10^4); a part
// drawn past its size goes round again, each sample once a round, each
// round in another order; ranks are disjoint and cover the epoch; the
// same spec gives the same order.
func TestMixPlan(t *testing.T) {
	sizes := []int{6000, 50}
	quotas := []uint64{7000, 3000} // weights 0.7 and 0.3 over 10^4 positions
	p := mixPlan(sizes, quotas, 3, 0, 1)
	if p.Samples() != 10000 {
		t.Fatalf("%d samples, want 10000", p.Samples())
	}
	var all []int64
	for k := range p.Batches() {
		all = p.AppendBatch(all, k)
	}
	count := [2]int{}
	var small []int64 // part 1's draws, in the epoch's order
	for _, i := range all {
		switch {
		case i < 0 || i >= 6050:
			t.Fatalf("index %d outside the mix's 6050", i)
		case i < 6000:
			count[0]++
		default:
			count[1]++
			small = append(small, i)
		}
	}
	if count[0] != 7000 || count[1] != 3000 {
		t.Fatalf("drew %v of the parts, want their quotas [7000 3000]", count)
	}
	if got := float64(count[0]) / 10000; math.Abs(got-0.7) > 0.01 {
		t.Fatalf("share %.4f of part 0, want 0.7 within 0.01", got)
	}
	// Part 1's 3000 draws are 60 rounds of its 50 samples. The epoch's
	// order interleaves the rounds, so count per sample: each 60 times.
	per := map[int64]int{}
	for _, i := range small {
		per[i]++
	}
	for i := int64(6000); i < 6050; i++ {
		if per[i] != 60 {
			t.Fatalf("sample %d drawn %d times, want 60 (one a round)", i, per[i])
		}
	}
	// Rounds in fresh orders: the mix's draw v of part 1 is its round
	// v/50's permutation at v%50; two rounds' orders differ.
	m := p.mix
	round := func(c uint64) []uint64 {
		var out []uint64
		for r := range uint64(50) {
			out = append(out, m.at(7000+c*50+r))
		}
		return out
	}
	if a, b := round(0), round(1); slices.Equal(a, b) {
		t.Fatalf("rounds 0 and 1 of part 1 in the same order %v", a)
	}
	// Ranks: disjoint, covering the epoch's positions (world 4 divides it).
	seen := map[int64]int{} // position -> count, through the index multiset
	got := map[int64]int{}
	for r := range 4 {
		q := mixPlan(sizes, quotas, 3, r, 4)
		for k := range q.Batches() {
			for _, i := range q.Batch(k) {
				got[i]++
			}
		}
	}
	for _, i := range all {
		seen[i]++
	}
	for i, n := range seen {
		if got[i] != n {
			t.Fatalf("index %d: %d times over 4 ranks, %d times in the one-rank epoch", i, got[i], n)
		}
	}
	// Deterministic, and another epoch another order.
	if q := mixPlan(sizes, quotas, 3, 0, 1); !slices.Equal(q.Batch(5), p.Batch(5)) {
		t.Fatal("the same spec gave another batch 5")
	}
	if q := mixPlan(sizes, quotas, 4, 0, 1); slices.Equal(q.Batch(5), p.Batch(5)) {
		t.Fatal("epoch 4's batch 5 is epoch 3's")
	}
}
