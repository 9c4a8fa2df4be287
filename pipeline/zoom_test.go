package pipeline

import (
	"bytes"
	"errors"
	"image"
	"os"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestExactZoomOutDecode: a zoomed sample resized (the image decoded at its own
// size, padded onto the canvas and resized by torch's kernels) is, on both
// decode paths, torch's kernels on the canvas that Pad then CenterCrop
// make of the same image (test_parity_random_crop.py checks the bytes
// against torchvision's pad and resize); a canvas over the pixel budget
// fails its sample, saying so. Bytes against a reference on one goroutine:
// an exactness test.
func TestExactZoomOutDecode(t *testing.T) {
	exactTest(t)
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	fill := [3]float64{10, 200, 30}
	for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
		for _, c := range decoderKinds {
			zoom := mustTransform(t, layout, ops.Op{Kind: transform.OpRandomZoomOut, P: 1, Args: &transform.ZoomOutArgs{SideRange: [2]float64{1.5, 3}, Filling: ops.Filling{Fill: fill}}},
				ops.Op{Kind: transform.OpResize, Size: [2]int{90, 120}, Args: &transform.ResizeArgs{Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}, ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5})
			d := NewDecoder(c.opts...)
			flips := 0
			for i := range uint64(6) {
				got := make([]byte, zoom.SampleBytes())
				if err := d.Decode(data, zoom, det.Key{Seed: 1, Index: i}, got); err != nil {
					t.Fatal(err)
				}
				p := d.plan.Views[0].Geom
				if !p.Canvas || p.ZoomW*p.ZoomH <= p.SrcW*p.SrcH {
					t.Fatalf("plan %+v: not a canvas", p)
				}
				// The canvas, by the Pad path: HWC, then resampled.
				canvas := mustTransform(t, transform.HWC, ops.Op{Kind: transform.OpPad, Args: &transform.PadArgs{Padding: p.ZoomPad, Filling: ops.Filling{Fill: fill}}}, ops.Op{Kind: transform.OpCenterCrop, Size: [2]int{p.ZoomH, p.ZoomW}})
				pix := make([]byte, canvas.SampleBytes())
				if err := d.Decode(data, canvas, det.Key{}, pix); err != nil {
					t.Fatal(err)
				}
				img := image.NewNRGBA(image.Rect(0, 0, p.ZoomW, p.ZoomH))
				for j := range p.ZoomW * p.ZoomH {
					copy(img.Pix[4*j:], pix[3*j:3*j+3])
				}
				cp := p
				cp.Geom, cp.SrcW, cp.SrcH, cp.CX, cp.CY, cp.CW, cp.CH = transform.CropResize, p.ZoomW, p.ZoomH, 0, 0, p.ZoomW, p.ZoomH
				want := make([]byte, len(got))
				resampleTorch(img, &cp, layout, want)
				if !bytes.Equal(got, want) {
					mx, mean := diffStats(got, want)
					t.Errorf("%s %s key %d: not the Pad path's canvas resized (max %v, mean %v)", c.name, layout, i, mx, mean)
				}
				if p.Flip {
					flips++
				}
			}
			if flips == 0 || flips == 6 {
				t.Errorf("%s %s: %d of 6 flipped", c.name, layout, flips)
			}
			d.Close()
		}
	}
	tr := mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpRandomZoomOut, P: 1, Args: &transform.ZoomOutArgs{SideRange: [2]float64{4, 4}}}, ops.Op{Kind: transform.OpResize, Size: [2]int{8, 8}})
	d := NewDecoder(WithPixelBudget(1 << 20))
	defer d.Close()
	err = d.Decode(data, tr, det.Key{}, make([]byte, tr.SampleBytes()))
	if !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), "RandomZoomOut's canvas") {
		t.Errorf("a canvas over the pixel budget: %v", err)
	}
}

// BenchmarkZoomOutResize: a COCO-sized photo zoomed out (torchvision's
// default side_range, always) and resized to 640x640 (resizeCanvas: with
// cgo, the resampler on the rows of the canvas its taps read).
func BenchmarkZoomOutResize(b *testing.B) {
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []float64{0, 1} {
		b.Run(map[float64]string{0: "not-zoomed", 1: "zoomed"}[p], func(b *testing.B) {
			tr := mustTransform(b, transform.CHW, ops.Op{Kind: transform.OpRandomZoomOut, P: p, Args: &transform.ZoomOutArgs{SideRange: [2]float64{1, 4}}}, ops.Op{Kind: transform.OpResize, Size: [2]int{640, 640}})
			d := NewDecoder()
			defer d.Close()
			out := make([]byte, tr.SampleBytes())
			for i := 0; b.Loop(); i++ {
				if err := d.Decode(data, tr, det.Key{Seed: 1, Index: uint64(i)}, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDetrPreset: the preset "detr" on a photo (459x425,
// testdata/photos/shell/000015.jpg) with three boxes, per sample (the
// canvas path for every sample: the photometric distortion on the image,
// the zoom's canvas, the IoU crop, the resize to 640x640).
func BenchmarkDetrPreset(b *testing.B) { benchPreset(b, "detr") }

// benchPreset decodes the photo of the detection presets' benchmarks with
// its three boxes through preset name, a sample a loop.
func benchPreset(b *testing.B, name string) {
	tr, err := transform.ParseTransform(name, transform.CHW)
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile("../testdata/photos/shell/000015.jpg")
	if err != nil {
		b.Fatal(err)
	}
	d := NewDecoder()
	defer d.Close()
	s := Sample{Data: data, Targets: fixedBoxes{{46, 85, 69, 383}, {138, 106, 367, 298}, {321, 319, 459, 425}}}
	out := make([]byte, tr.SampleBytes())
	for i := 0; b.Loop(); i++ {
		if err := d.DecodeSample(s, tr, det.Key{Seed: 1, Index: uint64(i)}, out); err != nil {
			b.Fatal(err)
		}
	}
}
