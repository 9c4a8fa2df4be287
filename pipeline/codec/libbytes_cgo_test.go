//go:build cgo

package codec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/errs"
	"github.com/stoker-dev/stoker/pipeline/internal/jpegenc"
)

// libFiles are JPEGs to bound libjpeg's memory over: the committed photos
// and odd files, and libjpeg's own of every sampling, baseline and
// progressive, small and 2000x1500 (a progressive one's coefficients
// whole: 18 MB at 4:4:4).
func libFiles(t *testing.T) (names []string, files [][]byte) {
	t.Helper()
	for _, glob := range []string{"../../testdata/photos/*/*.jpg", "../../testdata/odd/*.jpg"} {
		paths, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			names, files = append(names, strings.TrimPrefix(p, "../../")), append(files, data)
		}
	}
	if len(files) < 10 {
		t.Fatalf("only %d committed JPEGs found", len(files))
	}
	for _, sz := range [][2]int{{333, 251}, {17, 9}, {2000, 1500}} {
		for _, s := range [][2]int{{1, 1}, {2, 1}, {2, 2}, {1, 2}, {4, 1}} {
			for _, prog := range []bool{false, true} {
				names = append(names, fmt.Sprintf("libjpeg %dx%d %dx%d progressive=%v", sz[0], sz[1], s[0], s[1], prog))
				files = append(files, encodePicture(t, sz[0], sz[1], jpegenc.Options{Quality: 90, HS: s[0], VS: s[1], Progressive: prog}))
			}
		}
	}
	return names, files
}

// TestLibBytesBound: what libjpeg's own allocations held at most (counted
// by memlim.c's wrapped memory manager), decoding each of libFiles whole
// at full scale (its most: no DCT scaling, every row) with fancy and with
// merged upsampling, and transcoding the progressive ones, is within
// Header.LibBytes, the decode capped at it; and for the large
// progressive files not absurdly less (within 1.25x: the coefficients
// are most of it). The ratios are logged.
func TestLibBytesBound(t *testing.T) {
	names, files := libFiles(t)
	s := newScratch(t)
	for i, data := range files {
		hd, err := ParseHeader(data)
		if err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		if hd.Format != FormatJPEG {
			continue
		}
		if hd.Samp[0] == 0 {
			t.Fatalf("%s: sampling factors not read", names[i])
		}
		bound := hd.LibBytes()
		var peak int64
		for _, merged := range []bool{false, true} {
			ow, oh := max(hd.W/3, 1), max(hd.H/3, 1)
			out := make([]byte, 3*ow*oh)
			s.Set(&Job{SrcW: hd.W, SrcH: hd.H, Comps: hd.Comps, Scaling: ScaleOff, MaxScans: 1000, MaxMemory: bound,
				Knobs: Knobs{Merged: merged}}, []Geometry{whole(hd.W, hd.H, ow, oh, 0, true)}, []int{0}, len(out))
			if err := s.Err(s.Decode(data, out, nil, nil)); err != nil {
				if hd.Comps == 4 && strings.Contains(err.Error(), "olor") { // CMYK: libjpeg refuses the conversion
					continue
				}
				t.Fatalf("%s (merged %v): %v (bound %d)", names[i], merged, err, bound)
			}
			st := s.Stats()
			if st.LibPeak <= 0 || st.LibPeak > bound {
				t.Fatalf("%s (merged %v): libjpeg held %d bytes at most, bound %d", names[i], merged, st.LibPeak, bound)
			}
			peak = max(peak, st.LibPeak)
		}
		if hd.Progressive {
			p := coefsNew()
			rc, why, tp := transcodeToCoefs(data, 1000, bound, nil, p, 1<<30)
			coefsFree(p)
			if rc != tcOK && !strings.Contains(why, "precision") {
				t.Fatalf("%s: transcode: %d %s", names[i], rc, why)
			}
			if tp <= 0 || tp > bound {
				t.Fatalf("%s: the transcode's libjpeg held %d bytes at most, bound %d", names[i], tp, bound)
			}
			peak = max(peak, tp)
		}
		if peak == 0 { // not decoded (CMYK)
			continue
		}
		ratio := float64(bound) / float64(peak)
		t.Logf("%-48s %5dx%-5d prog=%-5v peak %10d bound %10d ratio %.2f", names[i], hd.W, hd.H, hd.Progressive, peak, bound, ratio)
		if hd.Progressive && int64(hd.W)*int64(hd.H) >= 1<<20 && ratio > 1.25 {
			t.Errorf("%s: bound %d is %.2fx what libjpeg held (%d)", names[i], bound, ratio, peak)
		}
	}
}

// TestLibBytesCapped: a progressive file decoded (and transcoded) with
// less than its bound for libjpeg's own memory fails ErrTooLarge before
// libjpeg allocates its coefficients, saying so with the sizes; the
// Scratch decodes the next file as before.
func TestLibBytesCapped(t *testing.T) {
	data := encodePicture(t, 2000, 1500, jpegenc.Options{Quality: 90, HS: 2, VS: 2, Progressive: true})
	hd, err := ParseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	bound := hd.LibBytes()
	s := newScratch(t)
	out := make([]byte, 3*100*75)
	decode := func(limit int64) (error, Stats) {
		s.Set(&Job{SrcW: hd.W, SrcH: hd.H, Comps: hd.Comps, Scaling: ScalePow2, MaxScans: 1000, MaxMemory: limit},
			[]Geometry{whole(hd.W, hd.H, 100, 75, 0, true)}, []int{0}, len(out))
		return s.Err(s.Decode(data, out, nil, nil)), s.Stats()
	}
	err, st := decode(bound / 2)
	if !errors.Is(err, errs.TooLarge) {
		t.Fatalf("capped at %d of its bound %d: %v, want ErrTooLarge", bound/2, bound, err)
	}
	for _, want := range []string{"libjpeg's own scratch", fmt.Sprintf("over the %d reserved", bound/2)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if st.LibPeak > bound/2 {
		t.Errorf("libjpeg held %d bytes, over its cap %d", st.LibPeak, bound/2)
	}
	p := coefsNew()
	rc, why, tp := transcodeToCoefs(data, 1000, bound/2, nil, p, 1<<30)
	coefsFree(p)
	if rc == tcOK || !strings.Contains(why, "libjpeg's own scratch") || tp > bound/2 {
		t.Errorf("transcode capped at %d: %d %q, held %d", bound/2, rc, why, tp)
	}
	if err, st := decode(bound); err != nil || st.LibPeak > bound {
		t.Fatalf("at its bound %d: %v, held %d", bound, err, st.LibPeak)
	}
}
