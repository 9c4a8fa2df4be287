//go:build cgo

package codec

import (
	"bytes"
	"errors"
	"image/jpeg"
	"image/png"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// whole is the geometry of a view of the whole w x h source at outW x
// outH pixels.
func whole(w, h, outW, outH, interp int, antialias bool) Geometry {
	return Geometry{
		Box:  Box{W: float64(w), H: float64(h)},
		Clip: Clip{X1: w, Y1: h},
		SX:   Span{In: w, Out: outW}, SY: Span{In: h, Out: outH},
		OutW: outW, OutH: outH, Interp: interp, Antialias: antialias,
	}
}

func newScratch(t *testing.T) *Scratch {
	t.Helper()
	s, err := NewScratch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Free)
	return s
}

// TestScratchPNGExact: a PNG decoded at its own size with the nearest
// filter is its pixels, planar (CHW) and interleaved (HWC).
func TestScratchPNGExact(t *testing.T) {
	const w, h = 37, 23
	img := picture(w, h)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	s := newScratch(t)
	for _, hwc := range []bool{false, true} {
		out := make([]byte, 3*w*h)
		s.Set(&Job{SrcW: w, SrcH: h, HWC: hwc}, []Geometry{whole(w, h, w, h, 1, false)}, []int{0}, len(out))
		if err := s.Err(s.DecodePNG(buf.Bytes(), out, nil)); err != nil {
			t.Fatalf("hwc %v: %v", hwc, err)
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				p := img.RGBAAt(x, y)
				for c, v := range []uint8{p.R, p.G, p.B} {
					i := c*w*h + y*w + x
					if hwc {
						i = (y*w+x)*3 + c
					}
					if out[i] != v {
						t.Fatalf("hwc %v: pixel (%d,%d) channel %d is %d, want %d", hwc, x, y, c, out[i], v)
					}
				}
			}
		}
	}
}

// TestScratchSIMDSame: a JPEG resized (bilinear, antialiased, at a DCT
// scale) is the same bytes at every SIMD level the CPU has, with none and
// at the default level (SIMDMax 0: SIMDDefault).
func TestScratchSIMDSame(t *testing.T) {
	const w, h = 160, 120
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, picture(w, h), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	s := newScratch(t)
	var want []byte
	for level := -1; level <= SIMDBest(); level++ {
		out := make([]byte, 3*40*30)
		j := Job{SrcW: w, SrcH: h, Comps: 3, MaxScans: 100, MaxMemory: 64 << 20, Knobs: Knobs{SIMDMax: level}}
		s.Set(&j, []Geometry{whole(w, h, 40, 30, 0, true)}, []int{0}, len(out))
		if err := s.Err(s.Decode(buf.Bytes(), out, nil, nil)); err != nil {
			t.Fatalf("SIMD level %d: %v", level, err)
		}
		if st := s.Stats(); st.ScaleM == 8 || (level > 0 && st.SIMD != level) || (level < 0 && st.SIMD != 0) || (level == 0 && st.SIMD != SIMDDefault()) {
			t.Errorf("SIMD level %d: stats %+v: want a DCT scale under 8/8 and the level asked for", level, st)
		}
		if want == nil {
			want = out
		} else if !bytes.Equal(out, want) {
			t.Errorf("SIMD level %d: other bytes than with none", level)
		}
	}
	t.Logf("levels none and 1..%d and the default (%d): the same bytes", SIMDBest(), SIMDDefault())
}

// TestSIMDDefault: decodes use the CPU's best SIMD level, but AVX2 (3) at
// most on an Intel CPU (its vendor read from /proc/cpuinfo where there is
// one).
func TestSIMDDefault(t *testing.T) {
	best, def := SIMDBest(), SIMDDefault()
	if def != best && (def != 3 || best <= 3) {
		t.Fatalf("default level %d, best %d: want the best, or 3 where the best is over 3", def, best)
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Logf("no /proc/cpuinfo (%v): the vendor not checked; best %d, default %d", err, best, def)
		return
	}
	intel := bytes.Contains(info, []byte("GenuineIntel"))
	if (intel && best > 3 && def != 3) || (!intel && def != best) {
		t.Fatalf("Intel %v, best level %d: default %d", intel, best, def)
	}
	t.Logf("Intel %v: best level %d, default %d", intel, best, def)
}

// TestSIMDViews: at the default level (SIMDMax 0) a job of one or two
// views decodes at SIMDDefault, one of three or more at SIMDBest (their
// resampling outweighs the decode: turbo.c), each the same bytes as at
// every other level.
func TestSIMDViews(t *testing.T) {
	const w, h = 160, 120
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, picture(w, h), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	s := newScratch(t)
	for _, n := range []int{1, 2, 3, 4} {
		var want []byte
		for _, level := range []int{0, -1, SIMDBest()} {
			gs := make([]Geometry, n)
			offs := make([]int, n)
			for v := range gs {
				gs[v] = whole(w, h, 40+8*v, 30, 0, true)
				if v > 0 {
					offs[v] = offs[v-1] + 3*gs[v-1].OutW*gs[v-1].OutH
				}
			}
			out := make([]byte, offs[n-1]+3*gs[n-1].OutW*gs[n-1].OutH)
			j := Job{SrcW: w, SrcH: h, Comps: 3, MaxScans: 100, MaxMemory: 64 << 20, Knobs: Knobs{SIMDMax: level}}
			s.Set(&j, gs, offs, len(out))
			if err := s.Err(s.Decode(buf.Bytes(), out, nil, nil)); err != nil {
				t.Fatalf("%d views, SIMD level %d: %v", n, level, err)
			}
			if level == 0 {
				lv := SIMDDefault()
				if n >= 3 {
					lv = SIMDBest()
				}
				if got := s.Stats().SIMD; got != lv {
					t.Errorf("%d views at the default level: level %d, want %d", n, got, lv)
				}
			}
			if want == nil {
				want = out
			} else if !bytes.Equal(out, want) {
				t.Errorf("%d views: SIMD level %d makes other bytes than the default", n, level)
			}
		}
	}
}

// TestScratchOutputLength: C is told the output buffer's length and
// refuses a view that would write past it, or a job without views,
// whatever the caller checked before.
func TestScratchOutputLength(t *testing.T) {
	const w, h = 64, 48
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, picture(w, h), nil); err != nil {
		t.Fatal(err)
	}
	s := newScratch(t)
	j := Job{SrcW: w, SrcH: h, Comps: 3, MaxScans: 100, MaxMemory: 64 << 20}
	g := []Geometry{whole(w, h, 32, 24, 0, true)}
	out := make([]byte, 3*32*24+8)
	for _, tc := range []struct {
		name   string
		gs     []Geometry
		off    int
		outLen int
		want   error
	}{
		{"fits", g, 0, 3 * 32 * 24, nil},
		{"fits at an offset", g, 8, len(out), nil},
		{"one byte short", g, 0, 3*32*24 - 1, errs.Unsupported},
		{"past the end at an offset", g, 9, len(out), errs.Unsupported},
		{"a negative offset", g, -1, len(out), errs.Unsupported},
		{"no views", nil, 0, len(out), errs.Unsupported},
	} {
		s.Set(&j, tc.gs, []int{tc.off}, tc.outLen)
		err := s.Err(s.Decode(buf.Bytes(), out, nil, nil))
		if (tc.want == nil) != (err == nil) || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
}

// TestVersions: the headers built against are libjpeg's, and the SIMD
// level is one the resampler knows.
func TestVersions(t *testing.T) {
	if _, lib := TurboVersions(); lib < 62 {
		t.Errorf("JPEG_LIB_VERSION %d: want libjpeg's API 6.2 or later", lib)
	}
	if l := SIMDBest(); l < 0 || l > 5 {
		t.Errorf("SIMDBest %d: want 0..5", l)
	}
	if JPEGLinked != "shared" && JPEGLinked != "static" {
		t.Errorf("JPEGLinked %q", JPEGLinked)
	}
}
