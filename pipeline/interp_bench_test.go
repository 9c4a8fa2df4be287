//go:build cgo

package pipeline

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// BenchmarkInterp decodes the repository's photos held in memory with
// RandomResizedCrop(224) and each filter, one image per op (each with its
// own key), into a reused buffer: decode plus resampling, the production
// defaults otherwise (ScalePow2: the antialiased filters may decode at a
// DCT scale, nearest and the non-antialiased ones never do). Compare the
// variants' ns/op (or cpu-ns/op on a shared machine) with bilinear's.
func BenchmarkInterp(b *testing.B) {
	_, files := fastPhotos(b, 0)
	for _, f := range []struct {
		name   string
		interp transform.Interpolation
		noAA   bool
	}{
		{"bilinear", transform.InterpBilinear, false},
		{"bicubic", transform.InterpBicubic, false},
		{"nearest", transform.InterpNearest, false},
		{"bilinear-noaa", transform.InterpBilinear, true},
		{"bicubic-noaa", transform.InterpBicubic, true},
	} {
		tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}, Args: &transform.RRCArgs{Resampling: ops.Resampling{Interp: f.interp, NoAntialias: f.noAA}}},
			ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("rrc/224/"+f.name, func(b *testing.B) {
			d := NewDecoder()
			defer d.Close()
			out := make([]byte, tr.SampleBytes())
			b.ReportAllocs()
			i, start := 0, benchCPUTime()
			for b.Loop() {
				if err := d.Decode(files[i%len(files)], tr, det.Key{Seed: 1, Index: uint64(i)}, out); err != nil {
					b.Fatal(err)
				}
				i++
			}
			benchReportCPU(b, start, i)
		})
	}
}
