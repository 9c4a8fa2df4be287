package cv

import "github.com/stoker-dev/stoker/pipeline/internal/det"

// The streams of a sample's key the partners are drawn from: apart from
// every op's, so that drawing them shifts no other number.
const (
	// MosaicStream draws a mosaic's partners.
	MosaicStream = 0x6d6f73616963 // "mosaic"
	// MixUpStream draws a mixup's partner.
	MixUpStream = 0x6d69787570 // "mixup"
)

// Partners fills out with the partner indices of sample key.Index for the
// op whose stream is given: each uniform over [0, n) (a sample may be its
// own partner, as ultralytics' random.randint allows), a pure function of
// (seed, epoch, index, view, copy, stream). They are read, not consumed:
// the epoch's plan is not touched, so every index is still the primary
// sample exactly once an epoch, and any machine makes the same mosaic of
// a sample, in any order and across a resume.
func Partners(key det.Key, stream uint64, n int, out []int) {
	r := key.Stream(stream)
	for i := range out {
		out[i] = r.Intn(n)
	}
}
