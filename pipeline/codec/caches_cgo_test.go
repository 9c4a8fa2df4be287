//go:build cgo

package codec

import (
	"bytes"
	"hash/maphash"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/internal/jpegenc"
	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
)

// The tests here reach into the caches' tables (a collision filed by
// hand, an entry marked busy, dropped or cut short) and decode through
// DecodeViews: one view of the whole source at cacheW x cacheH, bilinear,
// antialiased, at a DCT scale where one fits; the pipeline's own tests
// drive the caches through its Decoder.
const cacheW, cacheH = 40, 30

// decodeCached decodes the JPEG data's cache view with caches c.
func decodeCached(s *Scratch, data []byte, c Caches) ([]byte, error) {
	hd, err := ParseHeader(data)
	if err != nil {
		return nil, err
	}
	// The pipeline's default bounds: 100 scans, a budget of 64 Mpx.
	j := Job{SrcW: hd.W, SrcH: hd.H, Comps: hd.Comps, MaxScans: 100, MaxMemory: (64<<20)*6 + 64<<20}
	out := make([]byte, 3*cacheW*cacheH)
	err = s.DecodeViews(data, hd, &j, []Geometry{whole(hd.W, hd.H, cacheW, cacheH, 0, true)}, []int{0}, out, c, nil)
	return out, err
}

func mustDecodeCached(t testing.TB, s *Scratch, data []byte, c Caches) []byte {
	t.Helper()
	out, err := decodeCached(s, data, c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// encodePicture is picture(w, h) encoded by libjpeg (jpegenc).
func encodePicture(t testing.TB, w, h int, o jpegenc.Options) []byte {
	t.Helper()
	img := picture(w, h)
	rgb := make([]byte, 0, 3*w*h)
	for i := 0; i < len(img.Pix); i += 4 {
		rgb = append(rgb, img.Pix[i:i+3]...)
	}
	data, err := jpegenc.Encode(rgb, w, h, 3, o)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// progressivePair is two progressive JPEGs of other sizes and samplings.
func progressivePair(t testing.TB) (a, b []byte) {
	return encodePicture(t, 333, 251, jpegenc.Options{Quality: 85, HS: 2, VS: 2, Progressive: true}),
		encodePicture(t, 200, 150, jpegenc.Options{Quality: 60, HS: 1, VS: 1, Progressive: true})
}

// transcodeRig is two Scratches, one to decode without caches and one
// with a coefficient cache (which transcodes), freed at t's end.
func transcodeRig(t *testing.T) (plain, s *Scratch, cc *CoefCache) {
	t.Helper()
	cc = NewCoefCache(1 << 30)
	t.Cleanup(cc.Close)
	return newScratch(t), newScratch(t), cc
}

// exactTest marks t as an exactness test, which the race detector
// skews: skipped under -race, make test-go runs it without
// (its tests are named TestExact...). It runs in parallel.
func exactTest(t *testing.T) {
	t.Helper()
	testkit.Exact(t)
	t.Parallel()
}

// TestCoefCacheCollision: a file whose key (its size and the first half
// of its MAC) is a stored file's (a collision, made here by filing the
// stored entry under the second file's key and hint) decodes as it does
// without the cache, not with the other file's coefficients, and does not
// take the other file's decoder-index key from the entry either: the
// entry's check, the MAC's other half, tells them apart. With the check
// forged too, the same decode does take the other file's coefficients:
// what the check prevents. With and without a decoder index (with one,
// a hit takes the file's index key from the entry instead of hashing it),
// and with the two-hash identity used where GCM is refused.
func TestCoefCacheCollision(t *testing.T) {
	a := encodePicture(t, 96, 72, jpegenc.Options{Quality: 85, HS: 2, VS: 2})
	b := encodePicture(t, 96, 72, jpegenc.Options{Quality: 40, HS: 2, VS: 2})
	want := mustDecodeCached(t, newScratch(t), b, Caches{})
	for _, v := range []struct{ withIndex, fallback bool }{{false, false}, {true, false}, {true, true}} {
		withIndex := v.withIndex
		for _, forge := range []bool{false, true} {
			cc := NewCoefCache(1 << 24)
			if v.fallback {
				cc.mac = nil // as where GCM is refused (FIPS 140-only mode)
			}
			c := Caches{Coefs: cc}
			if withIndex {
				c.Index = index.New(1 << 24)
			}
			s := newScratch(t)
			// With an index, a's second decode is the one admitted.
			n := 1
			if withIndex {
				n = 2
			}
			for range n {
				mustDecodeCached(t, s, a, c)
			}
			ka, _ := cc.id(a, new([16]byte))
			kb, checkB := cc.id(b, new([16]byte))
			ha, hb := coefHint(a), coefHint(b)
			cc.t.mu.Lock()
			e := cc.t.entries[ka]
			if e == nil || s.Stats().CoefsStored == 0 || withIndex && !e.xxOK {
				cc.t.mu.Unlock()
				t.Fatalf("index %v: a's decode stored nothing (%d MCUs), or no index key: %+v", withIndex, s.Stats().CoefsStored, e)
			}
			delete(cc.t.entries, ka)
			cc.t.entries[kb] = e
			cc.t.hints[ha]--
			cc.t.hints[hb]++
			e.hint = hb
			if forge {
				e.check = checkB
			}
			cc.t.mu.Unlock()
			got := mustDecodeCached(t, s, b, c)
			hits, coll := s.Stats().CoefsHits, cc.Stats().Collisions
			switch {
			case !forge && (hits != 0 || coll != 1 || !bytes.Equal(got, want)):
				t.Errorf("index %v, a collision: %d MCUs from the other file's entry, %d collisions counted, same bytes as without the cache: %v", withIndex, hits, coll, bytes.Equal(got, want))
			case forge && (hits == 0 || bytes.Equal(got, want)):
				t.Errorf("index %v, check forged: %d MCUs from the other file's entry, same bytes as without the cache: %v; the test shows nothing", withIndex, hits, bytes.Equal(got, want))
			}
			if withIndex && !forge {
				// b's index entry is b's own: its key was hashed, not
				// taken from a's entry.
				if blob, _ := c.Index.Lookup(index.KeyOf(b)); blob == nil {
					t.Errorf("b has no index entry under its own key after its decode")
				}
			}
			cc.Close()
		}
	}
}

// TestTranscodeCollision: a progressive file whose key is the key of
// another progressive file's transcode entry (filed there by hand) is
// decoded as itself, from its own bytes, and the collision counted; the
// transcode of the other file is not used for it.
func TestTranscodeCollision(t *testing.T) {
	a, b := progressivePair(t)
	plain, s, cc := transcodeRig(t)
	c := Caches{Coefs: cc}
	for range 2 { // transcoded on the first, decoded from it on the second
		mustDecodeCached(t, s, a, c)
	}
	ka, _ := cc.id(a, new([16]byte))
	kb, _ := cc.id(b, new([16]byte))
	cc.t.mu.Lock()
	e := cc.t.tc[ka]
	if e == nil || e.seq == nil {
		cc.t.mu.Unlock()
		t.Fatalf("a was not transcoded: %+v", cc.Stats())
	}
	delete(cc.t.tc, ka)
	cc.t.tc[kb] = e
	cc.t.mu.Unlock()
	want := mustDecodeCached(t, plain, b, Caches{})
	hits := cc.Stats().TranscodeHits
	got := mustDecodeCached(t, s, b, c)
	if st := cc.Stats(); st.Collisions != 1 || st.TranscodeHits != hits || !bytes.Equal(got, want) {
		t.Errorf("b under a's transcode entry: %d collisions, %d transcode hits (was %d), same bytes as without the cache: %v",
			st.Collisions, st.TranscodeHits, hits, bytes.Equal(got, want))
	}
}

// TestTranscodeEntryGone: a transcode's coefficient entry in use by
// another decode (marked busy by hand) leaves the decode to the
// progressive file itself; one gone (dropped by hand here; in use, not
// yet stored by the Scratch making it) makes the transcode forgotten and
// made again on the next decode. The same bytes every time, and neither
// is a fallback.
func TestTranscodeEntryGone(t *testing.T) {
	data, _ := progressivePair(t)
	plain, s, cc := transcodeRig(t)
	want := mustDecodeCached(t, plain, data, Caches{})
	key, _ := cc.id(data, new([16]byte))
	for step, what := range []string{"transcode", "busy", "decode", "gone", "again", "decode"} {
		cc.t.mu.Lock()
		switch e := cc.t.entries[key]; {
		case (what == "busy" || what == "gone") && e == nil:
			cc.t.mu.Unlock()
			t.Fatalf("step %d (%s): no entry: %+v", step, what, cc.Stats())
		case what == "busy":
			e.busy = true
		case what == "gone":
			cc.t.drop(key)
		}
		cc.t.mu.Unlock()
		if got, err := decodeCached(s, data, Caches{Coefs: cc}); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("step %d (%s): %v, or the bytes differ", step, what, err)
		}
		cc.t.mu.Lock()
		if e := cc.t.entries[key]; what == "busy" && e != nil {
			e.busy = false
		}
		cc.t.mu.Unlock()
		st := cc.Stats()
		wantFiles := 1
		if what == "gone" {
			wantFiles = 0 // forgotten, made again next time
		}
		if st.TranscodedFiles != wantFiles || st.TranscodeFallbacks != 0 {
			t.Fatalf("step %d (%s): %+v", step, what, st)
		}
	}
	// Hits: every decode but the two that transcoded.
	// The transcode's memory: its headers and its entry, the cache's all
	// but the table entry's overhead.
	if st := cc.Stats(); st.TranscodeHits != 4 || st.Entries != 1 || st.TranscodedBytes+tcOverhead != st.Bytes {
		t.Fatalf("after the steps: %+v", st)
	}
}

// TestExactTranscodeOutputBound: a small progressive file of a large flat image
// (a few bits a block in its DC scan, end-of-band runs for the rest) would
// take more than twice its bytes plus 64 KiB as one sequential scan (an end
// of block per block): its transcode stops at the bound, it decodes as
// progressive (the same bytes), counted, and is not tried again.
func TestExactTranscodeOutputBound(t *testing.T) {
	exactTest(t)
	const w, h = 6144, 6144
	pix := make([]byte, w*h)
	for i := range pix {
		pix[i] = 128
	}
	data, err := jpegenc.Encode(pix, w, h, 1, jpegenc.Options{Quality: 75, HS: 1, VS: 1, Progressive: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, s, cc := transcodeRig(t)
	for e := range 2 {
		want := mustDecodeCached(t, plain, data, Caches{})
		if got, err := decodeCached(s, data, Caches{Coefs: cc}); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("decode %d: %v, or the bytes differ", e, err)
		}
	}
	if st := cc.Stats(); st.TranscodedFiles != 0 || st.TranscodeFallbacks != 1 || st.Bytes > tcOverhead {
		t.Fatalf("a %d-byte file of %dx%d: %+v", len(data), w, h, st)
	}
}

// TestTranscodeWrong: a transcode that fails to decode (here one cut short
// in the cache, standing for a bug) costs no sample: the file is decoded
// again as it is, the same bytes, and the transcode dropped (counted).
func TestTranscodeWrong(t *testing.T) {
	data, _ := progressivePair(t)
	plain, s, cc := transcodeRig(t)
	c := Caches{Coefs: cc}
	mustDecodeCached(t, s, data, c)
	key, _ := cc.id(data, new([16]byte))
	e := cc.t.tc[key]
	if e == nil || e.seq == nil {
		t.Fatalf("not transcoded: %+v", cc.Stats())
	}
	e.seq = e.seq[:len(e.seq)/2]
	want := mustDecodeCached(t, plain, data, Caches{})
	for ep := 1; ep < 3; ep++ {
		if got, err := decodeCached(s, data, c); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("decode %d: %v, or the bytes differ", ep, err)
		}
	}
	if st := cc.Stats(); st.TranscodedFiles != 0 || st.TranscodeFallbacks != 1 || st.TranscodeHits != 1 {
		t.Fatalf("after a transcode that failed to decode: %+v", st)
	}
}

// BenchmarkCoefIdentity is what a cached sample's decode pays to know its
// file (the pipeline's BenchmarkCoefCacheHit's ~100 KB photo), the decode
// itself left out:
//
//	xxhash64+maphash  the decoder-index key and the coefficient cache's
//	                  check hash of the build before (two passes)
//	mac               a hit now: coefHint, the MAC (CoefCache.id) and the
//	                  entry's index key (one pass)
func BenchmarkCoefIdentity(b *testing.B) {
	data, err := os.ReadFile("../../testdata/photos/colorfulcups/000003.jpg")
	if err != nil {
		b.Fatal(err)
	}
	cc := NewCoefCache(1 << 20)
	defer cc.Close()
	seed := maphash.MakeSeed()
	var sink uint64
	b.Run("xxhash64+maphash", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			sink += index.KeyOf(data).Sum ^ maphash.Bytes(seed, data)
		}
	})
	b.Run("mac", func(b *testing.B) {
		var tag [16]byte
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if cc.mayHold(coefHint(data)) {
				b.Fatal("an empty cache may hold the file")
			}
			k, check := cc.id(data, &tag)
			xx, _ := cc.indexKeyOf(k, check)
			sink += k.sum ^ check ^ xx.Sum
		}
	})
	_ = sink
}

// TestCoefFormSIMDSame: the coefficient cache's form of a block is the same
// bytes at every SIMD level (VBMI2's compress, SSSE3's
// shuffles, scalar code), on blocks at the edges of its narrow and wide
// forms: AC values at +-127 (narrow) and +-128, -32768 and 32767 (wide),
// a DC anywhere (it never makes a block wide), and random sparse blocks.
func TestCoefFormSIMDSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 48))
	var blocks []int16
	add := func(f func(b []int16)) {
		b := make([]int16, 64)
		f(b)
		blocks = append(blocks, b...)
	}
	add(func(b []int16) {})                               // all zero
	add(func(b []int16) { b[0] = -32768 })                // a DC alone, however large
	add(func(b []int16) { b[0], b[63] = 2047, 127 })      // narrow at the edge
	add(func(b []int16) { b[1], b[62] = -127, 127 })      // narrow at both edges
	add(func(b []int16) { b[5] = 128 })                   // wide
	add(func(b []int16) { b[33] = -128 })                 // wide, in the upper half
	add(func(b []int16) { b[63], b[40] = -32768, 32767 }) // wide at the extremes
	add(func(b []int16) { b[0], b[1] = 300, -1 })         // the DC's size is not the AC's
	add(func(b []int16) {                                 // every lane nonzero
		for i := range b {
			b[i] = int16(i - 32)
		}
	})
	for range 2000 {
		add(func(b []int16) {
			for range rng.IntN(40) {
				v := int16(rng.IntN(255) - 127)
				if rng.IntN(50) == 0 {
					v = int16(rng.IntN(65536) - 32768)
				}
				b[rng.IntN(64)] = v
			}
		})
	}
	want := coefsForm(blocks, 0)
	if len(want) == 0 {
		t.Fatal("no form written")
	}
	for _, level := range []int{1, 2, 3, 4, 5} {
		if got := coefsForm(blocks, level); !bytes.Equal(got, want) {
			n := min(len(got), len(want))
			at := n
			for i := range n {
				if got[i] != want[i] {
					at = i
					break
				}
			}
			t.Errorf("SIMD level %d (the CPU's best %d): %d bytes, scalar %d, first difference at byte %d", level, SIMDBest(), len(got), len(want), at)
		}
	}
	t.Logf("%d blocks, %d bytes at every level up to %d", len(blocks)/64, len(want), SIMDBest())
}
