package pipeline

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// FuzzDecode feeds arbitrary bytes to both decoders with a small pixel
// budget and a small training transform. Whatever the input, Decode must
// return nil or an error wrapping one of the sentinels, and must not panic:
// Decode recovers panics into ErrCorrupt, so a recovered panic is caught by
// its message and fails the fuzz run as well.
//
// Seeds: the bad-input corpus and the odd-format files of ../testdata, plus
// the crashers Go saves under testdata/fuzz/FuzzDecode.
//
//	go test -run XXX -fuzz FuzzDecode -fuzztime 60s ./pipeline
func FuzzDecode(f *testing.F) {
	for _, dir := range []string{"bad", "odd"} {
		ents, err := os.ReadDir(filepath.Join(corpusDir, dir))
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range ents {
			data, err := os.ReadFile(filepath.Join(corpusDir, dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add(encodeJPEG(testGray(9, 7), 50))
	f.Add(encodePNG(testPaletted(5, 3)))
	// PNG and WebP's C paths: the row decoder's kinds and filters, libwebp.
	alpha, _ := testAlpha(9, 7)
	f.Add(encodePNG(alpha))
	f.Add(encodePNG(testGray(9, 7)))
	for _, name := range []string{"lossy.webp", "lossless-alpha.webp", "animated.webp"} {
		data, err := os.ReadFile(filepath.Join("testdata", "formats", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	tr := smallTrain(f)
	out := make([]byte, tr.SampleBytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dk := range decoderKinds {
			d := NewDecoder(append(dk.opts, WithPixelBudget(4<<20))...)
			err := d.Decode(data, tr, det.Key{Seed: 1, Index: uint64(len(data))}, out)
			d.Close()
			if err == nil {
				continue
			}
			if !IsBadInput(err) {
				t.Fatalf("%s: error wraps no sentinel: %v", dk.name, err)
			}
			if strings.Contains(err.Error(), "decoder panicked") {
				t.Fatalf("%s: %v", dk.name, err)
			}
		}
	})
}

// FuzzHeader checks parseHeader, which the pixel budget relies on: it must
// never panic; its errors wrap a sentinel; a size it accepts is positive
// and (JPEG) has 1, 3 or 4 components; and when Go's decoder (the
// reference path's) reads a size from the same bytes, it is the same one.
// A header parser that sees a smaller image than the decoder does lets a
// huge image past the budget.
//
//	go test -run XXX -fuzz FuzzHeader -fuzztime 60s ./pipeline
func FuzzHeader(f *testing.F) {
	for _, dir := range []string{"bad", "odd"} {
		ents, err := os.ReadDir(filepath.Join(corpusDir, dir))
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range ents {
			data, err := os.ReadFile(filepath.Join(corpusDir, dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data[:min(len(data), 1024)]) // headers are at the start
		}
	}
	jpg := encodeJPEG(testGray(9, 7), 50)
	sof := jpegMarker(jpg, 0xC0)
	f.Add(jpg)
	f.Add(slices.Concat(jpg[:2], []byte{0xFF, 0xFF, 0xFF}, jpg[2:])) // fill bytes before a marker
	f.Add(slices.Concat(jpg[:sof], []byte{0xFF, 0x00}, jpg[sof:]))   // a stuffed zero between segments
	f.Add(slices.Concat(jpg[:sof], []byte{0x12, 0x34}, jpg[sof:]))   // extraneous bytes between segments
	f.Fuzz(func(t *testing.T, data []byte) {
		hd, err := parseHeader(data)
		if err != nil {
			if !IsBadInput(err) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if hd.w <= 0 || hd.h <= 0 {
			t.Fatalf("accepted size %dx%d", hd.w, hd.h)
		}
		switch hd.format {
		case formatJPEG:
			if hd.comps != 1 && hd.comps != 3 && hd.comps != 4 {
				t.Fatalf("accepted a jpeg with %d components", hd.comps)
			}
		case formatPNG:
			if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
				t.Fatal("png header without the png signature")
			}
		}
		cfg, name, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return // Go's decoder refuses it too
		}
		if cfg.Width != hd.w || cfg.Height != hd.h {
			t.Fatalf("parseHeader says %dx%d, Go's %s decoder %dx%d", hd.w, hd.h, name, cfg.Width, cfg.Height)
		}
		if want := map[format]string{formatJPEG: "jpeg", formatPNG: "png"}[hd.format]; want != "" && name != want {
			t.Fatalf("parseHeader says format %d, Go's decoder %s", hd.format, name)
		}
	})
}

// fuzzDeadline fails t if f runs longer than a fuzz input ever should: the
// fuzz targets over files look for hangs as well as crashes.
func fuzzDeadline(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("hang: still running after a minute")
	}
}

// fuzzSpec turns fuzz bytes into numbers, with the edge cases (zero,
// negative, NaN, infinities, tiny and huge values, the size limits) much
// more likely than uniform bits would make them. Past the end it reads
// zeros.
type fuzzSpec struct{ b []byte }

func (s *fuzzSpec) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *fuzzSpec) size() int {
	c := s.byte()
	switch c % 4 {
	case 0:
		return int(s.byte()) // 0..255
	case 1:
		return int(int16(uint16(s.byte())<<8 | uint16(s.byte()))) // negative, huge
	case 2:
		return opspkg.MaxSide - 1 + int(c>>2)%3 // at the limit
	default:
		return int(c >> 2) // 0..63
	}
}

func (s *fuzzSpec) float() float64 {
	c := s.byte()
	switch c % 4 {
	case 0:
		return [...]float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 5e-324, 1e-300, 1e300,
			math.MaxFloat64, -1, 1, 0.5, 2, 100, 100.0001, 1.0000001}[c>>2%16]
	case 1:
		return float64(int8(s.byte())) / 16 // -8..8 in sixteenths
	case 2:
		return float64(s.byte()) / 255 // 0..1
	default:
		var b [8]byte
		for i := range b {
			b[i] = s.byte()
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
	}
}

// encodeSpec is fuzzSpec.ops' inverse, for seeds: sizes small or int16,
// floats as their bits.
func encodeSpec(layout transform.Layout, ops ...opspkg.Op) []byte {
	b := []byte{byte(layout), byte(len(ops))}
	size := func(v int) {
		if v >= 0 && v <= 255 {
			b = append(b, 0, byte(v))
		} else {
			b = append(b, 1, byte(uint16(v)>>8), byte(v))
		}
	}
	float := func(x float64) {
		b = append(b, 3)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	for _, op := range ops {
		k := slices.Index(fuzzOpKinds, op.Kind)
		if k < 0 {
			k = len(fuzzOpKinds) - 1 // unknown
		}
		b = append(b, byte(k))
		switch op.Kind {
		case transform.OpRandomResizedCrop:
			size(op.Size[0])
			size(op.Size[1])
			a := opspkg.ArgsOf[transform.RRCArgs](&op)
			float(a.Scale[0])
			float(a.Scale[1])
			float(a.Ratio[0])
			float(a.Ratio[1])
		case transform.OpResize, transform.OpCenterCrop:
			size(op.Size[0])
			size(op.Size[1])
		case opspkg.OpRandomHorizontalFlip:
			float(op.P)
		case opspkg.OpColorJitter:
			a := opspkg.ArgsOf[opspkg.ColorJitterArgs](&op)
			float(a.Brightness)
			float(a.Contrast)
			float(a.Saturation)
		case opspkg.OpNormalize:
			a := opspkg.ArgsOf[opspkg.NormalizeArgs](&op)
			for c := range 3 {
				float(a.Mean[c])
				float(a.Std[c])
			}
		}
	}
	return b
}

var fuzzOpKinds = []opspkg.OpKind{transform.OpRandomResizedCrop, transform.OpResize, transform.OpCenterCrop, opspkg.OpRandomHorizontalFlip, opspkg.OpColorJitter, opspkg.OpNormalize, "Bogus"}

// ops reads a layout and up to 6 ops.
func (s *fuzzSpec) ops() (transform.Layout, []opspkg.Op) {
	layout := transform.Layout(int(s.byte()) % 3) // 2 is not a layout
	var ops []opspkg.Op
	for n := int(s.byte()) % 7; len(ops) < n; {
		op := opspkg.Op{Kind: fuzzOpKinds[int(s.byte())%len(fuzzOpKinds)]}
		switch op.Kind {
		case transform.OpRandomResizedCrop:
			op.Size = [2]int{s.size(), s.size()}
			op.Args = &transform.RRCArgs{Scale: [2]float64{s.float(), s.float()}, Ratio: [2]float64{s.float(), s.float()}}
		case transform.OpResize, transform.OpCenterCrop:
			op.Size = [2]int{s.size(), s.size()}
		case opspkg.OpRandomHorizontalFlip:
			op.P = s.float()
		case opspkg.OpColorJitter:
			op.Args = &opspkg.ColorJitterArgs{Brightness: s.float(), Contrast: s.float(), Saturation: s.float()}
		case opspkg.OpNormalize:
			a := &opspkg.NormalizeArgs{}
			for c := range 3 {
				a.Mean[c], a.Std[c] = s.float(), s.float()
			}
			op.Args = a
		}
		ops = append(ops, op)
	}
	return layout, ops
}

// FuzzTransform builds op lists from fuzzed numbers: NewTransform must
// never panic and refuse with ErrUnsupported; a transform it accepts must
// have a sane shape and size, compile again from its own Ops to the same
// shape, and decode small images through both decoders to nil or
// ErrUnsupported for a crop the image cannot give (larger than the image,
// or empty), never anything else.
//
//	go test -run XXX -fuzz FuzzTransform -fuzztime 60s ./pipeline
func FuzzTransform(f *testing.F) {
	for _, name := range transform.PresetNames() {
		ops, _ := transform.Preset(name)
		f.Add(encodeSpec(transform.CHW, ops...))
	}
	for _, seed := range [][]opspkg.Op{
		{{Kind: transform.OpRandomResizedCrop, Size: [2]int{16, 12}, Args: &transform.RRCArgs{Scale: [2]float64{0.2, 0.9}, Ratio: [2]float64{0.5, 2}}},
			{Kind: opspkg.OpRandomHorizontalFlip, P: 0.7},
			{Kind: opspkg.OpColorJitter, Args: &opspkg.ColorJitterArgs{Brightness: 0.4, Contrast: 0.2, Saturation: 0.1}},
			{Kind: opspkg.OpNormalize, Args: &opspkg.NormalizeArgs{Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}}}},
		{{Kind: transform.OpResize, Size: [2]int{20, 0}}, {Kind: transform.OpCenterCrop, Size: [2]int{8, 0}}},
		{{Kind: transform.OpResize, Size: [2]int{9, 31}}},
		{{Kind: transform.OpCenterCrop, Size: [2]int{5, 7}}, {Kind: opspkg.OpRandomHorizontalFlip, P: 1}},
		{{Kind: transform.OpCenterCrop, Size: [2]int{50, 50}}}, // larger than the images
		{{Kind: transform.OpRandomResizedCrop, Size: [2]int{opspkg.MaxSide, 1}}},
		{{Kind: opspkg.OpRandomHorizontalFlip}, {Kind: transform.OpCenterCrop, Size: [2]int{4, 4}}}, // out of order
		{{Kind: transform.OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &transform.RRCArgs{Ratio: [2]float64{5e-324, 1e300}}}},
		{{Kind: transform.OpCenterCrop, Size: [2]int{3, 3}}, {Kind: opspkg.OpNormalize, Args: &opspkg.NormalizeArgs{Std: [3]float64{5e-324, 1, math.NaN()}}}},
		{{Kind: "Bogus"}},
	} {
		f.Add(encodeSpec(transform.HWC, seed...))
	}
	f.Add(encodeSpec(transform.Layout(2), opspkg.Op{Kind: transform.OpCenterCrop, Size: [2]int{3, 3}}))
	imgs := [][]byte{encodeJPEG(testPicture(13, 9), 80), encodePNG(testPaletted(7, 5))}
	decs := make([]*Decoder, len(decoderKinds))
	for i, dk := range decoderKinds {
		decs[i] = NewDecoder(dk.opts...)
	}
	f.Cleanup(func() {
		for _, d := range decs {
			d.Close()
		}
	})
	f.Fuzz(func(t *testing.T, spec []byte) {
		layout, ops := (&fuzzSpec{spec}).ops()
		tr, err := transform.NewTransform(layout, ops...)
		if err != nil {
			if !errors.Is(err, errs.Unsupported) {
				t.Fatalf("NewTransform: %v, want ErrUnsupported", err)
			}
			return
		}
		h, w := tr.Size()
		sh := tr.Shape()
		want := [3]int{3, h, w}
		if layout == transform.HWC {
			want = [3]int{h, w, 3}
		}
		px := 3 * h * w
		if tr.Float() {
			px *= 4
		}
		if h < 1 || w < 1 || h > opspkg.MaxSide || w > opspkg.MaxSide || sh != want || tr.SampleBytes() != px || tr.Layout() != layout {
			t.Fatalf("%v: size %dx%d, shape %v, %d bytes, layout %v", tr, h, w, sh, tr.SampleBytes(), tr.Layout())
		}
		again, err := transform.NewTransform(layout, tr.Ops()...)
		if err != nil || again.Shape() != sh || again.Float() != tr.Float() || again.String() != tr.String() {
			t.Fatalf("%v: recompiling its Ops: %v", tr, err)
		}
		if h*w > 1<<16 {
			return // big outputs: only the shape is checked, to keep execs fast
		}
		out := make([]byte, tr.SampleBytes())
		for _, img := range imgs {
			for i, d := range decs {
				err := d.Decode(img, tr, det.Key{Seed: uint64(len(spec)), Index: uint64(i)}, out)
				if err != nil && !(errors.Is(err, errs.Unsupported) && (strings.Contains(err.Error(), "smaller than") || strings.Contains(err.Error(), "is empty"))) {
					t.Fatalf("%v, %s decoder: %v", tr, decoderKinds[i].name, err)
				}
			}
		}
	})
}
