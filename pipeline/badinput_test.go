package pipeline

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// smallTrain is the training transform at a small size: what a bad file
// meets in a training job.
func smallTrain(t testing.TB) *transform.Transform {
	return mustTransform(t, transform.CHW,
		ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{32, 32}},
		ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5})
}

// TestBadInput feeds every file of testdata/bad to both decoders: each must
// be refused with an error wrapping the expected sentinel, never a panic
// (Decode recovers, so a recovered panic is checked for by its message).
func TestBadInput(t *testing.T) {
	tr := smallTrain(t)
	for _, f := range corpusFiles() {
		if f.want == nil {
			continue
		}
		data := readCorpus(t, f.path)
		for _, dk := range decoderKinds {
			t.Run(f.path+"/"+dk.name, func(t *testing.T) {
				d := NewDecoder(dk.opts...)
				defer d.Close()
				out := make([]byte, tr.SampleBytes())
				for idx := range uint64(3) { // a few crop boxes
					err := d.Decode(data, tr, det.Key{Seed: 1, Index: idx}, out)
					switch {
					case err == nil:
						t.Fatalf("decoded without error; want %v", f.want)
					case !errors.Is(err, f.want):
						t.Fatalf("error %q does not wrap %v", err, f.want)
					case strings.Contains(err.Error(), "panicked"):
						t.Fatalf("decoder panicked: %v", err)
					case !strings.Contains(err.Error(), f.wantMsg):
						t.Fatalf("error %q does not mention %q", err, f.wantMsg)
					}
				}
			})
		}
	}
}

// TestOddFormats decodes the valid odd-format files of testdata/odd
// (grayscale, 16-bit, paletted, alpha, CMYK, progressive) through both
// decoders with an identity transform and compares the pixels with what the
// file was made from.
func TestOddFormats(t *testing.T) {
	for _, f := range corpusFiles() {
		if f.img == nil {
			continue
		}
		data := readCorpus(t, f.path)
		b := f.img.Bounds()
		want := hwc(f.img)
		id := identity(t, b.Dx(), b.Dy())
		for _, dk := range decoderKinds {
			t.Run(f.path+"/"+dk.name, func(t *testing.T) {
				d := NewDecoder(dk.opts...)
				defer d.Close()
				got := make([]byte, id.SampleBytes())
				if err := d.Decode(data, id, det.Key{}, got); err != nil {
					t.Fatal(err)
				}
				if maxd, mean := diffStats(got, want); maxd > f.maxDiff || mean > f.meanDiff {
					t.Errorf("decoded pixels differ from the source: max %v (want <= %v), mean %.2f (want <= %v)", maxd, f.maxDiff, mean, f.meanDiff)
				}
				if strings.Contains(f.path, "gray") || strings.Contains(f.path, "progressive") {
					for i := 0; i < len(got); i += 3 {
						if got[i] != got[i+1] || got[i] != got[i+2] {
							t.Fatalf("gray image decoded to a colored pixel %v at %d", got[i:i+3], i/3)
						}
					}
				}
				// The training transform must work on it too.
				tr := smallTrain(t)
				if err := d.Decode(data, tr, det.Key{Index: 7}, make([]byte, tr.SampleBytes())); err != nil {
					t.Errorf("training transform: %v", err)
				}
			})
		}
	}
}

// TestRGB16HighBytes checks the 16-bit PNG against an 8-bit PNG of its high
// bytes through a resizing transform: the two must give the same sample.
func TestRGB16HighBytes(t *testing.T) {
	img16, img8 := testRGB16(40, 24)
	tr := smallTrain(t)
	for _, dk := range decoderKinds {
		t.Run(dk.name, func(t *testing.T) {
			d := NewDecoder(dk.opts...)
			defer d.Close()
			a, b := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
			k := det.Key{Seed: 3, Index: 5}
			if err := d.Decode(encodePNG(img16), tr, k, a); err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(encodePNG(img8), tr, k, b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				maxd, mean := diffStats(a, b)
				t.Errorf("16-bit and 8-bit samples differ: max %v, mean %.2f", maxd, mean)
			}
		})
	}
}

// TestScanCap checks the progressive scan cap itself: the 150-scan file is
// refused at the default cap of 100 and decodes under a cap of 200 (so it is
// a valid file, refused only for its scan count), and the 50-scan file is
// refused under a cap of 10.
func TestScanCap(t *testing.T) {
	tr := smallTrain(t)
	out := make([]byte, tr.SampleBytes())
	for _, tc := range []struct {
		path string
		cap  int
		ok   bool
	}{
		{"bad/progressive-150-scans.jpg", 200, true},
		{"bad/progressive-150-scans-com-eoi.jpg", 200, true},
		{"odd/progressive-50-scans.jpg", 100, true},
		{"odd/progressive-50-scans.jpg", 10, false},
		{"bad/progressive-150-scans-com-eoi.jpg", 149, false},
	} {
		for _, dk := range decoderKinds {
			t.Run(tc.path+"/"+dk.name, func(t *testing.T) {
				d := NewDecoder(append(dk.opts, WithMaxScans(tc.cap))...)
				defer d.Close()
				err := d.Decode(readCorpus(t, tc.path), tr, det.Key{}, out)
				if tc.ok && err != nil {
					t.Errorf("cap %d: %v", tc.cap, err)
				}
				if !tc.ok && !errors.Is(err, errs.TooLarge) {
					t.Errorf("cap %d: got %v, want ErrTooLarge", tc.cap, err)
				}
			})
		}
	}
}
