package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"runtime"
	"slices"
	"testing"
)

// shardStarts is the ShardStarts of shards of the given sizes (a size 0 is
// a shard with no samples), and the samples in all.
func shardStarts(sizes ...int) ([]int, int) {
	starts := make([]int, len(sizes))
	n := 0
	for s, z := range sizes {
		starts[s] = n
		n += z
	}
	return starts, n
}

// shardOf is the shard of each index, by starts.
func shardOf(starts []int, n int) []int {
	of := make([]int, n)
	for s := range starts {
		end := n
		if s+1 < len(starts) {
			end = starts[s+1]
		}
		for i := starts[s]; i < end; i++ {
			of[i] = s
		}
	}
	return of
}

// unevenShards is the starts of count shards of lo..hi samples (a fixed,
// varied pattern).
func unevenShards(count, lo, hi int) ([]int, int) {
	sizes := make([]int, count)
	for s := range sizes {
		sizes[s] = lo + (s*37+11)%(hi-lo+1)
	}
	return shardStarts(sizes...)
}

func blockSpec(starts []int, n, window, rank, world, batch int) Spec {
	return Spec{Size: n, Seed: 9, Epoch: 1, Shuffle: true, Rank: rank, World: world, BatchSize: batch, Window: window, Shards: starts}
}

// TestBlockPlanOnce checks the block shuffle's split: every rank gets
// ceil(n/w) samples; when w divides n every index goes to exactly one rank
// once (disjoint ranks), and otherwise every index is there and the only
// repeats are the padding; and each rank's share is a contiguous span of
// the epoch's order (the one-rank plan), so it reads few shards.
func TestBlockPlanOnce(t *testing.T) {
	layouts := []struct {
		name  string
		sizes []int
	}{
		{"even", []int{10, 10, 10, 10, 10, 10}},
		{"uneven", []int{7, 1, 13, 2, 9, 20, 4}},
		{"empty shards", []int{0, 5, 0, 8, 3, 0, 6}},
		{"one shard", []int{23}},
		{"one sample each", []int{1, 1, 1, 1, 1}},
	}
	for _, l := range layouts {
		starts, n := shardStarts(l.sizes...)
		for _, window := range []int{1, 2, 3, len(starts), len(starts) + 5} {
			for _, world := range []int{1, 2, 3, 4, 7} {
				full := allOf(New(blockSpec(starts, n, window, 0, 1, n)))
				if sorted := slices.Sorted(slices.Values(full)); !slices.Equal(sorted, iota64(n)) {
					t.Fatalf("%s W=%d: the epoch's order is not a permutation: %v", l.name, window, full)
				}
				m := (n + world - 1) / world
				seen := make([]int, n)
				for r := range world {
					p := New(blockSpec(starts, n, window, r, world, 3))
					share := allOf(p)
					if len(share) != m || p.Samples() != m {
						t.Fatalf("%s W=%d w=%d rank %d: %d samples, want %d", l.name, window, world, r, len(share), m)
					}
					// Span r of the order (spanned), and the padding
					// from the first spans' first samples.
					lo := r*(n/world) + min(r, n%world)
					span := full[lo : lo+n/world+btoi(r < n%world)]
					if !slices.Equal(share[:len(span)], span) {
						t.Fatalf("%s W=%d w=%d rank %d: share %v, want the order's span %v", l.name, window, world, r, share, span)
					}
					for _, i := range share {
						seen[i]++
					}
				}
				for i, c := range seen {
					if c < 1 || (n%world == 0 && c != 1) {
						t.Fatalf("%s W=%d w=%d: index %d taken %d times", l.name, window, world, i, c)
					}
				}
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func iota64(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i)
	}
	return s
}

// TestBlockPlanOrders checks that the block shuffle's order changes with
// the epoch and the seed (as a permutation of the shards, too), and not
// with the world size's split of it.
func TestBlockPlanOrders(t *testing.T) {
	starts, n := unevenShards(40, 5, 30)
	of := shardOf(starts, n)
	base := blockSpec(starts, n, 4, 0, 1, n)
	order := func(s Spec) []int64 { return New(s).Batch(0) }
	// shardSeq is the shards in the order they are first read.
	shardSeq := func(o []int64) []int {
		var seq []int
		for _, i := range o {
			if !slices.Contains(seq, of[i]) {
				seq = append(seq, of[i])
			}
		}
		return seq
	}
	a := order(base)
	if slices.Equal(a, iota64(n)) {
		t.Fatal("block order is the identity")
	}
	for _, change := range []func(*Spec){
		func(s *Spec) { s.Epoch = 2 },
		func(s *Spec) { s.Seed = 10 },
	} {
		s := base
		change(&s)
		b := order(s)
		if slices.Equal(a, b) || slices.Equal(shardSeq(a), shardSeq(b)) {
			t.Errorf("seed %d epoch %d: same order (or shard order) as seed %d epoch %d", s.Seed, s.Epoch, base.Seed, base.Epoch)
		}
		if !slices.Equal(slices.Sorted(slices.Values(b)), iota64(n)) {
			t.Errorf("seed %d epoch %d: not a permutation", s.Seed, s.Epoch)
		}
	}
}

// TestBlockPlanWindowOne checks that with a window of one shard the order
// reads each shard's samples, shuffled, before the next shard's.
func TestBlockPlanWindowOne(t *testing.T) {
	starts, n := unevenShards(30, 3, 40)
	of := shardOf(starts, n)
	order := New(blockSpec(starts, n, 1, 0, 1, n)).Batch(0)
	shuffled := 0
	for lo := 0; lo < n; {
		s := of[order[lo]]
		size := shardSize(starts, n, s)
		run := order[lo : lo+size]
		for _, i := range run {
			if of[i] != s {
				t.Fatalf("positions %d..%d mix shard %d with shard %d", lo, lo+size, s, of[i])
			}
		}
		if !slices.IsSorted(run) {
			shuffled++
		}
		lo += size
	}
	if shuffled < 25 {
		t.Errorf("%d of 30 shards' samples shuffled, want nearly all", shuffled)
	}
}

func shardSize(starts []int, n, s int) int {
	if s+1 < len(starts) {
		return starts[s+1] - starts[s]
	}
	return n - starts[s]
}

// TestBlockPlanWholeWindow checks that a window of every shard is a full
// shuffle: the order moves samples far (rank correlation with the identity
// near 0), and consecutive positions change shard about as often as
// independent draws would.
func TestBlockPlanWholeWindow(t *testing.T) {
	starts, n := unevenShards(50, 50, 150)
	of := shardOf(starts, n)
	order := New(blockSpec(starts, n, len(starts), 0, 1, n)).Batch(0)
	var sumD2 float64
	changes := 0
	for i, v := range order {
		d := float64(v) - float64(i)
		sumD2 += d * d
		if i > 0 && of[v] != of[order[i-1]] {
			changes++
		}
	}
	nf := float64(n)
	rho := 1 - 6*sumD2/(nf*(nf*nf-1))
	// Independent draws stay in their shard with probability sum p_s^2,
	// about 1/50 here: nearly every step changes shard.
	if rho < -0.05 || rho > 0.05 || changes < n*9/10 {
		t.Errorf("rank correlation %.3f with the identity, %d of %d steps change shard; want near 0 and nearly all", rho, changes, n-1)
	}
}

// TestBlockPlanLocality measures the shards a batch reads: a batch within
// one window reads at most W shards, one that straddles two windows at
// most 2W, and one with a rank's padding one more; and a rank reads only
// the windows its span covers. The averages are logged.
func TestBlockPlanLocality(t *testing.T) {
	starts, n := unevenShards(64, 60, 140)
	of := shardOf(starts, n)
	for _, window := range []int{1, 2, 4, 8} {
		for _, world := range []int{1, 4} {
			const batch = 32
			full := allOf(New(blockSpec(starts, n, window, 0, 1, n)))
			// The window of each index, by its position in the order.
			windowOf := make([]int, n)
			var firstShards []int // shards in the order they come
			for _, i := range full {
				if !slices.Contains(firstShards, of[i]) {
					firstShards = append(firstShards, of[i])
				}
			}
			for pos, s := range firstShards {
				for i := starts[s]; i < starts[s]+shardSize(starts, n, s); i++ {
					windowOf[i] = pos / window
				}
			}
			var batches, shardsRead, within, withinOne int
			for r := range world {
				p := New(blockSpec(starts, n, window, r, world, batch))
				windows := map[int]bool{}
				for k := range p.Batches() {
					b := p.Batch(k)
					padded := r >= n%world && n%world != 0 && k == p.Batches()-1
					if padded {
						b = b[:len(b)-1]
					}
					shards, ws := map[int]bool{}, map[int]bool{}
					for _, i := range b {
						shards[of[i]], ws[windowOf[i]], windows[windowOf[i]] = true, true, true
					}
					if len(ws) > 2 || len(shards) > window*len(ws) {
						t.Fatalf("W=%d w=%d rank %d batch %d reads %d shards of %d windows; want at most 2 windows of W shards",
							window, world, r, k, len(shards), len(ws))
					}
					batches++
					shardsRead += len(shards) + btoi(padded)
					if len(shards) <= window+1 {
						within++
					}
					if len(ws) == 1 {
						withinOne++
					}
				}
				// 60..140 samples a shard: a span of m samples covers at
				// most m/(60W)+2 windows.
				m := (n + world - 1) / world
				if maxWindows := m/(60*window) + 2; len(windows) > maxWindows {
					t.Errorf("W=%d w=%d rank %d reads %d windows, want at most %d", window, world, r, len(windows), maxWindows)
				}
			}
			t.Logf("W=%d world %d: %.2f shards a batch of %d; %d%% of batches within W+1 shards, %d%% within one window",
				window, world, float64(shardsRead)/float64(batches), batch, 100*within/batches, 100*withinOne/batches)
		}
	}
}

// TestBlockPlanElastic runs an epoch in pieces on changing world sizes
// (4 ranks, then 3, then 2), each resumed with the positions consumed so
// far and the world size the epoch began with as Spans: every index is
// taken exactly once. Without Spans (the new world's split) samples are
// lost and others repeated, which is why OpenJob carries it.
func TestBlockPlanElastic(t *testing.T) {
	// 240 samples: each stage's remaining positions divide by its world
	// size (60 consumed by 4 ranks, then 30 by 3, then 150 left for 2).
	starts, n := shardStarts(10, 30, 25, 15, 20, 20, 18, 22, 27, 13, 24, 16)
	const batch = 5
	run := func(spans int) []int {
		seen := make([]int, n)
		consumed := uint64(0)
		for _, stage := range []struct{ world, batches int }{{4, 3}, {3, 2}, {2, -1}} {
			for r := range stage.world {
				s := blockSpec(starts, n, 3, r, stage.world, batch)
				s.Consumed, s.Spans = consumed, spans
				p := New(s)
				k := stage.batches
				if k < 0 {
					k = p.Batches()
				}
				for b := range k {
					for _, i := range p.Batch(b) {
						seen[i]++
					}
				}
			}
			if stage.batches > 0 {
				consumed += uint64(stage.batches * batch * stage.world)
			}
		}
		return seen
	}
	for i, c := range run(4) {
		if c != 1 {
			t.Fatalf("index %d taken %d times over the resumes", i, c)
		}
	}
	wrong := 0
	for _, c := range run(0) {
		if c != 1 {
			wrong++
		}
	}
	if wrong == 0 {
		t.Error("resumes that split by the new world size took every index once: Spans is not needed?")
	}
}

// TestBlockPlanCost checks that a plan costs O(shards), not O(samples): a
// plan of a billion samples in 1,000 shards allocates about what one of a
// million does, a few words a shard.
func TestBlockPlanCost(t *testing.T) {
	// The least of a few tries: the counter is the process's, and other
	// goroutines only ever add to it.
	alloc := func(n int) uint64 {
		starts := make([]int, 1000)
		for s := range starts {
			starts[s] = s * (n / 1000)
		}
		least := uint64(math.MaxUint64)
		for range 5 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			p := New(blockSpec(starts, n, 4, 3, 8, 256))
			p.Batch(p.Batches() - 1)
			runtime.ReadMemStats(&after)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	small, big := alloc(1_000_000), alloc(1_000_000_000)
	if big > 64<<10 || big > 2*small+4096 {
		t.Errorf("a plan of 10^9 samples allocated %d bytes, one of 10^6 %d; want a few words a shard for both", big, small)
	}
}

// TestBlockPlanGolden pins one rank's share of one block-shuffled epoch,
// as TestPlanGolden does the global one, and was cross-checked the same
// way (an independent Python implementation of the shard permutation, the
// windows' permutations, the spans and the rank's stride). A failure means
// the order changed for every block-shuffled job: change the values only
// on purpose, and say why in the commit message.
func TestBlockPlanGolden(t *testing.T) {
	starts, n := unevenShards(25, 20, 60)
	p := New(Spec{Size: n, Seed: 5, Epoch: 2, Shuffle: true, Rank: 1, World: 3, BatchSize: 16, Window: 4, Shards: starts})
	if n != 969 || p.Batches() != 21 || p.Samples() != 323 {
		t.Fatalf("%d samples: %d batches of %d samples, want 969: 21 of 323", n, p.Batches(), p.Samples())
	}
	first := []int64{33, 548, 348, 129, 84, 557, 94, 89, 344, 343, 379, 560, 577, 52, 571, 341}
	if got := p.Batch(0); !slices.Equal(got, first) {
		t.Errorf("first batch %#v, want %#v", got, first)
	}
	var buf []byte
	for _, i := range allOf(p) {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(i))
	}
	sum := sha256.Sum256(buf)
	if got, want := hex.EncodeToString(sum[:]), "46a46c2b45d3bf83b228ef91a0dbc136d7257e909b45d80b2fb91504923e089d"; got != want {
		t.Errorf("share SHA-256 %s, want %s", got, want)
	}
}

// BenchmarkBlockPlanBatch is the cost of one batch's indices under the
// block shuffle of 100 million samples in 100,000 shards.
func BenchmarkBlockPlanBatch(b *testing.B) {
	starts := make([]int, 100_000)
	for s := range starts {
		starts[s] = s * 1000
	}
	p := New(blockSpec(starts, 100_000_000, 4, 2, 8, 256))
	dst := make([]int64, 0, 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		dst = p.AppendBatch(dst[:0], i%p.Batches())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/sample")
}
