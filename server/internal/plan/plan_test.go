package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		world     int
		batchSize int
		shuffle   bool
		dropLast  bool
		batches   int // per rank
		samples   int // per rank
		lastBatch int // size of the last batch
	}{
		{"one rank", 10, 1, 4, true, false, 3, 10, 2},
		{"one rank drop last", 10, 1, 4, true, true, 2, 8, 4},
		{"even split", 40, 2, 8, true, false, 3, 20, 4},
		{"even split identity", 40, 4, 5, false, false, 2, 10, 5},
		{"exact batches", 48, 3, 8, true, true, 2, 16, 8},
		{"padded", 10, 3, 2, true, false, 2, 4, 2},
		{"padded drop last", 11, 4, 2, false, true, 1, 2, 2},
		{"more ranks than samples", 3, 5, 4, true, false, 1, 1, 1},
		{"batch larger than share", 7, 2, 100, true, false, 1, 4, 4},
		{"batch larger than share drop last", 7, 2, 100, true, true, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(map[int64]int)
			for r := range tc.world {
				spec := Spec{Size: tc.size, Seed: 3, Epoch: 1, Shuffle: tc.shuffle, Rank: r, World: tc.world, BatchSize: tc.batchSize, DropLast: tc.dropLast}
				p := New(spec)
				if p.Batches() != tc.batches || p.Samples() != tc.samples {
					t.Fatalf("rank %d: %d batches, %d samples; want %d, %d", r, p.Batches(), p.Samples(), tc.batches, tc.samples)
				}
				n := 0
				for k := range p.Batches() {
					b := p.Batch(k)
					if k < p.Batches()-1 && len(b) != tc.batchSize {
						t.Errorf("rank %d batch %d has %d samples, want %d", r, k, len(b), tc.batchSize)
					}
					if k == p.Batches()-1 && len(b) != tc.lastBatch {
						t.Errorf("rank %d last batch has %d samples, want %d", r, len(b), tc.lastBatch)
					}
					for _, i := range b {
						if i < 0 || i >= int64(tc.size) {
							t.Fatalf("index %d out of range", i)
						}
						seen[i]++
					}
					n += len(b)
				}
				if n != p.Samples() {
					t.Errorf("rank %d: batches hold %d samples, Samples() = %d", r, n, p.Samples())
				}
				if q := New(spec); !slices.Equal(allOf(p), allOf(q)) {
					t.Errorf("rank %d: same spec, different plan", r)
				}
			}
			if tc.size%tc.world == 0 && !tc.dropLast {
				for i := range int64(tc.size) {
					if seen[i] != 1 {
						t.Errorf("index %d taken %d times across ranks, want 1", i, seen[i])
					}
				}
			}
			if !tc.dropLast && tc.size%tc.world != 0 {
				// Padding repeats only enough to even out the ranks.
				if len(seen) != tc.size {
					t.Errorf("%d distinct indices, want all %d", len(seen), tc.size)
				}
			}
		})
	}
}

func TestPlanOrder(t *testing.T) {
	base := Spec{Size: 100, Seed: 1, Epoch: 0, Shuffle: true, World: 1, BatchSize: 100}
	order := func(s Spec) []int64 { return New(s).Batch(0) }
	identity := base
	identity.Shuffle = false
	for i, v := range order(identity) {
		if v != int64(i) {
			t.Fatalf("unshuffled order[%d] = %d", i, v)
		}
	}
	a := order(base)
	if slices.Equal(a, order(identity)) {
		t.Error("shuffled order is the identity")
	}
	if !slices.Equal(a, order(base)) {
		t.Error("same seed and epoch, different order")
	}
	for _, change := range []func(*Spec){
		func(s *Spec) { s.Epoch = 1 },
		func(s *Spec) { s.Seed = 2 },
	} {
		s := base
		change(&s)
		b := order(s)
		if slices.Equal(a, b) {
			t.Errorf("%+v: same order as %+v", s, base)
		}
		slices.Sort(b)
		if !slices.Equal(b, order(identity)) {
			t.Errorf("%+v: not a permutation", s)
		}
	}
}

// TestPlanGolden pins one rank's share of one shuffled epoch. Peers of any
// architecture compute plans for the same job, and the permutation is
// integer arithmetic (the RNG's keys and a Feistel network), so these
// values must hold on every machine (cross-checked with an independent
// Python implementation of the key stream, the Feistel network with cycle
// walking and the rank's stride). A failure means the epoch order changed,
// for every job: change them only on purpose (the failure prints the new
// values), and say why in the commit message.
func TestPlanGolden(t *testing.T) {
	p := New(Spec{Size: 1000, Seed: 5, Epoch: 2, Shuffle: true, Rank: 1, World: 3, BatchSize: 16})
	if p.Batches() != 21 || p.Samples() != 334 {
		t.Fatalf("%d batches of %d samples, want 21 of 334", p.Batches(), p.Samples())
	}
	first := []int64{812, 141, 917, 501, 92, 392, 941, 703, 396, 280, 31, 219, 609, 875, 282, 445}
	if got := p.Batch(0); !slices.Equal(got, first) {
		t.Errorf("first batch %#v, want %#v", got, first)
	}
	// SHA-256 of the whole share, each index as a little-endian int64.
	var buf []byte
	for k := range p.Batches() {
		for _, i := range p.Batch(k) {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(i))
		}
	}
	sum := sha256.Sum256(buf)
	if got, want := hex.EncodeToString(sum[:]), "7a325a0686ace92f7d58d5a1bf5366a13f3a6cf29a41b64700d4e995a4620792"; got != want {
		t.Errorf("share SHA-256 %s, want %s", got, want)
	}
}

// allOf is every index of p, batch after batch.
func allOf(p Plan) []int64 {
	var all []int64
	for k := range p.Batches() {
		all = p.AppendBatch(all, k)
	}
	return all
}

// TestPermutation checks the keyed permutation is a bijection of [0, n) for
// sizes around the Feistel domain's edges, and that its order looks random:
// positions move far (no fixed points beyond chance, rank correlation with
// the identity near 0) and every element lands in every tenth of the order
// about equally often across keys.
func TestPermutation(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 4095, 4097, 65537} {
		p := newPermutation(n, 7, 3)
		seen := make([]bool, n)
		for i := range n {
			v := p.at(i)
			if v >= n || seen[v] {
				t.Fatalf("n=%d: at(%d) = %d, out of range or seen", n, i, v)
			}
			seen[v] = true
		}
	}
	const n = 10000
	p := newPermutation(n, 1, 0)
	var fixed int
	var sumD2 float64
	for i := range uint64(n) {
		v := p.at(i)
		if v == i {
			fixed++
		}
		d := float64(v) - float64(i)
		sumD2 += d * d
	}
	// Spearman's rho with the identity: 1 - 6 sum d^2 / (n (n^2 - 1)).
	rho := 1 - 6*sumD2/(n*(n*n-1))
	if fixed > 10 || rho < -0.05 || rho > 0.05 {
		t.Errorf("n=%d: %d fixed points, rank correlation %.3f with the identity; want few and near 0", n, fixed, rho)
	}
	// Where element 0..99 land, over 2000 keys, by tenth of a 1000-long
	// order: each tenth about 10% of the time.
	var tenths [10]int
	for seed := range uint64(2000) {
		q := newPermutation(1000, seed, 0)
		for i := range uint64(1000) {
			if v := q.at(i); v < 100 {
				tenths[i/100]++
			}
		}
	}
	for k, c := range tenths {
		if c < 17000 || c > 23000 { // expected 20000; a sd is ~130
			t.Errorf("tenth %d of the order got %d of elements 0..99 over 2000 keys, want about 20000", k, c)
		}
	}
}

// BenchmarkPlanBatch is the cost of one batch's indices from a keyed
// permutation of a 100-million-sample dataset (a Plan holds no per-sample
// state whatever the size).
func BenchmarkPlanBatch(b *testing.B) {
	p := New(Spec{Size: 100_000_000, Seed: 1, Epoch: 3, Shuffle: true, Rank: 2, World: 8, BatchSize: 256})
	dst := make([]int64, 0, 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		dst = p.AppendBatch(dst[:0], i%p.Batches())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/sample")
}

// TestGlobalOrderIsEpochPermutation: the global shuffle's order is
// det.EpochPermutation's, which a Mosaic's partner draw reads
// (its windows of that order), whatever the ranks split it into.
func TestGlobalOrderIsEpochPermutation(t *testing.T) {
	const n = 1000
	perm := det.EpochPermutation(n, 21, 6)
	for _, world := range []int{1, 3} {
		for rank := range world {
			p := New(Spec{Size: n, Seed: 21, Epoch: 6, Shuffle: true, Rank: rank, World: world, BatchSize: 64})
			j := 0
			for k := range p.Batches() {
				for _, idx := range p.Batch(k) {
					if pos := uint64(rank + j*world); pos < n && uint64(idx) != perm.At(pos) {
						t.Fatalf("world %d rank %d: position %d holds %d, EpochPermutation %d", world, rank, pos, idx, perm.At(pos))
					}
					j++
				}
			}
		}
	}
}
