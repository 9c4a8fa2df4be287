//go:build cgo

package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// progressiveJPEGs returns progressive JPEGs: the photo set's own, photos
// re-encoded by libjpeg as progressive at every sampling, gray, RGB and
// with restart markers, and generated ones at odd and tiny sizes; plus
// (incomplete) ones with their last scans cut, whose coefficients are not
// all coded to full precision (libjpeg smooths their blocks), and corrupt
// ones.
func progressiveJPEGs(t *testing.T) (files []fastSynthJPEG, incomplete int) {
	t.Helper()
	names, photos := fastPhotos(t, 0)
	var pixSets []struct {
		name string
		w, h int
		rgb  []byte
	}
	for i, b := range photos {
		hd, err := parseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if hd.progressive {
			files = append(files, fastSynthJPEG{"photo-" + names[i], b})
		}
		if i%30 != 0 && !hd.progressive {
			continue
		}
		img, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		r := img.Bounds()
		rgba := image.NewRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
		draw.Draw(rgba, rgba.Rect, img, r.Min, draw.Src)
		rgb := make([]byte, 3*r.Dx()*r.Dy())
		for p := range r.Dx() * r.Dy() {
			copy(rgb[3*p:3*p+3], rgba.Pix[4*p:4*p+3])
		}
		pixSets = append(pixSets, struct {
			name string
			w, h int
			rgb  []byte
		}{names[i], r.Dx(), r.Dy(), rgb})
	}
	for i, sz := range [][2]int{{333, 251}, {37, 53}, {17, 9}, {501, 97}, {1, 1}, {3, 2}} {
		pixSets = append(pixSets, struct {
			name string
			w, h int
			rgb  []byte
		}{"synth", sz[0], sz[1], fastSynthPixels(sz[0], sz[1], 3, uint64(i))})
	}
	for _, ps := range pixSets {
		gray := make([]byte, ps.w*ps.h)
		for p := range gray {
			gray[p] = ps.rgb[3*p+1]
		}
		for _, c := range []struct {
			name        string
			nc, hs, vs  int
			q           int
			restartRows int
			rgb         bool
		}{
			{"420", 3, 2, 2, 90, 0, false},
			{"422", 3, 2, 1, 85, 0, false},
			{"444", 3, 1, 1, 95, 0, false},
			{"440", 3, 1, 2, 90, 0, false},
			{"411", 3, 4, 1, 75, 0, false},
			{"420-q100", 3, 2, 2, 100, 0, false},
			{"420-restart1", 3, 2, 2, 90, 1, false},
			{"444-restart3", 3, 1, 1, 90, 3, false},
			{"rgb", 3, 1, 1, 90, 0, true},
			{"gray", 1, 1, 1, 90, 0, false},
			{"gray-restart2", 1, 1, 1, 80, 2, false},
		} {
			pix := ps.rgb
			if c.nc == 1 {
				pix = gray
			}
			data, err := encodeTurbo(pix, ps.w, ps.h, c.nc, c.q, c.hs, c.vs, true, c.restartRows, c.rgb)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, fastSynthJPEG{fmt.Sprintf("prog-%s-%s-%dx%d", c.name, ps.name, ps.w, ps.h), data})
		}
	}
	// Cut scans: keep the first n scans and end the file there.
	base := files[0].data
	sos := scanStarts(base)
	for _, n := range []int{1, 2, len(sos) - 1} {
		cut := append(bytes.Clone(base[:sos[n]]), 0xFF, 0xD9)
		files = append(files, fastSynthJPEG{fmt.Sprintf("incomplete-%d-scans", n), cut})
		incomplete++
	}
	// Corrupt: bytes of scan data overwritten (not a marker: 0x00).
	for _, at := range []int{sos[0] + 40, sos[len(sos)-1] + 20} {
		bad := bytes.Clone(base)
		for i := at; i < at+8 && i < len(bad)-2; i++ {
			bad[i] = 0xFF
			bad[i+1] = 0x00
			i++
		}
		files = append(files, fastSynthJPEG{fmt.Sprintf("corrupt-at-%d", at), bad})
	}
	return files, incomplete
}

// scanStarts returns the offsets of a JPEG's SOS markers, walking its
// segments and skipping entropy-coded data.
func scanStarts(data []byte) []int {
	var out []int
	for p := 2; p+3 < len(data); {
		if data[p] != 0xFF || data[p+1] == 0xFF || data[p+1] == 0x00 || (data[p+1] >= 0xD0 && data[p+1] <= 0xD7) {
			p++
			continue
		}
		m := data[p+1]
		if m == 0xD9 {
			break
		}
		if m == 0xDA {
			out = append(out, p)
		}
		p += 2 + int(data[p+2])<<8 | int(data[p+3])
	}
	return out
}

// TestExactTranscodeSameBytes decodes every progressive JPEG progressiveJPEGs
// makes with every preset (in both decode modes) over epochs, through the
// plain path and through the transcoded one, with a coefficient cache alone
// and with an Index beside it (transcoded on the first decode either way,
// the transcode's coefficients stored whole): the same bytes, or the same
// error, every time.
func TestExactTranscodeSameBytes(t *testing.T) {
	exactTest(t)
	files, incomplete := progressiveJPEGs(t)
	var trs []*transform.Transform
	var trNames []string
	for _, name := range transform.PresetNames() {
		for _, mode := range []transform.DecodeMode{transform.DecodeExact, transform.DecodeFast} {
			tr, err := transform.ParseTransform(name, transform.CHW)
			if err != nil {
				t.Fatal(err)
			}
			if transform.NeedsTargets(tr) != "" {
				continue // detr: its samples need their boxes (TestGoldenPresets)
			}
			if _, ok := tr.MultiRoom(); ok {
				continue // yolo: its samples need their partners (TestGoldenPresets)
			}
			trs = append(trs, tr.WithDecode(mode))
			trNames = append(trNames, name+"/"+mode.String())
		}
	}
	plain := NewDecoder()
	defer plain.Close()
	cc := codec.NewCoefCache(1 << 30)
	defer cc.Close()
	tcd := NewDecoder(WithCoefCache(cc))
	defer tcd.Close()
	ix := index.New(64 << 20)
	cc2 := codec.NewCoefCache(1 << 30)
	defer cc2.Close()
	ixd := NewDecoder(WithIndex(ix), WithCoefCache(cc2))
	defer ixd.Close()
	failing := map[string]bool{}
	var decodes int
	for e := range 2 {
		for ti, tr := range trs {
			want := make([]byte, tr.SampleBytes())
			got := make([]byte, tr.SampleBytes())
			for i, f := range files {
				k := det.Key{Seed: uint64(ti), Epoch: uint64(e), Index: uint64(i)}
				werr := plain.Decode(f.data, tr, k, want)
				if werr != nil {
					failing[f.name] = true
				}
				for di, d := range []*Decoder{tcd, ixd} {
					clear(got)
					gerr := d.Decode(f.data, tr, k, got)
					decodes++
					switch {
					case (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error():
						t.Fatalf("%s %s epoch %d decoder %d: error %v, want %v", f.name, trNames[ti], e, di, gerr, werr)
					case werr == nil && !bytes.Equal(got, want):
						t.Fatalf("%s %s epoch %d decoder %d: bytes differ from the progressive decode's", f.name, trNames[ti], e, di)
					}
				}
			}
		}
	}
	// The incomplete and the corrupt files are refused, the rest held.
	nbad := 0
	for _, f := range files {
		if failing[f.name] {
			nbad++
			if !bytes.HasPrefix([]byte(f.name), []byte("corrupt")) {
				t.Errorf("%s: fails to decode", f.name)
			}
		}
	}
	if nbad == 0 {
		t.Error("no corrupt file failed to decode")
	}
	for ci, c := range []*codec.CoefCache{cc, cc2} {
		s := c.Stats()
		t.Logf("cache %d after %d decodes of %d files: %+v", ci, decodes, len(files), s)
		if s.TranscodedFiles != len(files)-incomplete-nbad || s.TranscodeFallbacks != int64(incomplete+nbad) {
			t.Errorf("cache %d: %d files transcoded, %d fallbacks; want %d and %d", ci, s.TranscodedFiles, s.TranscodeFallbacks, len(files)-incomplete-nbad, incomplete+nbad)
		}
		if s.TranscodedBytes <= 0 || s.TranscodedBytes > s.Bytes || s.TranscodeHits == 0 || s.MCUsHit == 0 {
			t.Errorf("cache %d: transcodes hold %d of %d bytes, served %d decodes, %d MCUs from coefficients", ci, s.TranscodedBytes, s.Bytes, s.TranscodeHits, s.MCUsHit)
		}
	}
	// The transcode stores every MCU: its decodes copy each one they use
	// out of the cache (no scan data is kept) and need no index.
	for ci, c := range []*codec.CoefCache{cc, cc2} {
		if s := c.Stats(); s.MCUsHit != s.MCUsWanted {
			t.Errorf("cache %d: %d MCUs of %d from the cache", ci, s.MCUsHit, s.MCUsWanted)
		}
	}
	if s := ix.Stats(); s.Entries != 0 || s.Misses != 0 {
		t.Errorf("the transcodes' decodes used the index: %+v", s)
	}
}

// TestTranscodeBounds: a coefficient cache with room for less than a
// file's transcode refuses it and remembers that (decoded as progressive,
// counted, not transcoded again); with none at all, it does not try; a
// Decoder with an Index transcodes on the first decode too.
func TestTranscodeBounds(t *testing.T) {
	files, _ := progressiveJPEGs(t)
	data := files[0].data
	tr, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, tr.SampleBytes())
	got := make([]byte, tr.SampleBytes())
	plain := NewDecoder()
	defer plain.Close()
	for _, c := range []struct {
		name                    string
		budget                  int64
		index                   bool
		files                   []int // TranscodedFiles after each decode
		fallbacks, refused, hit int64
	}{
		{"room for 60%", int64(len(data)) * 6 / 10, false, []int{0, 0, 0}, 1, 0, 0},
		{"room for 30%", int64(len(data)) * 3 / 10, false, []int{0, 0, 0}, 0, 3, 0},
		{"room", 4 * int64(len(data)), false, []int{1, 1, 1}, 0, 0, 2},
		{"room, index", 4 * int64(len(data)), true, []int{1, 1, 1}, 0, 0, 2},
	} {
		cc := codec.NewCoefCache(c.budget)
		opts := []Option{WithCoefCache(cc)}
		if c.index {
			opts = append(opts, WithIndex(index.New(1<<20)))
		}
		d := NewDecoder(opts...)
		for e := range c.files {
			k := det.Key{Seed: 3, Epoch: uint64(e)}
			if err := plain.Decode(data, tr, k, want); err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(data, tr, k, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s, decode %d: %v, or bytes differ", c.name, e, err)
			}
			if s := cc.Stats(); s.TranscodedFiles != c.files[e] || s.Bytes > c.budget {
				t.Fatalf("%s, decode %d: %d files transcoded, %d bytes of a budget of %d; want %d files", c.name, e, s.TranscodedFiles, s.Bytes, c.budget, c.files[e])
			}
		}
		if s := cc.Stats(); s.TranscodeFallbacks != c.fallbacks || s.Refused != c.refused || s.TranscodeHits != c.hit {
			t.Errorf("%s: %d fallbacks, %d refused, %d hits; want %d, %d, %d", c.name, s.TranscodeFallbacks, s.Refused, s.TranscodeHits, c.fallbacks, c.refused, c.hit)
		}
		d.Close()
		cc.Close()
	}
}

// TestTranscodeScanCap: a progressive file over the scan cap is refused
// with the same error with a coefficient cache as without (its transcode
// stops at the cap too: counted, not stored).
func TestTranscodeScanCap(t *testing.T) {
	files, _ := progressiveJPEGs(t)
	data := files[1].data
	tr, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, tr.SampleBytes())
	plain := NewDecoder(WithMaxScans(3))
	defer plain.Close()
	cc := codec.NewCoefCache(1 << 30)
	defer cc.Close()
	d := NewDecoder(WithMaxScans(3), WithCoefCache(cc))
	defer d.Close()
	for e := range 2 {
		werr := plain.Decode(data, tr, det.Key{Epoch: uint64(e)}, out)
		gerr := d.Decode(data, tr, det.Key{Epoch: uint64(e)}, out)
		if !errors.Is(werr, errs.TooLarge) || gerr == nil || gerr.Error() != werr.Error() {
			t.Fatalf("decode %d: %v with the cache, %v without; want the same ErrTooLarge", e, gerr, werr)
		}
	}
	if s := cc.Stats(); s.TranscodedFiles != 0 || s.TranscodeFallbacks != 1 {
		t.Fatalf("over the scan cap: %+v", s)
	}
}

// TestTranscodeConcurrent: Decoders sharing a coefficient cache transcode
// and decode the same progressive files at once (run it with -race): the
// same bytes as a plain decode, each file transcoded once at most.
func TestTranscodeConcurrent(t *testing.T) {
	all, _ := progressiveJPEGs(t)
	var files [][]byte
	for i := 0; i < len(all) && len(files) < 12; i += 7 {
		files = append(files, all[i].data)
	}
	tr, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	plain := NewDecoder()
	defer plain.Close()
	want := make([][]byte, len(files))
	for i, f := range files {
		want[i] = make([]byte, tr.SampleBytes())
		if err := plain.Decode(f, tr, det.Key{Index: uint64(i)}, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	cc := codec.NewCoefCache(1 << 30)
	defer cc.Close()
	ix := index.New(16 << 20)
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			d := NewDecoder(WithCoefCache(cc), WithIndex(ix))
			defer d.Close()
			out := make([]byte, tr.SampleBytes())
			for r := range 3 {
				for j := range files {
					i := (j + g*3 + r) % len(files)
					if err := d.Decode(files[i], tr, det.Key{Index: uint64(i)}, out); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(out, want[i]) {
						errs <- fmt.Errorf("decoder %d, file %d: bytes differ", g, i)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := cc.Stats(); s.TranscodedFiles != len(files) || s.TranscodeHits == 0 {
		t.Fatalf("%d files: %+v", len(files), s)
	}
}
