package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	tr := smallTrain(f)
	out := make([]byte, tr.SampleBytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dk := range decoderKinds {
			d := NewDecoder(append(dk.opts, WithPixelBudget(4<<20))...)
			err := d.Decode(data, tr, Key{Seed: 1, Index: uint64(len(data))}, out)
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
