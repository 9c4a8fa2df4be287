//go:build cgo

package pipeline

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// decodeFuzzSeeds are FuzzDecodeIndex's and FuzzDecodeCoefs's seeds beside
// their corpora under testdata/fuzz: small baseline JPEGs of each kind the
// decoder index and the coefficient cache serve (4:2:0, 4:4:4, 4:2:2, gray,
// restart markers), a progressive one (neither serves it), and baseline
// ones with bytes flipped in the scan or cut short.
func decodeFuzzSeeds(tb testing.TB) [][]byte {
	pic := testPicture(96, 72)
	rgb := make([]byte, 0, 96*72*3)
	gray := make([]byte, 0, 96*72)
	for i := 0; i < len(pic.Pix); i += 4 {
		rgb = append(rgb, pic.Pix[i:i+3]...)
		gray = append(gray, byte((int(pic.Pix[i])+int(pic.Pix[i+1])+int(pic.Pix[i+2]))/3))
	}
	var seeds [][]byte
	add := func(pix []byte, nc, hs, vs int, prog bool, restart int) []byte {
		data, err := encodeTurbo(pix, 96, 72, nc, 85, hs, vs, prog, restart, false)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, data)
		return data
	}
	base := add(rgb, 3, 2, 2, false, 0)
	add(rgb, 3, 1, 1, false, 0)
	add(rgb, 3, 2, 1, false, 0)
	add(gray, 1, 1, 1, false, 0)
	rst := add(rgb, 3, 2, 2, false, 1)
	add(rgb, 3, 2, 2, true, 0)
	for _, src := range [][]byte{base, rst} {
		sos := bytes.Index(src, []byte{0xFF, 0xDA})
		flipped := bytes.Clone(src)
		flipped[sos+(len(src)-sos)*2/3] ^= 0x5A
		seeds = append(seeds, flipped, src[:sos+(len(src)-sos)/2])
	}
	return seeds
}

// errClass is the sentinel err wraps (nil for none).
func errClass(err error) error {
	for _, s := range []error{errs.Corrupt, errs.TooLarge, errs.Unsupported} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// fuzzCompare fails t unless a decode with the decoder index or the
// coefficient cache (got, errGot) is the plain decode's (want, errWant):
// the same bytes, or an error of the same class. lenient allows the one
// difference a served decode may have: it reads less of the file (it
// starts at a checkpoint, or copies MCUs out of the cache), so it may
// succeed where the plain decode finds corruption in the bytes it skips.
func fuzzCompare(t *testing.T, what string, got, want []byte, errGot, errWant error, lenient bool) {
	t.Helper()
	checkFuzzErr(t, what, errGot)
	switch {
	case errWant == nil && errGot != nil:
		t.Fatalf("%s: %v; the plain decode succeeds", what, errGot)
	case errWant == nil && !bytes.Equal(got, want):
		t.Fatalf("%s: other bytes than the plain decode's", what)
	case errWant != nil && errGot == nil && !lenient:
		t.Fatalf("%s: no error; the plain decode's: %v", what, errWant)
	case errWant != nil && errGot != nil && errClass(errGot) != errClass(errWant):
		t.Fatalf("%s: %v; the plain decode's: %v", what, errGot, errWant)
	}
}

// fuzzPlain is the plain decode FuzzDecodeIndex and FuzzDecodeCoefs compare
// with: no index, no cache, the same pixel budget.
func fuzzPlain(t *testing.T, data []byte, tr *transform.Transform, keys []det.Key) (outs [][]byte, errs []error) {
	d := NewDecoder(WithPixelBudget(4 << 20))
	defer d.Close()
	for _, k := range keys {
		out := make([]byte, tr.SampleBytes())
		err := d.Decode(data, tr, k, out)
		checkFuzzErr(t, "plain", err)
		outs, errs = append(outs, out), append(errs, err)
	}
	return outs, errs
}

// coefCounts is what d's last decode through C stored in and copied out of
// the coefficient cache, in MCUs (none before C has decoded anything).
func coefCounts(d *Decoder) (c struct{ stored, hits int64 }) {
	j := d.fast.s.Stats() // zero before C has decoded anything
	c.stored, c.hits = j.CoefsStored, j.CoefsHits
	return c
}

func fuzzKeys(key uint64) []det.Key {
	return []det.Key{{Seed: key, Index: key >> 8}, {Seed: key, Epoch: 1, Index: key >> 8}}
}

// FuzzDecodeIndex decodes arbitrary bytes through a decoder index
// (huff.c's checkpoints): a crop decoded once (making the
// file's index), the same crop again (started at the index's checkpoints)
// and another crop (the index grown by the first), each against the plain
// decode of the same crop: the same bytes or the same class of error; the
// other crop may succeed where the plain decode fails only if it started
// at a checkpoint. Checkpoints every 16 pixels, so that small files have
// many.
//
//	go test -run XXX -fuzz FuzzDecodeIndex -fuzztime 10m ./pipeline
func FuzzDecodeIndex(f *testing.F) {
	for _, s := range decodeFuzzSeeds(f) {
		f.Add(s, uint64(len(s)))
	}
	tr := smallTrain(f)
	f.Fuzz(func(t *testing.T, data []byte, key uint64) {
		fuzzDeadline(t, func() {
			keys := fuzzKeys(key)
			want, errWant := fuzzPlain(t, data, tr, keys)
			ix := index.New(1 << 20)
			d := NewDecoder(WithPixelBudget(4<<20), WithIndex(ix))
			defer d.Close()
			knobsOf(d).IxPx = 16
			got := make([]byte, tr.SampleBytes())
			err := d.Decode(data, tr, keys[0], got)
			fuzzCompare(t, "making the index", got, want[0], err, errWant[0], false)
			err = d.Decode(data, tr, keys[0], got)
			fuzzCompare(t, "the same crop through the index", got, want[0], err, errWant[0], false)
			err = d.Decode(data, tr, keys[1], got)
			fuzzCompare(t, "another crop through the index", got, want[1], err, errWant[1], d.fast.stats().ckSeeks > 0)
		})
	})
}

// FuzzDecodeCoefs decodes arbitrary bytes through a coefficient cache
// (coefs.c), alone (a file admitted on its first decode) and beside a
// decoder index (admitted on its second): a crop decoded until the cache
// has stored it, then again (its MCUs copied out of the cache), then
// another crop, each against the plain decode of the same crop, as
// FuzzDecodeIndex compares. A decode that succeeded and stored MCUs must be
// followed by one of the same crop that copies them.
//
//	go test -run XXX -fuzz FuzzDecodeCoefs -fuzztime 10m ./pipeline
func FuzzDecodeCoefs(f *testing.F) {
	for _, s := range decodeFuzzSeeds(f) {
		f.Add(s, uint64(len(s)))
	}
	tr := smallTrain(f)
	f.Fuzz(func(t *testing.T, data []byte, key uint64) {
		fuzzDeadline(t, func() {
			keys := fuzzKeys(key)
			want, errWant := fuzzPlain(t, data, tr, keys)
			for _, withIndex := range []bool{false, true} {
				cc := codec.NewCoefCache(1 << 24)
				defer cc.Close()
				opts := []Option{WithPixelBudget(4 << 20), WithCoefCache(cc)}
				if withIndex {
					opts = append(opts, WithIndex(index.New(1<<20)))
				}
				d := NewDecoder(opts...)
				defer d.Close()
				knobsOf(d).IxPx = 16
				got := make([]byte, tr.SampleBytes())
				stored := int64(0)
				for range 2 { // the second admits with an index
					err := d.Decode(data, tr, keys[0], got)
					fuzzCompare(t, "filling the cache", got, want[0], err, errWant[0], false)
					if err == nil { // a failed decode leaves nothing in the cache
						stored += coefCounts(d).stored
					}
				}
				err := d.Decode(data, tr, keys[0], got)
				fuzzCompare(t, "the same crop from the cache", got, want[0], err, errWant[0], false)
				if stored > 0 && coefCounts(d).hits == 0 {
					t.Fatalf("index %v: %d MCUs stored, none copied by a decode of the same crop", withIndex, stored)
				}
				err = d.Decode(data, tr, keys[1], got)
				fuzzCompare(t, "another crop with the cache", got, want[1], err, errWant[1],
					coefCounts(d).hits > 0 || d.fast.stats().ckSeeks > 0)
			}
		})
	})
}

// TestDecodeFuzzSeedsServed checks that FuzzDecodeIndex's and
// FuzzDecodeCoefs's seeds reach what they fuzz: each intact baseline seed
// decoded again starts at a checkpoint of its index, and copies MCUs out of
// the coefficient cache.
func TestDecodeFuzzSeedsServed(t *testing.T) {
	tr := smallTrain(t)
	seeds := decodeFuzzSeeds(t)
	for i, s := range seeds[:5] { // the intact baseline ones
		ix, cc := index.New(1<<20), codec.NewCoefCache(1<<24)
		d := NewDecoder(WithIndex(ix))
		knobsOf(d).IxPx = 16
		c := NewDecoder(WithCoefCache(cc))
		out := make([]byte, tr.SampleBytes())
		for range 2 {
			if err := d.Decode(s, tr, det.Key{Seed: 7}, out); err != nil {
				t.Fatalf("seed %d: %v", i, err)
			}
			if err := c.Decode(s, tr, det.Key{Seed: 7}, out); err != nil {
				t.Fatalf("seed %d: %v", i, err)
			}
		}
		if seeks, hits := d.fast.stats().ckSeeks, c.fast.s.Stats().CoefsHits; seeks == 0 || hits == 0 {
			t.Errorf("seed %d: %d checkpoint seeks with the index, %d MCUs from the cache", i, seeks, hits)
		}
		d.Close()
		c.Close()
		cc.Close()
	}
}
