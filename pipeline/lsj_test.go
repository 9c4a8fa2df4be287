package pipeline

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestExactLSJDecode: a ScaleJitter and FixedSizeCrop sample (only the crop's
// window of the resized image resampled) is, on both decode paths and
// layouts, the Resize path's whole resized image (torch's kernels) cropped
// at the drawn place, padded on the right and bottom with the fill, and
// flipped when drawn; FixedSizeCrop alone is the decoded image cropped and
// padded. python/tests/test_lsj.py checks the bytes against torchvision. An
// exactness test (one goroutine, bytes against the Resize path).
func TestExactLSJDecode(t *testing.T) {
	exactTest(t)
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	fill := [3]float64{123, 117, 104}
	for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
		for _, c := range decoderKinds {
			for _, ops := range [][]opspkg.Op{lsjOps(300, 240, fill), lsjOps(300, 240, fill)[1:]} {
				tr := mustTransform(t, layout, ops...)
				jitter := slices.ContainsFunc(ops, func(o opspkg.Op) bool { return o.Kind == transform.OpScaleJitter })
				d := NewDecoder(c.opts...)
				kinds := map[string]int{}
				for i := range uint64(8) {
					got := make([]byte, tr.SampleBytes())
					if err := d.Decode(data, tr, det.Key{Seed: 2, Index: i}, got); err != nil {
						t.Fatal(err)
					}
					p := d.plan.Views[0].Geom
					rw, rh := p.SrcW, p.SrcH
					whole := make([]byte, 3*rw*rh)
					if jitter {
						rw, rh = p.RW, p.RH
						rs := mustTransform(t, transform.HWC, opspkg.Op{Kind: transform.OpResize, Size: [2]int{rh, rw}})
						whole = make([]byte, rs.SampleBytes())
						err = d.Decode(data, rs, det.Key{}, whole)
					} else {
						err = d.Decode(data, mustTransform(t, transform.HWC, opspkg.Op{Kind: transform.OpCenterCrop, Size: [2]int{rh, rw}}), det.Key{}, whole)
					}
					if err != nil {
						t.Fatal(err)
					}
					want := make([]byte, len(got))
					for y := range 240 {
						for x := range 240 {
							v := fill
							if x < min(rw, 240) && y < min(rh, 240) {
								o := 3 * ((p.CY+y)*rw + p.CX + x)
								v = [3]float64{float64(whole[o]), float64(whole[o+1]), float64(whole[o+2])}
							}
							ox := x
							if p.Flip {
								ox = 239 - x
							}
							for ch := range 3 {
								if layout == transform.HWC {
									want[3*(y*240+ox)+ch] = byte(v[ch])
								} else {
									want[ch*240*240+y*240+ox] = byte(v[ch])
								}
							}
						}
					}
					if !bytes.Equal(got, want) {
						mx, mean := diffStats(got, want)
						t.Errorf("%s %s %s key %d (%dx%d at %d,%d, flip %v): not the resized image cropped and padded (max %v, mean %v)",
							c.name, layout, opspkg.OpsString(ops), i, rw, rh, p.CX, p.CY, p.Flip, mx, mean)
					}
					kinds[map[bool]string{true: "padded", false: "cropped"}[p.Padded]]++
				}
				if jitter && (kinds["padded"] == 0 || kinds["cropped"] == 0) {
					t.Errorf("%s: 8 keys drew %v", opspkg.OpsString(ops), kinds)
				}
				d.Close()
			}
		}
	}
}

// TestLSJEdges: ScaleJitter and FixedSizeCrop at the edges of their
// arguments, on images of a pixel, a line, a column: NewTransform refuses
// or accepts, a plan is made or fails with ErrUnsupported (a side resized
// to 0), never a panic; a made plan's trace parses back, moves boxes to
// the output's canvas, and small ones decode to their size.
func TestLSJEdges(t *testing.T) {
	sizes := [][2]int{{1, 1}, {1, 3000}, {3000, 1}, {3, 2}, {40, 30}}
	decoded := 0
	for _, target := range []int{1, 2, opspkg.MaxSide} {
		for _, sr := range [][2]float64{{1e-9, 1e-9}, {0.1, 2}, {transform.MaxJitter, transform.MaxJitter}} {
			for _, crop := range []int{1, 17, opspkg.MaxSide} {
				tr, err := transform.NewTransform(transform.CHW, opspkg.Op{Kind: transform.OpScaleJitter, Size: [2]int{target, target}, Args: &transform.ScaleJitterArgs{Scale: sr}},
					opspkg.Op{Kind: transform.OpFixedSizeCrop, Size: [2]int{crop, crop}, Args: &transform.FixedSizeCropArgs{Filling: opspkg.Filling{Fill: [3]float64{255, 0, 7}}}}, opspkg.Op{Kind: opspkg.OpRandomHorizontalFlip, P: 0.5})
				if err != nil {
					t.Fatalf("target %d, scale_range %v, crop %d: %v", target, sr, crop, err)
				}
				for _, wh := range sizes {
					for k := range uint64(4) {
						var p transform.Plan
						if err := tr.Plan(&p, wh[0], wh[1], det.Key{Seed: 9, Index: k}, transform.BoxSource{}); err != nil {
							if !errors.Is(err, errs.Unsupported) {
								t.Fatalf("%dx%d: %v", wh[0], wh[1], err)
							}
							continue
						}
						steps := p.Views[0].Geometry
						if back, err := transform.ParseTrace(transform.AppendTrace(nil, steps)); err != nil || !slices.Equal(back, steps) {
							t.Fatalf("%dx%d: trace %v parsed back as %v (%v)", wh[0], wh[1], steps, back, err)
						}
						tg := &targets.Targets{Instances: transform.Instances{Boxes: [][4]float32{{0, 0, float32(wh[0]), float32(wh[1])}}, Labels: []int64{1}, Crowd: []uint8{0}}}
						if w, h, err := transform.MoveTargets(tg, wh[0], wh[1], steps); err != nil || w != crop || h != crop {
							t.Fatalf("%dx%d: boxes moved to a %dx%d canvas (%v), want %d", wh[0], wh[1], w, h, err, crop)
						}
						if crop <= 17 && wh[0] <= 40 && wh[1] <= 40 && k == 0 {
							out := make([]byte, tr.SampleBytes())
							d := NewDecoder()
							if err := d.Decode(encodePNG(testPicture(wh[0], wh[1])), tr, det.Key{Seed: 9}, out); err != nil {
								t.Fatalf("%dx%d, target %d, scale_range %v, crop %d: %v", wh[0], wh[1], target, sr, crop, err)
							}
							d.Close()
							decoded++
						}
					}
				}
			}
		}
	}
	if decoded == 0 {
		t.Error("no sample decoded")
	}
}

// BenchmarkLSJPreset: the preset "lsj" on a photo (459x425,
// testdata/photos/shell/000015.jpg) with three boxes, per sample: the
// resize's window of up to 1024x1024 resampled, the padding, the flip.
func BenchmarkLSJPreset(b *testing.B) { benchPreset(b, "lsj") }
