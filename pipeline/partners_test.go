package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// TestPermutationIndex: Index is At's inverse, on sizes of one walk and
// of many.
func TestPermutationIndex(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 7, 100, 129, 1000, 4097} {
		p := EpochPermutation(n, 11, 4)
		seen := make([]bool, n)
		for i := range n {
			x := p.At(i)
			if x >= n || seen[x] {
				t.Fatalf("n=%d: At(%d)=%d is not a bijection's", n, i, x)
			}
			seen[x] = true
			if j := p.Index(x); j != i {
				t.Fatalf("n=%d: Index(At(%d)=%d) = %d", n, i, x, j)
			}
		}
	}
}

// mosaicMixUp is a Mosaic of 4 (imgsz s) with MixUp(0.5) after it.
func mosaicMixUp(t *testing.T, s int) *Transform {
	t.Helper()
	tr, err := NewTransform(CHW, Op{Kind: OpMosaic, ImgSz: s, Tiles: 4, P: 1}, Op{Kind: OpMixUp, P: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestPartnersInWindow: a sample's partners (its mosaic's, its MixUp
// partner and that one's mosaic's) are in its window of the epoch's global
// shuffle order (cv.PartnerWindow positions; the last window takes the
// remainder), spread over it, and change with the epoch; a dataset of
// fewer than two windows draws them over the whole dataset as before
// (uniform indices: the yolo preset's bytes on small sets are unchanged).
func TestPartnersInWindow(t *testing.T) {
	tr := mosaicMixUp(t, 32)
	const w = cv.PartnerWindow
	for _, n := range []int{100, 2*w - 1, 2 * w, 5*w + 77} {
		for _, e := range []uint64{0, 3} {
			perm := EpochPermutation(uint64(n), 9, e)
			blocks := max(n/w, 1)
			block := func(i int) int { return min(int(perm.Index(uint64(i)))/w, blocks-1) }
			spread := map[int]map[int]bool{}
			for i := range n {
				k := Key{Seed: 9, Epoch: e, Index: uint64(i)}
				ps := tr.PartnersOf(k, n)
				if len(ps) < 3 {
					t.Fatalf("n=%d: sample %d has partners %v", n, i, ps)
				}
				b := block(i)
				if spread[b] == nil {
					spread[b] = map[int]bool{}
				}
				for _, p := range ps {
					if p < 0 || p >= n {
						t.Fatalf("n=%d: partner %d out of the dataset", n, p)
					}
					if blocks > 1 && block(p) != b {
						t.Fatalf("n=%d epoch %d: sample %d (window %d) has partner %d of window %d", n, e, i, b, p, block(p))
					}
					spread[b][p] = true
				}
				if blocks == 1 {
					var want [3]int
					cv.Partners(k, cv.MosaicStream, n, want[:])
					r := k.Stream(cv.MosaicStream)
					if want != [3]int{r.Intn(n), r.Intn(n), r.Intn(n)} {
						t.Fatalf("n=%d: a dataset of one window draws %v, not uniform indices", n, want)
					}
				}
			}
			for b, ps := range spread {
				if size := min(w, n); len(ps) < size*3/4 {
					t.Errorf("n=%d window %d: %d distinct partners of about %d samples", n, b, len(ps), size)
				}
			}
		}
		k := Key{Seed: 9, Epoch: 1, Index: 5}
		if a, b := tr.PartnersOf(k, n), tr.PartnersOf(Key{Seed: 9, Epoch: 2, Index: 5}, n); fmt.Sprint(a) == fmt.Sprint(b) {
			t.Errorf("n=%d: the same partners %v in epochs 1 and 2", n, a)
		}
	}
}

// fillPartners is fillMosaic with opts, every sample made: a sample's
// error fails the test.
func fillPartners(t *testing.T, ds Dataset, tr *Transform, e uint64, indices []int64, split, workers int, opts ...Option) (data, traces, targets [][]byte) {
	t.Helper()
	data, traces, targets, errs := fillMosaic(t, ds, tr, e, indices, split, workers, opts...)
	for i, err := range errs {
		if err != "" {
			t.Fatalf("sample %d: %s", indices[i], err)
		}
	}
	return data, traces, targets
}

// TestPartnerCacheSameBytes: an epoch made in its global shuffle order
// with a PartnerCache (roomy, or so small that it evicts all the time) is
// the same bytes, traces and targets as without one, whatever the batch
// split and the workers; every index is the primary sample of its own
// slot once; with room for a window the cache serves most images (each
// photo decoded about once an epoch, as ultralytics' buffer).
func TestPartnerCacheSameBytes(t *testing.T) {
	const n = 3*cv.PartnerWindow + 40
	files := mosaicPNGs(t, n)
	ds := yoloMem{memDataset{files}, -1}
	tr := mosaicMixUp(t, 32)
	const e = 2
	perm := EpochPermutation(n, 5, e)
	order := make([]int64, n)
	for i := range order {
		order[i] = int64(perm.At(uint64(i)))
	}
	d0, tr0, tg0 := fillPartners(t, ds, tr, e, order, 64, 1)
	roomy := NewPartnerCache(64 << 20)
	tiny := NewPartnerCache(20 * 3 * 32 * 32)
	for _, c := range []struct {
		name           string
		split, workers int
		cache          *PartnerCache
	}{{"roomy", 64, 2, roomy}, {"roomy, split 7", 7, 3, roomy}, {"tiny", 50, 2, tiny}} {
		d1, tr1, tg1 := fillPartners(t, ds, tr, e, order, c.split, c.workers, WithPartnerCache(c.cache))
		for i, idx := range order {
			if !bytes.Equal(d0[i], d1[i]) || !bytes.Equal(tr0[i], tr1[i]) || !bytes.Equal(tg0[i], tg1[i]) {
				t.Fatalf("%s: sample %d: other bytes with the cache", c.name, idx)
			}
			if m := mosaicOf(t, tr1[i]); m.Indexes[0] != int(idx) {
				t.Fatalf("%s: slot %d holds sample %d, want %d", c.name, i, m.Indexes[0], idx)
			}
		}
	}
	// Every file decoded about once (two workers may both miss a file
	// that neither has stored yet).
	st := roomy.Stats()
	if st.Evicted != 0 || st.Entries > n || st.Bytes > st.Budget {
		t.Errorf("roomy cache: %+v", st)
	}
	if looks := st.Hits + st.Misses; st.Misses > int64(n+n/10) || st.Hits < looks*3/4 {
		t.Errorf("roomy cache: %d hits of %d lookups for %d files: want each file decoded once", st.Hits, looks, n)
	}
	if st := tiny.Stats(); st.Evicted == 0 || st.Bytes > st.Budget || st.Hits == 0 {
		t.Errorf("tiny cache: %+v: want evictions within the budget", st)
	}
}

// TestPartnersGolden pins the windowed draw (the yolo preset's goldens
// are of a set of one window, drawn as before): the partners of every
// sample of a set of 1000 (seven windows), epochs 0 and 5, a Mosaic of 4
// with MixUp(0.5). A change means the mosaics trainers get changed.
func TestPartnersGolden(t *testing.T) {
	tr := mosaicMixUp(t, 32)
	h := sha256.New()
	for _, e := range []uint64{0, 5} {
		for i := range 1000 {
			for _, p := range tr.PartnersOf(Key{Seed: 3, Epoch: e, Index: uint64(i)}, 1000) {
				binary.Write(h, binary.LittleEndian, uint32(p))
			}
		}
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), "02a4526d28cd6ab2b662adeabfaf8d3df09bd44b1cfe819688183081ea75caa9"; got != want {
		t.Errorf("partners' hash %s, want %s", got, want)
	}
}
