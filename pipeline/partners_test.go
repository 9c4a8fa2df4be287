package pipeline

import (
	"bytes"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// fillPartners is fillMosaic with opts, every sample made: a sample's
// error fails the test.
func fillPartners(t *testing.T, ds dataset.Dataset, tr *transform.Transform, e uint64, indices []int64, split, workers int, opts ...Option) (data, traces, targets [][]byte) {
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
	tr := mustTransform(t, transform.CHW, namedOps(t, "YOLOMosaic", map[string]any{"imgsz": 32.0}, "YOLOMixUp", map[string]any{"p": 0.5})...)
	const e = 2
	perm := det.EpochPermutation(n, 5, e)
	order := make([]int64, n)
	for i := range order {
		order[i] = int64(perm.At(uint64(i)))
	}
	d0, tr0, tg0 := fillPartners(t, ds, tr, e, order, 64, 1)
	roomy := cv.NewPartnerCache(64 << 20)
	tiny := cv.NewPartnerCache(20 * 3 * 32 * 32)
	for _, c := range []struct {
		name           string
		split, workers int
		cache          *cv.PartnerCache
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
