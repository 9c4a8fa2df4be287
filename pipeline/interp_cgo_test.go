//go:build cgo

package pipeline

import (
	"bytes"
	"image"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// torchFilters are the filters, every one torch's kernel.
var torchFilters = []struct {
	name   string
	interp transform.Interpolation
	aa     bool
}{
	{"bilinear", transform.InterpBilinear, true},
	{"nearest", transform.InterpNearest, false},
	{"bilinear-noaa", transform.InterpBilinear, false},
	{"bicubic", transform.InterpBicubic, true},
	{"bicubic-noaa", transform.InterpBicubic, false},
}

// identityNRGBA decodes data whole through the fast path at full scale
// with no resampling: libjpeg-turbo's pixels, as the fast path's filters
// see them.
func identityNRGBA(t *testing.T, d *Decoder, data []byte, hd *header) *image.NRGBA {
	t.Helper()
	p := transform.SamplePlan{Geom: transform.CropResize, SrcW: hd.w, SrcH: hd.h, CW: hd.w, CH: hd.h, OutW: hd.w, OutH: hd.h, Antialias: true}
	rgb := make([]byte, 3*hd.w*hd.h)
	if err := d.decodeFast(data, hd, &p, transform.HWC, rgb); err != nil {
		t.Fatal(err)
	}
	img := image.NewNRGBA(image.Rect(0, 0, hd.w, hd.h))
	for i := range hd.w * hd.h {
		copy(img.Pix[4*i:], rgb[3*i:3*i+3])
		img.Pix[4*i+3] = 255
	}
	return img
}

// TestExactTorchFiltersFastMatchGo: turbo.c's torch filters (at full scale) and
// the reference path's Go version of them (resampleTorch) give the same
// bytes from the same decoded pixels, for crops touching every edge, one
// pixel thin, up- and downscaled, flipped, and resize-then-crop plans,
// whose region clip must hold the filter's support. The nearest and
// non-antialiased filters are never DCT-scaled, whatever the scaling.
func TestExactTorchFiltersFastMatchGo(t *testing.T) {
	exactTest(t)
	imgs := fastSynthAndPhotos(t, 2)
	full := NewDecoder(WithDCTScaling(ScaleOff))
	pow2 := NewDecoder()
	defer full.Close()
	defer pow2.Close()
	n := 0
	for _, img := range imgs {
		hd, err := parseHeader(img.data)
		if err != nil {
			t.Fatal(err)
		}
		src := identityNRGBA(t, full, img.data, &hd)
		for i, p := range fastEdgePlans(hd.w, hd.h) {
			layout := transform.Layout(i / 2 % 2)
			for _, f := range torchFilters {
				p.Interp, p.Antialias = f.interp, f.aa
				got := make([]byte, 3*p.OutW*p.OutH)
				if err := full.decodeFast(img.data, &hd, &p, layout, got); err != nil {
					t.Fatal(err)
				}
				want := make([]byte, len(got))
				resampleRef(src, &p, layout, want)
				if !bytes.Equal(got, want) {
					t.Errorf("%s %s crop %d,%d %dx%d -> %dx%d flip=%v %s (resize %dx%d): fast path and resampleTorch differ (MAD %.3f)",
						img.name, f.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, p.Flip, layout, p.RW, p.RH, fastMAD(got, want))
				}
				if !f.aa {
					if err := pow2.decodeFast(img.data, &hd, &p, layout, got); err != nil {
						t.Fatal(err)
					}
					if m := pow2.fast.stats().scaleM; m != 8 {
						t.Errorf("%s %s crop %dx%d -> %dx%d: DCT scale %d/8, want none", img.name, f.name, p.CW, p.CH, p.OutW, p.OutH, m)
					}
				}
				n++
			}
		}
	}
	t.Logf("%d decodes: turbo.c and resampleTorch agree to the byte", n)
}

// TestExactFastSIMDSameFilters: the SIMD and scalar passes agree on the torch
// filters, whose precision varies (14 to 22 bits) and whose bicubic
// weights are negative, at full scale and at DCT scales (ScaleAny's:
// the antialiased filters take them where the crop is large enough).
func TestExactFastSIMDSameFilters(t *testing.T) {
	exactTest(t)
	imgs := fastSynthAndPhotos(t, 1)
	n, scaled := 0, 0
	for _, scaling := range []DCTScaling{ScaleAny} {
		levels := []int{0, 4, 3, 2, 1, -1}
		decs := make([]*Decoder, len(levels))
		for i, l := range levels {
			decs[i] = NewDecoder(WithDCTScaling(scaling))
			knobsOf(decs[i]).SIMDMax = l
			defer decs[i].Close()
		}
		for _, img := range imgs {
			hd, err := parseHeader(img.data)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range fastEdgePlans(hd.w, hd.h) {
				layout := transform.Layout(i / 2 % 2)
				for _, f := range torchFilters {
					p.Interp, p.Antialias = f.interp, f.aa
					var outs [][]byte
					for _, d := range decs {
						out := make([]byte, 3*p.OutW*p.OutH)
						if err := d.decodeFast(img.data, &hd, &p, layout, out); err != nil {
							t.Fatal(err)
						}
						outs = append(outs, out)
					}
					if decs[0].fast.stats().scaleM != 8 {
						scaled++
					}
					for k := 1; k < len(outs); k++ {
						if !bytes.Equal(outs[0], outs[k]) {
							t.Errorf("%s %s crop %d,%d %dx%d -> %dx%d %s: SIMD levels %d and %d differ (MAD %.3f)", img.name, f.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, layout, levels[0], levels[k], fastMAD(outs[0], outs[k]))
						}
					}
					n++
				}
			}
		}
	}
	t.Logf("%d decodes identical at every SIMD level, %d of them DCT-scaled", n, scaled)
	if scaled == 0 {
		t.Error("no decode was DCT-scaled: the scaled antialiased filters went untested")
	}
}

// TestExactFastRegionExactFilters: the region decode gives the bytes of a
// whole-row decode for the torch filters too (their supports are not the
// triangle's: the region must hold every tap).
func TestExactFastRegionExactFilters(t *testing.T) {
	exactTest(t)
	imgs := fastSynthAndPhotos(t, 2)
	region, whole := NewDecoder(WithDCTScaling(ScaleAny)), NewDecoder(WithDCTScaling(ScaleAny))
	defer region.Close()
	defer whole.Close()
	knobsOf(whole).NoRegion = true
	n := 0
	for _, img := range imgs {
		hd, err := parseHeader(img.data)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range fastEdgePlans(hd.w, hd.h) {
			layout := transform.Layout(i / 2 % 2)
			for _, f := range torchFilters {
				p.Interp, p.Antialias = f.interp, f.aa
				a, b := make([]byte, 3*p.OutW*p.OutH), make([]byte, 3*p.OutW*p.OutH)
				if err := region.decodeFast(img.data, &hd, &p, layout, a); err != nil {
					t.Fatal(err)
				}
				if err := whole.decodeFast(img.data, &hd, &p, layout, b); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a, b) {
					t.Errorf("%s %s crop %d,%d %dx%d -> %dx%d: region decode differs from whole-row decode (MAD %.3f)", img.name, f.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, fastMAD(a, b))
				}
				n++
			}
		}
	}
	t.Logf("%d region decodes identical to whole-row decodes", n)
}

// TestFastZeroAllocsFilters: the torch filters allocate nothing in Go
// either.
func TestFastZeroAllocsFilters(t *testing.T) {
	allocTest(t)
	_, files := fastPhotos(t, 8)
	for _, f := range torchFilters {
		tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}, Args: &transform.RRCArgs{Resampling: ops.Resampling{Interp: f.interp, NoAntialias: !f.aa}}})
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder()
		out := make([]byte, tr.SampleBytes())
		i := 0
		allocs := testing.AllocsPerRun(30, func() {
			if err := d.Decode(files[i%len(files)], tr, det.Key{Index: uint64(i)}, out); err != nil {
				t.Fatal(err)
			}
			i++
		})
		d.Close()
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per decode, want 0", f.name, allocs)
		}
	}
}

// TestExactFastMatchesReferenceFilters bounds the fast path's difference from
// the reference path (image/jpeg's pixels, resampled by resampleTorch) for
// the torch filters on photos, as TestExactFastMatchesReference does for the
// default filter: the difference is the decoders' (libjpeg's triangle
// chroma upsampling against image/jpeg's replication, IDCT rounding), and
// nearest, which copies pixels, shows it unfiltered. An exactness test:
// arithmetic on one goroutine.
func TestExactFastMatchesReferenceFilters(t *testing.T) {
	exactTest(t)
	names, files := fastPhotos(t, 16)
	fast, ref := NewDecoder(), NewDecoder(WithReference(true))
	defer fast.Close()
	defer ref.Close()
	for _, f := range torchFilters {
		tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{160, 192}, Args: &transform.RRCArgs{Resampling: ops.Resampling{Interp: f.interp, NoAntialias: !f.aa}}},
			ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		worst, sum := 0.0, 0.0
		for i, data := range files {
			a, b := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
			k := det.Key{Seed: 5, Index: uint64(i)}
			if err := fast.Decode(data, tr, k, a); err != nil {
				t.Fatal(err)
			}
			if err := ref.Decode(data, tr, k, b); err != nil {
				t.Fatal(err)
			}
			m := fastMAD(a, b)
			sum, worst = sum+m, max(worst, m)
			if m > fastMADFancyPhoto {
				t.Errorf("%s %s: MAD %.3f over the bound %.1f", f.name, names[i], m, fastMADFancyPhoto)
			}
		}
		t.Logf("%s: %d photos, MAD mean %.3f max %.3f", f.name, len(files), sum/float64(len(files)), worst)
	}
}
