//go:build cgo

package pipeline

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestExactProgressiveDecoderExact checks phuff.c's progressive decoder against
// libjpeg's own: every progressive file progressiveJPEGs makes (every
// sampling, gray, RGB, restart markers, odd and tiny sizes, files whose
// last scans are cut, which libjpeg block-smooths, and corrupt ones),
// cropped at odd offsets (fastEdgePlans: every edge, one column, one row,
// a few pixels) and decoded as crops and as whole rows from the top (every
// MCU of every scan decoded): the same bytes as libjpeg's decoder makes
// the same way, and an error where libjpeg's whole decode has one. A
// crop's decode must also have stopped each scan early where the crop ends
// high enough in the image.
func TestExactProgressiveDecoderExact(t *testing.T) {
	exactTest(t)
	files, _ := progressiveJPEGs(t)
	ours, plain, lib, whole, libWhole := NewDecoder(), NewDecoder(), NewDecoder(), NewDecoder(), NewDecoder()
	for _, d := range []*Decoder{ours, plain, lib, whole, libWhole} {
		defer d.Close()
	}
	knobsOf(plain).SIMDMax = -1 // phuff.c's refinement without BMI2 too
	knobsOf(lib).LibHuff, knobsOf(libWhole).LibHuff = true, true
	knobsOf(whole).NoRegion, knobsOf(libWhole).NoRegion = true, true
	checked, stopped, libFailed := 0, 0, 0
	for _, f := range files {
		hd, err := parseHeader(f.data)
		if err != nil {
			t.Fatal(err)
		}
		if !hd.progressive {
			t.Fatalf("%s: not progressive", f.name)
		}
		for i, p := range fastEdgePlans(hd.w, hd.h) {
			layout := transform.Layout(i / 2 % 2)
			want := make([]byte, 3*p.OutW*p.OutH)
			got := make([]byte, len(want))
			all, wantAll := make([]byte, len(want)), make([]byte, len(want))
			errLibAll := libWhole.decodeFast(f.data, &hd, &p, layout, wantAll)
			errLib := lib.decodeFast(f.data, &hd, &p, layout, want)
			if st := lib.fast.stats(); st.prog {
				t.Fatalf("%s: libjpeg's decoder asked for, phuff.c's used", f.name)
			}
			// Whole rows from the top: every MCU of every scan decoded,
			// so a corrupt file fails as libjpeg's decode does.
			errAll := whole.decodeFast(f.data, &hd, &p, layout, all)
			if st := whole.fast.stats(); errAll == nil && (!st.prog || st.progDecoded != st.progMCUs) {
				t.Fatalf("%s: the whole decode did not decode every MCU with phuff.c: %+v", f.name, st)
			}
			if (errAll == nil) != (errLibAll == nil) {
				t.Fatalf("%s plan %d: phuff.c's whole decode says %v, libjpeg's %v", f.name, i, errAll, errLibAll)
			}
			if errAll == nil && !bytes.Equal(all, wantAll) {
				t.Fatalf("%s crop %d,%d %dx%d -> %dx%d %s: phuff.c's whole decode differs from libjpeg's (MAD %.3f)",
					f.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, layout, fastMAD(all, wantAll))
			}
			if errLib != nil {
				libFailed++
				continue
			}
			if err := ours.decodeFast(f.data, &hd, &p, layout, got); err != nil {
				t.Fatalf("%s plan %d: %v (libjpeg's decodes it)", f.name, i, err)
			}
			st := ours.fast.stats()
			if !st.prog {
				t.Fatalf("%s: phuff.c not used", f.name)
			}
			if st.progDecoded < st.progMCUs {
				stopped++
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s crop %d,%d %dx%d -> %dx%d %s: %d of %d MCUs decoded: differs from libjpeg's (MAD %.3f)",
					f.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, layout, st.progDecoded, st.progMCUs, fastMAD(got, want))
			}
			if err := plain.decodeFast(f.data, &hd, &p, layout, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s plan %d: without SIMD: %v, or the bytes differ from libjpeg's", f.name, i, err)
			}
			checked++
		}
	}
	// The crops in the top half of the larger files stop early.
	if stopped == 0 || libFailed == 0 {
		t.Fatalf("%d decodes stopped early, %d failed: want some of each", stopped, libFailed)
	}
	t.Logf("%d decodes identical to libjpeg's, %d of them stopped early; %d failed as libjpeg's did", checked, stopped, libFailed)
}

// TestExactProgressiveDecoderMutated decodes progressive files with bytes of
// their scan data changed (random positions and values, a fixed seed)
// through phuff.c and through libjpeg's decoder, whole rows from the top:
// both fail (a bad-input error) or both make the same bytes. One
// difference is by design: bytes left between a scan's last MCU and the
// next marker fail phuff.c's decode (libjpeg's marker reader reports them),
// where libjpeg's decoder may have read up to 7 of them ahead into its bit
// buffer and says nothing.
func TestExactProgressiveDecoderMutated(t *testing.T) {
	exactTest(t)
	files, _ := progressiveJPEGs(t)
	ours, lib := NewDecoder(), NewDecoder()
	defer ours.Close()
	defer lib.Close()
	knobsOf(ours).NoRegion = true
	knobsOf(lib).NoRegion, knobsOf(lib).LibHuff = true, true
	rng := rand.New(rand.NewPCG(7, 7))
	failed, same, stricter := 0, 0, 0
	for n := 0; n < 4000; n++ {
		f := files[rng.IntN(len(files))]
		sos := scanStarts(f.data)
		if len(sos) == 0 || len(f.data) < sos[0]+16 {
			continue
		}
		data := bytes.Clone(f.data)
		for range 1 + rng.IntN(3) {
			at := sos[0] + 12 + rng.IntN(len(data)-sos[0]-14)
			data[at] = byte(rng.IntN(256))
		}
		hd, err := parseHeader(data)
		if err != nil {
			continue
		}
		p := fastEdgePlans(hd.w, hd.h)[0]
		got, want := make([]byte, 3*p.OutW*p.OutH), make([]byte, 3*p.OutW*p.OutH)
		errOurs := ours.decodeFast(data, &hd, &p, transform.CHW, got)
		errLib := lib.decodeFast(data, &hd, &p, transform.CHW, want)
		switch {
		case errOurs != nil && errLib == nil && strings.Contains(errOurs.Error(), "extraneous bytes before marker"):
			stricter++
		case (errOurs == nil) != (errLib == nil):
			t.Fatalf("%s mutated (try %d): phuff.c says %v, libjpeg's %v", f.name, n, errOurs, errLib)
		case errOurs != nil:
			if !IsBadInput(errOurs) {
				t.Fatalf("%s mutated: not a bad-input error: %v", f.name, errOurs)
			}
			failed++
		case !bytes.Equal(got, want):
			t.Fatalf("%s mutated (try %d): the bytes differ from libjpeg's (MAD %.3f)", f.name, n, fastMAD(got, want))
		default:
			same++
		}
	}
	if failed == 0 || same == 0 {
		t.Fatalf("%d failed, %d decoded: want some of each", failed, same)
	}
	t.Logf("%d mutated files failed as libjpeg's decode of them did, %d decoded to libjpeg's bytes; %d with bytes after a scan's data failed where libjpeg's decoder read them ahead", failed, same, stricter)
}
