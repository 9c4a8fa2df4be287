package plan

import (
	"fmt"
	"testing"
)

// raSampler is torchvision's RASampler.__iter__ (references/classification/
// sampler.py; DeiT's is the same), transcribed: order is the epoch's
// permutation of the dataset (torch.randperm there, the plan's own
// permutation here), each sample repeated k times in a row, padded to be
// divisible, subsampled by rank, and cut to floor(n // 256 * 256 / w). It
// returns the rank's dataset indices and, for each, which copy it is.
func raSampler(order []int, k, w, r int) (idx []int64, copies []uint32) {
	n := len(order)
	numSamples := (n*k + w - 1) / w
	total := numSamples * w
	selected := n / 256 * 256 / w
	type item struct{ i, c int }
	var rep []item
	for _, i := range order {
		for c := range k {
			rep = append(rep, item{i, c})
		}
	}
	rep = append(rep, rep[:total-len(rep)]...)
	for j := r; j < total; j += w {
		idx = append(idx, int64(rep[j].i))
		copies = append(copies, uint32(rep[j].c))
	}
	return idx[:selected], copies[:selected]
}

// TestRepeatedPlanIsRASampler: a plan of repeated augmentation gives each
// rank exactly RASampler's samples, in its order, with each copy's number,
// shuffled or not; the copies of a sample go to consecutive ranks.
func TestRepeatedPlanIsRASampler(t *testing.T) {
	for _, n := range []int{256, 300, 517, 1031} {
		for _, k := range []int{2, 3, 4} {
			for _, w := range []int{1, 2, 3, 4, 8} {
				for _, shuffle := range []bool{false, true} {
					name := fmt.Sprintf("n%d k%d w%d shuffle %v", n, k, w, shuffle)
					order := make([]int, n)
					perm := newPermutation(uint64(n), 9, 4)
					for i := range order {
						order[i] = i
						if shuffle {
							order[i] = int(perm.at(uint64(i)))
						}
					}
					for r := range w {
						want, wantCopies := raSampler(order, k, w, r)
						p := New(Spec{Size: n, Seed: 9, Epoch: 4, Shuffle: shuffle, Rank: r, World: w, BatchSize: 7, Repeats: k})
						if p.Samples() != len(want) {
							t.Fatalf("%s rank %d: %d samples, RASampler gives %d", name, r, p.Samples(), len(want))
						}
						var got []int64
						var copies []uint32
						for b := range p.Batches() {
							got = append(got, p.Batch(b)...)
							copies = append(copies, p.Copies(b)...)
						}
						if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(copies) != fmt.Sprint(wantCopies) {
							t.Fatalf("%s rank %d: plan %v copies %v…, RASampler %v copies %v…", name, r, head(got), head(copies), head(want), head(wantCopies))
						}
					}
				}
			}
		}
	}
	if p := New(Spec{Size: 1000, Rank: 0, World: 1, BatchSize: 8}); p.Copies(0) != nil {
		t.Errorf("a plan without repeats has copies %v", p.Copies(0))
	}
}

func head[T any](xs []T) []T { return xs[:min(len(xs), 12)] }

// TestRepeatedPlanElastic runs a repeated-augmentation epoch in pieces on
// changing world sizes (4 ranks, then 2, then 3), each resumed with the
// positions consumed so far and the world size the epoch began with: every
// copy of the epoch is made once, and none that is not in it. Without the
// first world size the epoch's length is the new world's, and copies are
// lost.
func TestRepeatedPlanElastic(t *testing.T) {
	const n, k, batch = 1300, 3, 5
	first := New(Spec{Size: n, Rank: 0, World: 4, BatchSize: batch, Repeats: k, Shuffle: true, Seed: 2})
	epoch := 4 * first.Samples() // RASampler's epoch: every rank's samples
	run := func(epochWorld bool) map[[2]int64]int {
		seen := map[[2]int64]int{}
		consumed := uint64(0)
		for _, stage := range []struct{ world, batches int }{{4, 10}, {2, 9}, {3, -1}} {
			for r := range stage.world {
				s := Spec{Size: n, Rank: r, World: stage.world, BatchSize: batch, Repeats: k, Shuffle: true, Seed: 2, Consumed: consumed}
				if epochWorld && consumed > 0 {
					s.EpochWorld = 4
				}
				p := New(s)
				nb := stage.batches
				if nb < 0 {
					nb = p.Batches()
				}
				for b := range nb {
					idx, cp := p.Batch(b), p.Copies(b)
					for i := range idx {
						seen[[2]int64{idx[i], int64(cp[i])}]++
					}
				}
			}
			if stage.batches > 0 {
				consumed += uint64(stage.batches * batch * stage.world)
			}
		}
		return seen
	}
	seen := run(true)
	if len(seen) != epoch {
		t.Fatalf("%d distinct copies over the resumes, the epoch has %d", len(seen), epoch)
	}
	for c, times := range seen {
		if times != 1 {
			t.Fatalf("sample %d copy %d made %d times over the resumes", c[0], c[1], times)
		}
	}
	if bad := run(false); len(bad) == epoch {
		t.Error("resumes without the epoch's first world size made the same copies: EpochWorld is not needed?")
	}
}
