//go:build !cgo

package pipeline

import "github.com/stoker-dev/stoker/pipeline/transform"

// Without cgo there is no libjpeg-turbo: every image takes the reference path.
const haveFast = false

type fastState struct{}

func (fastState) free() {}

func (fastState) resampler() int64 { return 0 }

func (d *Decoder) decodeFast(data []byte, hd *header, p *transform.SamplePlan, layout transform.Layout, out []byte) error {
	panic("unreachable: decodeFast without cgo")
}

func (d *Decoder) decodeFastViews(data []byte, hd *header, ps []transform.SamplePlan, layout transform.Layout, out []byte, offs []int) error {
	panic("unreachable: decodeFastViews without cgo")
}

func (d *Decoder) decodeFormatViews(data []byte, hd *header, ps []transform.SamplePlan, layout transform.Layout, out []byte, offs []int) error {
	panic("unreachable: decodeFormatViews without cgo")
}

// Without cgo the canvas path is resized in Go (resizeCanvasGo).
func (d *Decoder) resizeCanvasFast(dst []byte, p *transform.SamplePlan, src []byte, layout transform.Layout) bool {
	return false
}
