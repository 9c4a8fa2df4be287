package pipeline

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestTraceIsTheDecodersPlan: Transform.TraceBoxes, the plan drawn
// without decoding (what `stoker ops draw` prints and the sampling tests
// count), is the trace of the plan the Decoder executes on a real decode
// of the same sample, byte for byte, errors alike: over every preset, the
// recipes the tests share, a stop_epoch's epochs before and after, a fast
// decode mode, several views, a crop that comes out empty, and a Mosaic
// (the yolo preset's) of the image and itself.
func TestTraceIsTheDecodersPlan(t *testing.T) {
	trs := map[string]*transform.Transform{}
	for _, name := range transform.PresetNames() {
		tr, err := transform.ParseTransform(name, transform.CHW)
		if err != nil {
			t.Fatal(err)
		}
		trs[name] = tr
	}
	trs["recipe"] = mustTransform(t, transform.HWC, recipeOps()...)
	trs["lsj"] = mustTransform(t, transform.CHW, lsjOps(96, 64, [3]float64{1, 2, 3})...)
	trs["seg"] = mustTransform(t, transform.CHW, segOps(40, 160, 64, [3]float64{1, 2, 3})...)
	trs["letterbox"] = mustTransform(t, transform.CHW, letterboxRecipe(t)...)
	for name, op := range tvPolicies() {
		trs[name] = mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}}, ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5}, op)
	}
	stop, err := trs["detr"].WithStopEpoch(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	trs["detr stopped at 1"] = stop
	trs["detr fast"] = trs["detr"].WithDecode(transform.DecodeFast)
	trs["empty crop"] = mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &transform.RRCArgs{Ratio: [2]float64{3, 4}}})
	views, err := transform.NewViews(transform.CHW, transform.ViewGroup{Count: 2, Ops: recipeOps()},
		transform.ViewGroup{Count: 1, Ops: []ops.Op{{Kind: transform.OpCenterCrop, Size: [2]int{40, 61}}, {Kind: ops.OpNormalize, Args: &ops.NormalizeArgs{Mean: [3]float64{0.5, 0.4, 0.3}, Std: [3]float64{0.2, 0.25, 0.3}}}}})
	if err != nil {
		t.Fatal(err)
	}
	trs["views"] = views
	// Small sources (the decode's cost is not what is tested: the pure-Go
	// build and -race run this too): a color photo-like gradient, a gray
	// one standing, and a 1x10 image, whose RandomResizedCrop fallback
	// crop is empty.
	var files [][]byte
	for _, img := range []image.Image{gradient(96, 72), image.NewGray(image.Rect(0, 0, 72, 96)), image.NewGray(image.Rect(0, 0, 1, 10))} {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, nil); err != nil {
			t.Fatal(err)
		}
		files = append(files, b.Bytes())
	}
	boxes := fixedBoxes{{4, 6, 40, 50}, {50, 20, 70, 60}, {2, 2, 8, 10}}
	d := NewDecoder()
	defer d.Close()
	for name, tr := range trs {
		compared, mosaics, refused := 0, 0, 0
		for i := range uint64(8) {
			for _, data := range files {
				hd, err := parseHeader(data)
				if err != nil {
					t.Fatal(err)
				}
				k := det.Key{Seed: 5, Epoch: i % 3, Index: i}
				want, err := tr.TraceBoxes(hd.w, hd.h, k, boxes)
				s := Sample{Data: data, Targets: boxes}
				if idx := tr.PartnersOf(k, 1); idx != nil { // a Mosaic of the image and itself
					mosaics++
					s.Partners, s.PartnerFiles = idx, make([][]byte, len(idx))
					for j := range s.PartnerFiles {
						s.PartnerFiles[j] = data
					}
				}
				err2 := d.DecodeSample(s, tr, k, make([]byte, tr.SampleBytes()))
				var got []byte
				if err2 == nil {
					got = d.AppendTrace(nil)
				}
				if !bytes.Equal(got, want) || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
					t.Fatalf("%s, %dx%d, key %+v: the decode's trace %s (%v), the plan's %s (%v)", name, hd.w, hd.h, k, got, err2, want, err)
				}
				compared++
				if err != nil {
					refused++
				}
			}
		}
		bad := compared == 0 || refused == compared || name == "yolo" && mosaics == 0
		if name == "empty crop" {
			bad = refused == 0 // the 1x10 image's crops are empty
		}
		if bad {
			t.Errorf("%s: %d traces compared, %d of them refused (%d Mosaic draws)", name, compared, refused, mosaics)
		}
	}
}

// TestFillTraces: a batch asked for traces carries each sample's: the
// geometry first (its crop and size), then the steps, then normalize; a
// padded sample carries the trace of the sample it copies.
func TestFillTraces(t *testing.T) {
	files := goldenJPEGs()
	files = append(files, []byte("not an image"))
	ds := memDataset{files: files}
	tr := mustTransform(t, transform.CHW, recipeOps()...)
	e := NewExecutor(2)
	defer e.Close()
	idx := make([]int64, len(files))
	for i := range idx {
		idx[i] = int64(i)
	}
	b := &Batch{Trace: true}
	if err := e.Fill(context.Background(), ds, tr, 5, 0, idx, PadFromBatch, b); err != nil {
		t.Fatal(err)
	}
	if len(b.Traces) != b.N || b.N != len(files) || len(b.Errors) != 1 {
		t.Fatalf("%d traces, %d samples, %d errors", len(b.Traces), b.N, len(b.Errors))
	}
	for i, js := range b.Traces {
		steps, err := transform.ParseTrace(js)
		if err != nil {
			t.Fatalf("sample %d: %v\n%s", i, err, js)
		}
		if steps[0].Fn != fn.ResizedCrop || steps[0].I[4] != 32 || steps[0].I[5] != 24 || steps[0].Interp != transform.InterpBicubic {
			t.Errorf("sample %d: the trace starts with %+v, want resized_crop to 32x24 bicubic", i, steps[0])
		}
		if steps[len(steps)-1].Fn != fn.Normalize {
			t.Errorf("sample %d: the trace ends with %s, want normalize", i, steps[len(steps)-1].Fn)
		}
	}
	bad := len(files) - 1
	for i := range bad {
		if b.Indices[i] == b.Indices[bad] && string(b.Traces[i]) != string(b.Traces[bad]) {
			t.Errorf("the padded slot's trace differs from the sample it copies")
		}
	}
	// Without Trace, no traces.
	b2 := &Batch{}
	if err := e.Fill(context.Background(), ds, tr, 5, 0, idx[:3], PadFromBatch, b2); err != nil || len(b2.Traces) != 0 {
		t.Errorf("untraced batch: %v, %d traces", err, len(b2.Traces))
	}
}

// gradient is a w x h RGB image of smooth gradients.
func gradient(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(255 * x / w), uint8(255 * y / h), uint8(128 + 64*(x+y)/(w+h)), 255})
		}
	}
	return img
}
