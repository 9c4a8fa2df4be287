package pipeline

import (
	"bytes"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestExactSegDecode: a sample of the segmentation references' geometry
// (RandomResize, a flip, PadIfSmaller, RandomCrop; only the crop's window
// of the resized image resampled, the flip before the padding made as the
// mirrored crop) is, on both decode paths, the Resize path's whole resized
// image through the rest of its own trace's steps (horizontal_flip, pad,
// crop) by the kernels: what torchvision replays. Each draw kind (flipped
// or not, padded or not) is met; with the flip after the RandomCrop (fused
// as every geometry's), and without PadIfSmaller (RandomCrop's
// pad_if_needed), the same; an HWC output is the same pixels
// interleaved. python/tests/test_segref.py checks the bytes
// against torchvision.
func TestExactSegDecode(t *testing.T) {
	exactTest(t)
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg") // 334x285
	if err != nil {
		t.Fatal(err)
	}
	fill := [3]float64{123, 117, 104}
	seg := segOps(100, 400, 240, fill)
	after := append(append([]opspkg.Op{seg[0]}, seg[2:]...), seg[1]) // the flip after the crop
	needed := []opspkg.Op{seg[0], seg[1], {Kind: transform.OpRandomCrop, Size: [2]int{240, 200}, Args: &transform.RandomCropArgs{PadIfNeeded: true, Filling: opspkg.Filling{Fill: fill}}}}
	for _, c := range decoderKinds {
		for _, ops := range [][]opspkg.Op{seg, after, needed} {
			tr, trHWC := mustTransform(t, transform.CHW, ops...), mustTransform(t, transform.HWC, ops...)
			d := NewDecoder(c.opts...)
			kinds := map[[2]bool]int{}
			for i := range uint64(24) {
				got := make([]byte, tr.SampleBytes())
				if err := d.Decode(data, tr, det.Key{Seed: 3, Index: i}, got); err != nil {
					t.Fatal(err)
				}
				trace := d.AppendTrace(nil)
				steps, err := transform.ParseTrace(trace)
				if err != nil {
					t.Fatal(err)
				}
				p := d.plan.Views[0].Geom
				if steps[0].Fn != fn.Resize || steps[0].I[4] != p.RH || steps[0].I[5] != p.RW {
					t.Fatalf("%s key %d: trace %v does not start with the plan's resize to %dx%d", opspkg.OpsString(ops), i, steps, p.RW, p.RH)
				}
				whole := make([]byte, 3*p.RW*p.RH)
				if err := d.Decode(data, mustTransform(t, transform.CHW, opspkg.Op{Kind: transform.OpResize, Size: [2]int{p.RH, p.RW}}), det.Key{}, whole); err != nil {
					t.Fatal(err)
				}
				want, w, h := replayCHW(t, whole, p.RW, p.RH, steps[1:])
				oh, ow := tr.Size()
				if w != ow || h != oh || !bytes.Equal(got, want) {
					mx, mean := diffStats(got, want[:min(len(want), len(got))])
					t.Errorf("%s %s key %d (%dx%d, trace %s): not the resized image through its trace (%dx%d; max %v, mean %v)",
						c.name, opspkg.OpsString(ops), i, p.RW, p.RH, trace, w, h, mx, mean)
				}
				kinds[[2]bool{p.Flip, p.Padded}]++
				// HWC: the same pixels, interleaved.
				hwc := make([]byte, tr.SampleBytes())
				if err := d.Decode(data, trHWC, det.Key{Seed: 3, Index: i}, hwc); err != nil {
					t.Fatal(err)
				}
				for ch := range 3 {
					for px := range ow * oh {
						if hwc[3*px+ch] != got[ch*ow*oh+px] {
							t.Fatalf("%s %s key %d: HWC pixel %d channel %d is %d, CHW's %d", c.name, opspkg.OpsString(ops), i, px, ch, hwc[3*px+ch], got[ch*ow*oh+px])
						}
					}
				}
			}
			if len(kinds) != 4 {
				t.Errorf("%s %s: 24 keys drew only %v of (flipped, padded)", c.name, opspkg.OpsString(ops), kinds)
			}
			d.Close()
		}
	}
}

// replayCHW runs a trace's horizontal_flip, pad and crop steps on a w x h
// CHW image, as torchvision's functional ops do (pad with the step's
// fill; crop past the image with zeros).
func replayCHW(t *testing.T, pix []byte, w, h int, steps []fn.Step) ([]byte, int, int) {
	t.Helper()
	at := func(c, x, y int) byte { return pix[(c*h+y)*w+x] }
	for _, st := range steps {
		var nw, nh int
		var f func(c, x, y int) byte
		switch st.Fn {
		case fn.HorizontalFlip:
			nw, nh = w, h
			f = func(c, x, y int) byte { return at(c, w-1-x, y) }
		case fn.Pad:
			l, tp := st.I[0], st.I[1]
			nw, nh = w+l+st.I[2], h+tp+st.I[3]
			f = func(c, x, y int) byte {
				if x < l || y < tp || x >= l+w || y >= tp+h {
					return byte(st.Fill[c])
				}
				return at(c, x-l, y-tp)
			}
		case fn.Crop:
			top, left := st.I[0], st.I[1]
			nw, nh = st.I[3], st.I[2]
			f = func(c, x, y int) byte {
				if x+left < 0 || y+top < 0 || x+left >= w || y+top >= h {
					return 0
				}
				return at(c, x+left, y+top)
			}
		default:
			t.Fatalf("step %v: not a flip, pad or crop", st)
		}
		out := make([]byte, 3*nw*nh)
		for c := range 3 {
			for y := range nh {
				for x := range nw {
					out[(c*nh+y)*nw+x] = f(c, x, y)
				}
			}
		}
		pix, w, h = out, nw, nh
		at = func(c, x, y int) byte { return pix[(c*h+y)*w+x] }
	}
	return pix, w, h
}

// BenchmarkSegrefPreset is the segref preset on a 459x425 photo: its
// RandomResize draws a shorter side of 260 to 1039, and only the 480x480
// crop's window of it is resampled.
func BenchmarkSegrefPreset(b *testing.B) { benchPreset(b, "segref") }
