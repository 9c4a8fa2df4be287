//go:build cgo

package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestExactHuffmanExact: huff.c's Huffman decoder gives the very bytes libjpeg's
// own does, on real photos and on every kind of file the test encoder makes
// (all subsamplings, restart markers, gray, RGB, tiny sizes), for crops at
// every edge and for training crops, in both layouts. Progressive files
// must fall back to libjpeg's decoder.
func TestExactHuffmanExact(t *testing.T) {
	exactTest(t)
	imgs := fastSynthJPEGs(t)
	names, photos := fastPhotos(t, 24)
	for i, p := range photos {
		imgs = append(imgs, fastSynthJPEG{"photo-" + names[i], p})
	}
	ours, theirs := NewDecoder(), NewDecoder()
	defer ours.Close()
	defer theirs.Close()
	knobsOf(theirs).LibHuff = true
	tr, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	n, used := 0, 0
	for _, img := range imgs {
		hd, err := parseHeader(img.data)
		if err != nil {
			t.Fatal(err)
		}
		plans := fastEdgePlans(hd.w, hd.h)
		for k := range 8 {
			p, err := geomPlan(tr, hd.w, hd.h, det.Key{Seed: 7, Index: uint64(k)})
			if err != nil {
				t.Fatal(err)
			}
			plans = append(plans, p)
		}
		for i, p := range plans {
			layout := transform.Layout(i % 2)
			a, b := make([]byte, 3*p.OutW*p.OutH), make([]byte, 3*p.OutW*p.OutH)
			if err := ours.decodeFast(img.data, &hd, &p, layout, a); err != nil {
				t.Fatalf("%s: huff.c: %v", img.name, err)
			}
			if ours.fast.stats().huff {
				used++
			} else if !hd.progressive {
				t.Errorf("%s: baseline file not decoded by huff.c", img.name)
			}
			if err := theirs.decodeFast(img.data, &hd, &p, layout, b); err != nil {
				t.Fatalf("%s: libjpeg: %v", img.name, err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s crop %d,%d %dx%d -> %dx%d: huff.c and libjpeg differ (MAD %.3f)", img.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, fastMAD(a, b))
			}
			n++
		}
	}
	t.Logf("%d decodes identical (%d through huff.c)", n, used)
}

// TestHuffmanCorrupt: damage in the entropy-coded data the crop needs is an
// ErrCorrupt through huff.c, never a crash or a silent success with made-up
// pixels: truncation (with the end-of-image marker kept, so the up-front
// check passes), a stray marker, a missing restart marker, garbage bytes.
func TestHuffmanCorrupt(t *testing.T) {
	_, photos := fastPhotos(t, 1)
	photo := photos[0]
	pix := fastSynthPixels(64, 48, 3, 1)
	restart, err := encodeTurbo(pix, 64, 48, 3, 90, 2, 2, false, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	sos := bytes.Index(photo, []byte{0xFF, 0xDA})
	rsos := bytes.Index(restart, []byte{0xFF, 0xDA})
	rst := bytes.Index(restart[rsos:], []byte{0xFF, 0xD1}) + rsos
	cases := []struct {
		name string
		data []byte
	}{
		{"truncated-keeping-eoi", append(bytes.Clone(photo[:sos+len(photo[sos:])/3]), 0xFF, 0xD9)},
		{"stray-marker", func() []byte {
			d := bytes.Clone(photo)
			m := sos + (len(d)-sos)/4
			d[m], d[m+1] = 0xFF, 0xC4 // a DHT marker inside the scan
			return d
		}()},
		{"restart-marker-missing", func() []byte {
			d := bytes.Clone(restart)
			d[rst], d[rst+1] = 0x12, 0x34
			return d
		}()},
		{"restart-marker-wrong", func() []byte {
			d := bytes.Clone(restart)
			d[rst+1] = 0xD5
			return d
		}()},
	}
	d := NewDecoder()
	defer d.Close()
	tr, err := transform.ParseTransform("imagenet-eval", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	full, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpResize, Size: [2]int{32, 32}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			use := tr
			if len(c.data) < 10000 {
				use = full // the small restart file: the whole image
			}
			out := make([]byte, use.SampleBytes())
			err := d.Decode(c.data, use, det.Key{}, out)
			if !errors.Is(err, errs.Corrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
	// Garbage in the scan data: any outcome but a crash, and the decoder
	// still decodes a good file afterwards.
	for i := range 200 {
		g := bytes.Clone(photo)
		for k := range 8 {
			p := sos + 20 + (i*7919+k*104729)%(len(g)-sos-30)
			g[p] ^= byte(1 + (i+k)%255)
		}
		out := make([]byte, tr.SampleBytes())
		if err := d.Decode(g, tr, det.Key{Index: uint64(i)}, out); err != nil && !errors.Is(err, errs.Corrupt) {
			t.Fatalf("garbage %d: %v", i, fmt.Errorf("want nil or ErrCorrupt: %w", err))
		}
	}
	out := make([]byte, tr.SampleBytes())
	if err := d.Decode(photo, tr, det.Key{}, out); err != nil {
		t.Fatalf("good file after garbage: %v", err)
	}
}
