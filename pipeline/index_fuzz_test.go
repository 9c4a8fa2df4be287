//go:build cgo

package pipeline

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// indexFuzzFiles are a few photos of the repository's set (one of each
// kind the decoder indexes: 4:2:0, 4:4:4, gray, restart markers) with
// complete decoder indexes (every checkpoint known), made once.
var indexFuzzFiles = sync.OnceValues(func() (files, blobs [][]byte) {
	paths, _ := filepath.Glob(filepath.Join(fastPhotoDir, "*", "*.jpg"))
	sort.Strings(paths)
	d := NewDecoder()
	defer d.Close()
	ix := index.New(1 << 30)
	d.opts.index = ix
	whole, _ := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpResize, Size: [2]int{32, 32}})
	out := make([]byte, whole.SampleBytes())
	for _, p := range paths {
		if !strings.HasSuffix(p, "/000000.jpg") && !strings.Contains(p, "-444") && !strings.Contains(p, "-gray") && !strings.Contains(p, "-restart") {
			continue
		}
		data, err := os.ReadFile(p)
		if err == nil {
			err = d.Decode(data, whole, det.Key{}, out)
		}
		if err != nil {
			return nil, nil
		}
		files = append(files, data)
		blobs = append(blobs, ixGet(ix, keyOf(data)))
	}
	return files, blobs
})

// mutate applies edits (pairs of a 16-bit offset into the scan, taken
// modulo its length, and a byte XORed there) to a copy of data, then cuts
// it to cut bytes if 0 < cut < its length.
func mutate(data, edits []byte, cut int) []byte {
	m := bytes.Clone(data)
	sos := bytes.Index(m, []byte{0xFF, 0xDA})
	if sos < 0 {
		sos = 0
	}
	for len(edits) >= 3 {
		off := sos + int(binary.LittleEndian.Uint16(edits))%(len(m)-sos)
		m[off] ^= edits[2]
		edits = edits[3:]
	}
	if cut > 0 && cut < len(m) {
		m = m[:cut]
	}
	return m
}

func checkFuzzErr(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !IsBadInput(err) {
		t.Fatalf("%s: error wraps no sentinel: %v", what, err)
	}
	if strings.Contains(err.Error(), "decoder panicked") {
		t.Fatalf("%s: %v", what, err)
	}
}

// FuzzIndexStale: a file changed (bytes flipped in its scan, or cut short)
// after its decoder index was made. Through an Index, which keys entries by
// content, the changed file must decode exactly as it does without one:
// the same error or the same bytes; likewise through a CoefCache that holds
// the original's coefficients, epoch after epoch. And the old index forced onto the new
// bytes (what a hash collision would do) must give an error or pixels,
// never a crash, a hang or a panic.
//
//	go test -run XXX -fuzz FuzzIndexStale -fuzztime 60s ./pipeline
func FuzzIndexStale(f *testing.F) {
	f.Add(uint8(0), []byte{0x10, 0x00, 0x01}, uint16(0), uint64(1))
	f.Add(uint8(1), []byte{0x00, 0x40, 0xFF, 0x33, 0x12, 0x80}, uint16(0), uint64(2))
	f.Add(uint8(2), []byte{}, uint16(20000), uint64(3))
	f.Add(uint8(3), []byte{0x00, 0x10, 0x0F}, uint16(9000), uint64(4))
	f.Add(uint8(4), []byte{0x99, 0x01, 0xD0}, uint16(0), uint64(5))
	tr := fastTransforms(f)[0].t
	f.Fuzz(func(t *testing.T, which uint8, edits []byte, cut uint16, key uint64) {
		checkStale(t, tr, int(which), edits, int(cut), key)
	})
}

// checkStale is FuzzIndexStale's check of one changed file.
func checkStale(t *testing.T, tr *transform.Transform, which int, edits []byte, cut int, key uint64) {
	files, blobs := indexFuzzFiles()
	if len(files) == 0 {
		t.Fatalf("no photos under %s", fastPhotoDir)
	}
	i := which % len(files)
	m := mutate(files[i], edits, cut)
	k := det.Key{Seed: key, Index: key >> 8}
	a, b := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())

	ix := index.New(1 << 20)
	ix.Store(keyOf(files[i]), blobs[i], 0)
	warm, cold := NewDecoder(WithIndex(ix)), NewDecoder()
	defer warm.Close()
	defer cold.Close()
	errA, errB := warm.Decode(m, tr, k, a), cold.Decode(m, tr, k, b)
	checkFuzzErr(t, "with an index", errA)
	checkFuzzErr(t, "without", errB)
	if (errA == nil) != (errB == nil) || errA == nil && !bytes.Equal(a, b) {
		t.Fatalf("the changed file decodes differently with the old file's index in the Index: %v vs %v", errA, errB)
	}

	// The coefficient cache holding the original's coefficients (all of
	// them: a whole-image decode) and filling with the changed file's, over
	// three epochs of crops: the same bytes as without whenever a decode
	// without succeeds (a decode that fails leaves nothing of itself
	// behind). Some corruption is found only on some paths through the
	// scan, with or without a cache: a restart interval with bytes left
	// over shows only to a decoder that reads on into the next interval,
	// not to one that seeks to its marker. A decode that copies MCUs from
	// the cache, or starts at a checkpoint of the changed file's own index
	// (made by an earlier decode here), reads less, so it may succeed where
	// one without either fails: with the coefficients those bytes decoded
	// to before, without error.
	cc := codec.NewCoefCache(1 << 26)
	defer cc.Close()
	ccd := NewDecoder(WithIndex(ix), WithCoefCache(cc))
	defer ccd.Close()
	whole, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpResize, Size: [2]int{32, 32}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ccd.Decode(files[i], whole, det.Key{}, make([]byte, whole.SampleBytes())); err != nil {
		t.Fatalf("the original: %v", err)
	}
	for e := range 3 {
		ke := det.Key{Seed: key, Epoch: uint64(e), Index: key >> 8}
		errA := ccd.Decode(m, tr, ke, a)
		hits, seeks := ccd.fast.s.Stats().CoefsHits, ccd.fast.stats().ckSeeks
		errB := cold.Decode(m, tr, ke, b)
		checkFuzzErr(t, "with a coefficient cache", errA)
		switch {
		case errB == nil && (errA != nil || !bytes.Equal(a, b)):
			t.Fatalf("epoch %d: the changed file decodes differently with the coefficient cache: %v vs %v", e, errA, errB)
		case errB != nil && errA == nil && hits == 0 && seeks == 0:
			t.Fatalf("epoch %d: with the coefficient cache, nothing taken from it, no checkpoint used, no error; without: %v", e, errB)
		}
	}

	stale := NewDecoder()
	defer stale.Close()
	knobsOf(stale).ForceIndex = blobs[i]
	checkFuzzErr(t, "old index forced", stale.Decode(m, tr, k, a))
	knobsOf(stale).ForceIndex = nil
	if err := stale.Decode(files[i], tr, k, a); err != nil {
		t.Fatalf("the decoder fails on the original after: %v", err)
	}
}

// TestExactIndexStaleRandom runs FuzzIndexStale's check on a few hundred
// pseudo-random changes (flipped bytes in the scan, cuts) every time the
// tests run, besides the fuzz target's seeds.
func TestExactIndexStaleRandom(t *testing.T) {
	exactTest(t)
	tr := fastTransforms(t)[0].t
	r := rand.New(rand.NewPCG(19, 1))
	n := 400
	if testing.Short() {
		n = 60
	}
	for range n {
		edits := make([]byte, 3*r.IntN(4))
		for j := range edits {
			edits[j] = byte(r.Uint32())
		}
		cut := 0
		if r.IntN(3) == 0 {
			cut = r.IntN(1 << 16)
		}
		checkStale(t, tr, r.IntN(256), edits, cut, r.Uint64())
	}
}

// FuzzIndexBlob: a decoder index with arbitrary bytes in it (as a corrupt
// file on disk could hold, were its checksum to pass): positions and DC
// predictors anywhere, headers changed. Given to the decoder, it must be
// refused or give an error or pixels, never a crash.
//
//	go test -run XXX -fuzz FuzzIndexBlob -fuzztime 60s ./pipeline
func FuzzIndexBlob(f *testing.F) {
	f.Add(uint8(0), []byte{0x20, 0x00, 0x07}, uint64(1))
	f.Add(uint8(1), []byte{0x24, 0x00, 0x80, 0x25, 0x00, 0x80}, uint64(2))
	f.Add(uint8(2), []byte{0x09, 0x00, 0x02}, uint64(3))
	f.Add(uint8(3), []byte{0x40, 0x01, 0xFF}, uint64(4))
	tr := fastTransforms(f)[1].t
	f.Fuzz(func(t *testing.T, which uint8, edits []byte, key uint64) {
		files, blobs := indexFuzzFiles()
		if len(files) == 0 {
			t.Fatalf("no photos under %s", fastPhotoDir)
		}
		i := int(which) % len(files)
		blob := bytes.Clone(blobs[i])
		for len(edits) >= 3 {
			blob[int(binary.LittleEndian.Uint16(edits))%len(blob)] ^= edits[2]
			edits = edits[3:]
		}
		d := NewDecoder()
		defer d.Close()
		knobsOf(d).ForceIndex = blob
		out := make([]byte, tr.SampleBytes())
		checkFuzzErr(t, "garbage index", d.Decode(files[i], tr, det.Key{Seed: key}, out))
	})
}
