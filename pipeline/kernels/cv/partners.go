package cv

import "github.com/stoker-dev/stoker/pipeline/det"

// PartnerWindow is how many positions of the epoch's order a sample's
// partners are drawn from: ultralytics draws them from its buffer of the
// images it loaded last (min(n, batch*8, 1000) of them, each dataloader
// worker its own: 128 at its default batch of 16); here from the sample's
// window of the epoch's global shuffle order, so that a node making the
// epoch in order finds its partners among the samples it has just made or
// is about to (their load_image'd images in its PartnerCache), whatever
// the ranks and batches. 128 is ultralytics' default buffer, and keeps
// the working set a node caches small (about 120 MB of images at imgsz
// 640 a window).
const PartnerWindow = 128

// Partners fills out with the partner indices of sample key.Index of a
// dataset of n samples for the op whose stream is given, a pure function
// of (seed, epoch, index, view, copy, stream) and n: each uniform over
// the sample's window of the epoch's order (PartnerWindow), a sample
// possibly its own partner, as ultralytics' random.choices allows. The
// epoch's order is the global shuffle's (det.EpochPermutation of (seed,
// epoch, n)), cut into n/PartnerWindow windows of PartnerWindow
// positions, the last taking the remainder; a dataset of fewer than two
// windows is one window, and its partners are drawn as uniform indices
// of [0, n) directly. They are read, not consumed: the epoch's plan is
// not touched, so every index is still the primary sample exactly once
// an epoch, and any machine makes the same mosaic of a sample, in any
// order and across a resume.
func Partners(key det.Key, stream uint64, n int, out []int) {
	r := key.Stream(stream)
	lo, hi, perm, ok := PartnerWindowOf(key, n)
	if !ok {
		for i := range out {
			out[i] = r.Intn(n)
		}
		return
	}
	for i := range out {
		out[i] = int(perm.At(lo + uint64(r.Intn(int(hi-lo)))))
	}
}

// PartnerWindowOf is the window of the epoch's order the partners of
// sample key.Index of a dataset of n samples are drawn from: positions
// [lo, hi) of perm. ok is false when the dataset is one window (fewer
// than 2*PartnerWindow samples): the partners are then uniform over it.
func PartnerWindowOf(key det.Key, n int) (lo, hi uint64, perm det.Permutation, ok bool) {
	blocks := uint64(n) / PartnerWindow
	if blocks < 2 || key.Index >= uint64(n) {
		return 0, 0, perm, false
	}
	perm = det.EpochPermutation(uint64(n), key.Seed, key.Epoch)
	b := min(perm.Index(key.Index)/PartnerWindow, blocks-1)
	lo, hi = b*PartnerWindow, (b+1)*PartnerWindow
	if b == blocks-1 {
		hi = uint64(n)
	}
	return lo, hi, perm, true
}
