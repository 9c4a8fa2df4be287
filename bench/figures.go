package bench

// The figures of the README and BENCHMARKS.md drawn from numbers measured
// before (each figure says where and when: BENCHMARKS.md has the runs and
// their commands). They are data, not runs: redrawing one measures
// nothing. TestDocFigures redraws each and compares it with the PNG in
// bench/plots; -update rewrites them:
//
//	go test ./bench -run TestDocFigures -update

import (
	"image"
	"image/color"
)

// docFigure is a figure that renders to an image.
type docFigure interface{ render() *image.RGBA }

var (
	stokerBlue = color.RGBA{31, 119, 180, 255}
	baseOrange = color.RGBA{255, 127, 14, 255}
	baseGrey   = color.RGBA{127, 127, 127, 255}
	baseRed    = color.RGBA{214, 39, 40, 255}
)

// docFigures are the figures by file name under bench/plots.
func docFigures() map[string]docFigure {
	return map[string]docFigure{
		"headline.png":        headlineFigure(),
		"gpu-makers.png":      gpuMakersFigure(),
		"pipeline-epochs.png": pipelineEpochsFigure(),
		"scale-out-16.png":    scaleOutFigure(),
		"same-host.png":       sameHostFigure(),
		"memory-return.png":   memoryReturnFigure(),
		"object-storage.png":  objectStorageFigure(),
	}
}

// headlineFigure: the headline figures, measured in November 2026 on an
// H100 host (BENCHMARKS.md, "How many CPU cores does a GPU need?").
func headlineFigure() *barFigure {
	return &barFigure{
		Title: "One H100 training ResNet-50 (bf16, batch 256), fed from its host's CPU cores",
		Note:  "measured November 2026: NVIDIA H100 80GB, 16 Xeon cores; photos not in this repository",
		Panels: []barPanel{
			{Title: "training, images/s", Ref: &barRef{Value: 3948, Label: "GPU ceiling 3,948"}, Max: 4500, Bars: []bar{
				{Label: "stoker, 3 cores", Value: 3916, Color: stokerBlue},
				{Label: "DataLoader (decode_jpeg + v2), 16 cores", Value: 3200, Text: "3,200 (82%)", Color: baseOrange},
				{Label: "decode_jpeg + v2 on the GPU itself", Value: 1969, Color: baseRed},
			}},
			{Title: "into GPU memory from 16 cores, images/s", Bars: []bar{
				{Label: "stoker", Value: 21188, Text: "21,188 (5.4 H100s)", Color: stokerBlue},
				{Label: "DataLoader", Value: 5919, Color: baseOrange},
			}},
		},
	}
}

// gpuMakersFigure: bench/gpu_train.py on the H100 at 59c4ea1 (2026-11-22).
func gpuMakersFigure() *plotFigure {
	ceiling := []float64{3953, 3953}
	return &plotFigure{
		Title:  "ResNet-50 on one H100: images/s by workers of 2 cores each (59c4ea1, 2026-11-22)",
		XLabel: "makers (workers of 2 cores behind a --workers 0 coordinator)",
		XMin:   0, XMax: 7, Width: 900,
		Panels: []plotPanel{{YLabel: "images/s", YMin: 0, YMax: 4500, Series: []plotSeries{
			{Name: "stoker", X: []float64{1, 2, 3, 4, 6}, Y: []float64{1559, 3312, 3893, 3897, 3896}, Color: stokerBlue},
			{Name: "GPU ceiling", X: []float64{0, 7}, Y: ceiling, Color: baseGrey, Dashed: true},
		}}},
	}
}

// pipelineEpochsFigure: one core, epoch by epoch, at b1f956f on the 2-core
// Zen 1 (2026-11-22): medians of 3 interleaved pairs; torchvision's from
// the 7-round run of the same day.
func pipelineEpochsFigure() *plotFigure {
	epochs := []float64{1, 2, 3, 4, 5, 7, 10}
	flat := func(v float64) []float64 { return []float64{v, v} }
	return &plotFigure{
		Title:  "One core, images/s by epoch: 1000 photos of 300-500 px, 2-core Zen 1, b1f956f (2026-11-22)",
		XLabel: "epoch",
		XMin:   1, XMax: 10, Width: 900,
		Panels: []plotPanel{{YLabel: "images/s", YMin: 0, YMax: 2000, Series: []plotSeries{
			{Name: "stoker --coef-budget", X: epochs, Y: []float64{1068, 1092, 1441, 1654, 1722, 1854, 1909}, Color: color.RGBA{23, 190, 207, 255}},
			{Name: "stoker (default)", X: epochs, Y: []float64{1109, 1256, 1247, 1263, 1310, 1288, 1251}, Color: stokerBlue},
			{Name: "3x torchvision.io+v2", X: []float64{1, 10}, Y: flat(3 * 403), Color: baseGrey, Dashed: true},
			{Name: "torchvision.io + v2", X: []float64{1, 10}, Y: flat(403), Color: baseOrange},
			{Name: "PIL + torchvision", X: []float64{1, 10}, Y: flat(298), Color: baseRed},
		}}},
	}
}

// scaleOutFigure: bench scale on the H100 host's 16 cores, at 59c4ea1
// against db6aaf6 (2026-11-22), medians of 2 rounds.
func scaleOutFigure() *plotFigure {
	peers := []float64{1, 2, 4, 7}
	return &plotFigure{
		Title:  "Scale-out on 16 Xeon cores: images/s by peers of one core each (59c4ea1, 2026-11-22)",
		XLabel: "peers (worker processes, one decode goroutine each)",
		XMin:   0, XMax: 8, Width: 900,
		Panels: []plotPanel{{YLabel: "images/s", YMin: 0, YMax: 7000, Series: []plotSeries{
			{Name: "linear (1 server x n)", X: []float64{0, 8}, Y: []float64{0, 8 * 866}, Color: baseGrey, Dashed: true},
			{Name: "stoker", X: peers, Y: []float64{864, 1804, 3438, 5307}, Color: stokerBlue},
			{Name: "before zero-copy", X: peers, Y: []float64{757, 1691, 3119, 5054}, Color: baseOrange},
		}}},
	}
}

// sameHostFigure: bench/e2e.py on the 2-core VM, no GPU (2026-11-22).
func sameHostFigure() *barFigure {
	three := func(shm, grpc, dl float64, texts ...string) []bar {
		bs := []bar{
			{Label: "stoker, shared memory", Value: shm, Color: stokerBlue},
			{Label: "stoker, gRPC chunks", Value: grpc, Color: color.RGBA{23, 190, 207, 255}},
			{Label: "DataLoader, 2 workers", Value: dl, Color: baseOrange},
		}
		for i, t := range texts {
			bs[i].Text = t
		}
		return bs
	}
	return &barFigure{
		Title: "Batches into a Python trainer on the same machine",
		Note:  "measured 2026-11-22 on a 2-core VM, no GPU (bench/e2e.py, medians of 5 interleaved rounds)",
		Panels: []barPanel{
			{Title: "delivery alone, batch 256 (38.5 MB): GB/s into Python", Bars: three(6.85, 0.95, 1.17)},
			{Title: "end to end (decoding the photos), batch 64: images/s", Bars: three(1746, 1360, 595)},
			{Title: "end to end: the trainer's CPU-seconds per 1000 images", Bars: three(0.018, 0.135, 0.043)},
		},
	}
}

// memoryReturnFigure: bench load --idle on the 2-core VM (2026-11-22),
// before and after the server returns memory.
func memoryReturnFigure() *plotFigure {
	t := []float64{2, 10, 60, 110, 150}
	return &plotFigure{
		Title:  "A server's RSS after four 38.5 MB-batch streams end (2-core VM, 2026-11-22)",
		XLabel: "seconds since the last stream ended",
		XMin:   0, XMax: 150, Width: 900,
		Panels: []plotPanel{{YLabel: "RSS, MiB", YMin: 0, YMax: 1400, Series: []plotSeries{
			{Name: "before", X: t, Y: []float64{1256, 1256, 1256, 1256, 852}, Color: baseOrange},
			{Name: "stoker now", X: t, Y: []float64{866, 32, 35, 35, 34}, Color: stokerBlue},
		}}},
	}
}

// objectStorageFigure: the object-storage benchmarks on the 2-core VM
// against versitygw on loopback (2026-11-23; BenchmarkOpenSourceS3 at
// 9fff904, BenchmarkFetcherS3 at d5f3be2).
func objectStorageFigure() *barFigure {
	return &barFigure{
		Title: "A dataset in object storage (S3 on loopback: versitygw)",
		Note:  "measured 2026-11-23 on a 2-core VM (go test -bench, pipeline and pipeline/source)",
		Panels: []barPanel{
			{Title: "serve's start on a 100,000-object bucket: seconds", Bars: []bar{
				{Label: "from a manifest (stoker index)", Value: 0.19, Color: stokerBlue},
				{Label: "listing the bucket", Value: 6.3, Color: baseOrange},
			}},
			{Title: "reads with 30 ms per request: MB/s", Max: 100, Bars: []bar{
				{Label: "no added latency", Value: 82, Color: baseGrey},
				{Label: "30 ms, 128 reads in flight (now)", Value: 82, Color: stokerBlue},
				{Label: "30 ms, 32 reads in flight (before)", Value: 61, Text: "58-64", Color: baseOrange},
			}},
		},
	}
}
