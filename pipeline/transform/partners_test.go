package transform_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestPartnersInWindow: a sample's partners (its mosaic's, its MixUp
// partner and that one's mosaic's) are in its window of the epoch's global
// shuffle order (cv.PartnerWindow positions; the last window takes the
// remainder), spread over it, and change with the epoch; a dataset of
// fewer than two windows draws them over the whole dataset as before
// (uniform indices: the yolo preset's bytes on small sets are unchanged).
func TestPartnersInWindow(t *testing.T) {
	tr := mosaicMixUp(t)
	const w = cv.PartnerWindow
	for _, n := range []int{100, 2*w - 1, 2 * w, 5*w + 77} {
		for _, e := range []uint64{0, 3} {
			perm := det.EpochPermutation(uint64(n), 9, e)
			blocks := max(n/w, 1)
			block := func(i int) int { return min(int(perm.Index(uint64(i)))/w, blocks-1) }
			spread := map[int]map[int]bool{}
			for i := range n {
				k := det.Key{Seed: 9, Epoch: e, Index: uint64(i)}
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
					const mosaicStream = 0x6d6f73616963 // op_mosaic.go's streamMosaic
					cv.Partners(k, mosaicStream, n, want[:])
					r := k.Stream(mosaicStream)
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
		k := det.Key{Seed: 9, Epoch: 1, Index: 5}
		if a, b := tr.PartnersOf(k, n), tr.PartnersOf(det.Key{Seed: 9, Epoch: 2, Index: 5}, n); fmt.Sprint(a) == fmt.Sprint(b) {
			t.Errorf("n=%d: the same partners %v in epochs 1 and 2", n, a)
		}
	}
}

// TestPartnersGolden pins the windowed draw (the yolo preset's goldens
// are of a set of one window, drawn as before): the partners of every
// sample of a set of 1000 (seven windows), epochs 0 and 5, a Mosaic of 4
// with MixUp(0.5). A change means the mosaics trainers get changed.
func TestPartnersGolden(t *testing.T) {
	tr := mosaicMixUp(t)
	h := sha256.New()
	for _, e := range []uint64{0, 5} {
		for i := range 1000 {
			for _, p := range tr.PartnersOf(det.Key{Seed: 3, Epoch: e, Index: uint64(i)}, 1000) {
				binary.Write(h, binary.LittleEndian, uint32(p))
			}
		}
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), "02a4526d28cd6ab2b662adeabfaf8d3df09bd44b1cfe819688183081ea75caa9"; got != want {
		t.Errorf("partners' hash %s, want %s", got, want)
	}
}

// mosaicMixUp is a YOLOMosaic of 4 (imgsz 32) with YOLOMixUp(0.5) after
// it, named as a client names them.
func mosaicMixUp(t *testing.T) *transform.Transform {
	t.Helper()
	return mustTransform(t, transform.CHW, yoloOps(t, "YOLOMosaic", map[string]any{"imgsz": 32.0}, "YOLOMixUp", map[string]any{"p": 0.5})...)
}
