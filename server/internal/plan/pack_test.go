package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// packCase is a packing's inputs drawn from a seed: a dataset of
// heavy-tailed token counts (some over the budget, some unknown), a world,
// a budget and a window.
type packCase struct {
	spec   PackSpec
	tokens []int64 // -1: unknown
}

func drawPackCase(seed uint64) packCase {
	r := det.Key{Seed: seed, Index: 7}.Stream(0)
	n := r.Intn(3000)
	world := 1 + r.Intn(16)
	budget := int64(64 + r.Intn(20000))
	tokens := make([]int64, n)
	for i := range tokens {
		switch x := r.Float64(); {
		case x < 0.01:
			tokens[i] = budget + 1 + int64(r.Intn(1000)) // over the budget
		case x < 0.015:
			tokens[i] = -1 // size unknown
		case x < 0.03:
			tokens[i] = 0 // a sample of no image
		default:
			tokens[i] = 1 + int64(r.LogUniform(1, float64(budget)))
		}
	}
	windows := []int{0, 1, 7, 100, 1000}
	spec := PackSpec{Size: n, Budget: budget, Seed: seed, Epoch: uint64(r.Intn(3)), Shuffle: r.Intn(4) != 0,
		World: world, Window: windows[r.Intn(len(windows))]}
	spec.Tokens = func(i int) (int64, error) {
		if tokens[i] < 0 {
			return 0, fmt.Errorf("sample %d: no size in the manifest", i)
		}
		return tokens[i], nil
	}
	return packCase{spec: spec, tokens: tokens}
}

// checkPacking checks what every packing promises over the samples it
// was given (want: each once): batches within the budget, each rank the
// same steps, every batch holding a sample, each sample once over the
// ranks, its failing ones said.
func checkPacking(t *testing.T, c packCase, p *Packing, want []int64) {
	t.Helper()
	seen := map[int64]int{}
	for s := range p.Steps() {
		for r := range p.World() {
			b := p.Batch(r, s)
			if len(b) == 0 {
				t.Fatalf("rank %d step %d: an empty batch", r, s)
			}
			var sum int64
			for _, i := range b {
				seen[i]++
				tok := c.tokens[i]
				failing := tok < 0 || tok > c.spec.Budget
				if failing != (p.Err(i) != nil) {
					t.Fatalf("sample %d of %d tokens: Err %v", i, tok, p.Err(i))
				}
				if !failing {
					sum += tok
				}
			}
			if sum != p.Tokens(r, s) || sum > c.spec.Budget {
				t.Fatalf("rank %d step %d: %d tokens (Tokens says %d), budget %d", r, s, sum, p.Tokens(r, s), c.spec.Budget)
			}
		}
	}
	if len(seen) != len(want) || p.Samples() != len(want) {
		t.Fatalf("%d samples planned (%d distinct), want %d", p.Samples(), len(seen), len(want))
	}
	for _, i := range want {
		if seen[i] != 1 {
			t.Fatalf("sample %d planned %d times", i, seen[i])
		}
	}
}

// unpackable says whether no two samples of c fit one batch (a failing
// one counts no tokens): then only a count of samples that is a multiple
// of the world can be dealt.
func unpackable(c packCase) bool {
	var small []int64
	for _, tok := range c.tokens {
		if tok < 0 || tok > c.spec.Budget {
			tok = 0
		}
		small = append(small, tok)
	}
	slices.Sort(small)
	return len(small) >= 2 && small[0]+small[1] > c.spec.Budget && len(small)%c.spec.World != 0
}

func samplesUpTo(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// TestPackProperties: over drawn datasets, worlds, budgets and windows,
// every sample is in one batch once, no batch is over its budget, every
// rank has the same steps, and the plan is the same computed twice.
func TestPackProperties(t *testing.T) {
	for seed := range uint64(300) {
		c := drawPackCase(seed)
		p, err := Pack(c.spec)
		if errors.Is(err, ErrPackTooFew) {
			if c.spec.Size >= c.spec.World && !unpackable(c) {
				t.Fatalf("seed %d: %v with %d samples for %d ranks", seed, err, c.spec.Size, c.spec.World)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkPacking(t, c, p, samplesUpTo(c.spec.Size))
		total := 0
		for r := range p.World() {
			rp := p.Rank(r)
			total += rp.Samples()
			if rp.Batches() != p.Steps() || (p.Steps() > 0 && !slices.Equal(rp.Batch(p.Steps()-1), p.Batch(r, p.Steps()-1))) {
				t.Fatalf("seed %d: rank %d's view differs from the packing", seed, r)
			}
		}
		if total != p.Samples() {
			t.Fatalf("seed %d: the ranks' views hold %d samples of %d", seed, total, p.Samples())
		}
		again, _ := Pack(c.spec)
		if packHash(p) != packHash(again) {
			t.Fatalf("seed %d: two packings of one spec differ", seed)
		}
	}
}

// TestPackFailsAlone: a sample over the budget or of unknown size is in a
// batch, where it fails with a message naming it; its neighbours do not.
func TestPackFailsAlone(t *testing.T) {
	tokens := []int64{10, 200, 30, -1, 40, 50}
	c := packCase{tokens: tokens, spec: PackSpec{Size: len(tokens), Budget: 100, World: 2, Shuffle: true, Seed: 1,
		Tokens: func(i int) (int64, error) {
			if tokens[i] < 0 {
				return 0, errors.New("no size")
			}
			return tokens[i], nil
		}}}
	p, err := Pack(c.spec)
	if err != nil {
		t.Fatal(err)
	}
	checkPacking(t, c, p, samplesUpTo(len(tokens)))
	if e := p.Err(1); e == nil || e.Error() != "sample 1 has 200 vision tokens, over the batch's budget of 100 (batch_tokens; a sample is never split)" {
		t.Errorf("Err(1) = %v", e)
	}
	if e := p.Err(3); e == nil || e.Error() != "no size" {
		t.Errorf("Err(3) = %v", e)
	}
	for _, i := range []int64{0, 2, 4, 5} {
		if p.Err(i) != nil {
			t.Errorf("Err(%d) = %v", i, p.Err(i))
		}
	}
}

// TestPackTooFew: fewer samples than ranks is refused, saying so; an
// empty dataset is an epoch of no steps.
func TestPackTooFew(t *testing.T) {
	one := func(int) (int64, error) { return 1, nil }
	if _, err := Pack(PackSpec{Size: 3, Budget: 10, World: 4, Tokens: one}); !errors.Is(err, ErrPackTooFew) {
		t.Errorf("3 samples for 4 ranks: %v", err)
	}
	p, err := Pack(PackSpec{Size: 0, Budget: 10, World: 4, Tokens: one})
	if err != nil || p.Steps() != 0 {
		t.Errorf("no samples: %v, %d steps", err, p.Steps())
	}
	// Four samples that fit one batch still give four ranks one each.
	p, err = Pack(PackSpec{Size: 4, Budget: 10, World: 4, Tokens: one})
	if err != nil || p.Steps() != 1 {
		t.Fatalf("4 samples for 4 ranks: %v", err)
	}
	// Batches of one sample each (windows of one) that cannot be split
	// are merged, the lightest two, to make a multiple of the ranks; when
	// no two fit the budget, the refusal says so.
	c := packCase{tokens: []int64{3, 3, 4, 3, 3, 3, 3, 5, 3, 3}, spec: PackSpec{Size: 10, Budget: 10, World: 4, Window: 1, Shuffle: true}}
	c.spec.Tokens = func(i int) (int64, error) { return c.tokens[i], nil }
	p, err = Pack(c.spec)
	if err != nil || p.Steps() != 2 {
		t.Fatalf("10 samples of ~3 tokens for 4 ranks, windows of 1: %v", err)
	}
	checkPacking(t, c, p, samplesUpTo(10))
	six := func(int) (int64, error) { return 6, nil }
	if _, err := Pack(PackSpec{Size: 10, Budget: 10, World: 4, Window: 1, Tokens: six}); !errors.Is(err, ErrPackTooFew) {
		t.Errorf("10 samples of 6 tokens, budget 10, for 4 ranks: %v", err)
	}
	for _, bad := range []PackSpec{{Size: 1, Budget: 0, World: 1, Tokens: one}, {Size: 1, Budget: 1, World: 0, Tokens: one}, {Size: 1, Budget: 1, World: 1}} {
		if _, err := Pack(bad); err == nil || errors.Is(err, ErrPackTooFew) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestPackResume: a resumed job's step k is the fresh plan's step k (the
// plan is a value), and an elastic resume packs what the earlier worlds
// left for the new one: over the chain every sample is consumed once.
func TestPackResume(t *testing.T) {
	for seed := range uint64(60) {
		c := drawPackCase(seed + 1000)
		r := det.Key{Seed: seed, Index: 8}.Stream(0)
		p, err := Pack(c.spec)
		if err != nil {
			continue
		}
		var resumed []PackResume
		consumed := map[int64]bool{}
		cur := p
		for range 1 + r.Intn(3) {
			if cur.Steps() == 0 {
				break
			}
			done := r.Intn(cur.Steps() + 1)
			resumed = append(resumed, PackResume{World: cur.World(), Steps: done})
			for s := range done {
				for rk := range cur.World() {
					for _, i := range cur.Batch(rk, s) {
						if consumed[i] {
							t.Fatalf("seed %d: sample %d consumed twice", seed, i)
						}
						consumed[i] = true
					}
				}
			}
			next := c.spec
			next.World = 1 + r.Intn(16)
			next.Resumed = slices.Clone(resumed)
			cur, err = Pack(next)
			if errors.Is(err, ErrPackTooFew) {
				break
			}
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			var left []int64
			for i := range int64(c.spec.Size) {
				if !consumed[i] {
					left = append(left, i)
				}
			}
			checkPacking(t, c, cur, left)
		}
	}
}

// TestPackSteps: a step's batches differ by at most the largest sample
// (t_max), as docs/ARCHITECTURE.md's bound says: the full batches lie
// within t_max of the budget, and the tail's are dealt largest first to
// the lightest. Only where the tail's deal would overfill a batch (a
// sample near the budget) may its steps be looser.
func TestPackSteps(t *testing.T) {
	strict := 0
	for seed := range uint64(200) {
		c := drawPackCase(seed + 2000)
		if seed%2 == 0 { // samples small beside the budget: the tail is dealt
			for i, tok := range c.tokens {
				if tok > 0 && tok <= c.spec.Budget {
					c.tokens[i] = 1 + tok/8
				}
			}
		}
		p, err := Pack(c.spec)
		if err != nil {
			continue
		}
		window := c.spec.Window
		if window == 0 {
			window = DefaultPackWindow
		}
		var tmax int64
		for _, tok := range c.tokens {
			if tok <= c.spec.Budget {
				tmax = max(tmax, tok)
			}
		}
		loose := 0
		for s := range p.Steps() {
			lo, hi := c.spec.Budget, int64(0)
			for r := range p.World() {
				lo, hi = min(lo, p.Tokens(r, s)), max(hi, p.Tokens(r, s))
			}
			if hi-lo > tmax {
				loose++
			}
		}
		windows := (c.spec.Size + window - 1) / window
		tail := (windows+2*(c.spec.World-1)+c.spec.World-1)/c.spec.World + 1
		if seed%2 == 0 && tmax <= c.spec.Budget/8+1 {
			tail = 0
			strict++
		}
		if loose > tail {
			t.Errorf("seed %d: %d steps whose batches differ by more than t_max=%d (budget %d, world %d); the bound allows %d", seed, loose, tmax, c.spec.Budget, c.spec.World, tail)
		}
	}
	if strict < 50 {
		t.Errorf("%d packings held to the strict bound", strict)
	}
}

// TestPackGolden holds the packing of one spec to its hash: a change of
// the algorithm changes every job's batches, and has to be meant.
func TestPackGolden(t *testing.T) {
	c := drawPackCase(42)
	c.spec.Shuffle, c.spec.Window = true, 500
	p, err := Pack(c.spec)
	if err != nil {
		t.Fatal(err)
	}
	const want = "4fb5a57429d7645957a951e8"
	if got := packHash(p); got != want {
		t.Errorf("packing hash %s, want %s", got, want)
	}
}

func packHash(p *Packing) string {
	h := sha256.New()
	for s := range p.Steps() {
		for r := range p.World() {
			h.Write(binary.LittleEndian.AppendUint64(nil, uint64(r<<32|s)))
			for _, i := range p.Batch(r, s) {
				h.Write(binary.LittleEndian.AppendUint64(nil, uint64(i)))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
