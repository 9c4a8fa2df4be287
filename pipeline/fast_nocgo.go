//go:build !cgo

package pipeline

// Without cgo there is no libjpeg-turbo: every image takes the reference path.
const haveFast = false

type fastState struct{}

func (fastState) free() {}

func (d *Decoder) decodeFast(data []byte, hd *header, p *samplePlan, layout Layout, out []byte) error {
	panic("unreachable: decodeFast without cgo")
}
