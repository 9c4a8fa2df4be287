//go:build cgo

package pipeline

import (
	"bytes"
	"errors"
	"testing"
)

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
	pic := testPicture(96, 72)
	rgb := make([]byte, 0, 96*72*3)
	for i := 0; i < len(pic.Pix); i += 4 {
		rgb = append(rgb, pic.Pix[i:i+3]...)
	}
	a, err := encodeTurbo(rgb, 96, 72, 3, 85, 2, 2, false, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeTurbo(rgb, 96, 72, 3, 40, 2, 2, false, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	tr := smallTrain(t)
	k := Key{Seed: 3}
	want := make([]byte, tr.SampleBytes())
	plain := NewDecoder()
	defer plain.Close()
	if err := plain.Decode(b, tr, k, want); err != nil {
		t.Fatal(err)
	}
	whole := mustTransform(t, CHW, Op{Kind: OpResize, Size: [2]int{32, 32}})
	for _, v := range []struct{ withIndex, fallback bool }{{false, false}, {true, false}, {true, true}} {
		withIndex := v.withIndex
		for _, forge := range []bool{false, true} {
			cc := NewCoefCache(1 << 24)
			if v.fallback {
				cc.mac = nil // as where GCM is refused (FIPS 140-only mode)
			}
			opts := []Option{WithCoefCache(cc)}
			var ix *Index
			if withIndex {
				ix = NewIndex(1 << 24)
				opts = append(opts, WithIndex(ix))
			}
			d := NewDecoder(opts...)
			// With an index, a's second decode is the one admitted.
			n := 1
			if withIndex {
				n = 2
			}
			for range n {
				if err := d.Decode(a, whole, Key{}, make([]byte, whole.SampleBytes())); err != nil {
					t.Fatal(err)
				}
			}
			ka, _ := cc.id(a, new([16]byte))
			kb, checkB := cc.id(b, new([16]byte))
			ha, hb := coefHint(a), coefHint(b)
			cc.t.mu.Lock()
			e := cc.t.entries[ka]
			if e == nil || d.fast.s.Stats().CoefsStored == 0 || withIndex && !e.xxOK {
				cc.t.mu.Unlock()
				t.Fatalf("index %v: a's decode stored nothing (%d MCUs), or no index key: %+v", withIndex, d.fast.s.Stats().CoefsStored, e)
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
			got := make([]byte, tr.SampleBytes())
			if err := d.Decode(b, tr, k, got); err != nil {
				t.Fatal(err)
			}
			hits, coll := d.fast.s.Stats().CoefsHits, cc.Stats().Collisions
			switch {
			case !forge && (hits != 0 || coll != 1 || !bytes.Equal(got, want)):
				t.Errorf("index %v, a collision: %d MCUs from the other file's entry, %d collisions counted, same bytes as without the cache: %v", withIndex, hits, coll, bytes.Equal(got, want))
			case forge && (hits == 0 || bytes.Equal(got, want)):
				t.Errorf("index %v, check forged: %d MCUs from the other file's entry, same bytes as without the cache: %v; the test shows nothing", withIndex, hits, bytes.Equal(got, want))
			}
			if withIndex && !forge {
				// b's index entry is b's own: its key was hashed, not
				// taken from a's entry.
				if blob, _ := ix.Lookup(keyOf(b)); blob == nil {
					t.Errorf("b has no index entry under its own key after its decode")
				}
			}
			d.Close()
			cc.Close()
		}
	}
}

// TestTranscodeCollision: a progressive file whose key is the key of
// another progressive file's transcode entry (filed there by hand) is
// decoded as itself, from its own bytes, and the collision counted; the
// transcode of the other file is not used for it.
func TestTranscodeCollision(t *testing.T) {
	files, _ := progressiveJPEGs(t)
	if len(files) < 2 {
		t.Skip("fewer than two progressive files")
	}
	a, b := files[0].data, files[1].data
	tr, plain, d, cc := transcodeRig(t)
	out := make([]byte, tr.SampleBytes())
	for range 2 { // transcoded on the first, decoded from it on the second
		if err := d.Decode(a, tr, Key{}, out); err != nil {
			t.Fatal(err)
		}
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
	want, got := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
	if err := plain.Decode(b, tr, Key{Epoch: 1}, want); err != nil {
		t.Fatal(err)
	}
	hits := cc.Stats().TranscodeHits
	if err := d.Decode(b, tr, Key{Epoch: 1}, got); err != nil {
		t.Fatal(err)
	}
	if s := cc.Stats(); s.Collisions != 1 || s.TranscodeHits != hits || !bytes.Equal(got, want) {
		t.Errorf("b under a's transcode entry: %d collisions, %d transcode hits (was %d), same bytes as without the cache: %v",
			s.Collisions, s.TranscodeHits, hits, bytes.Equal(got, want))
	}
}

// TestTranscodeEntryGone: a transcode's coefficient entry in use by
// another Decoder (marked busy by hand) leaves the decode to the
// progressive file itself; one gone (dropped by hand here; in use, not
// yet stored by the Decoder making it) makes the transcode forgotten and
// made again on the next decode. The same bytes every time, and neither
// is a fallback.
func TestTranscodeEntryGone(t *testing.T) {
	files, _ := progressiveJPEGs(t)
	data := files[0].data
	tr, plain, d, cc := transcodeRig(t)
	want, got := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
	key, _ := cc.id(data, new([16]byte))
	for step, what := range []string{"transcode", "busy", "decode", "gone", "again", "decode"} {
		k := Key{Epoch: uint64(step)}
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
		if err := plain.Decode(data, tr, k, want); err != nil {
			t.Fatal(err)
		}
		if err := d.Decode(data, tr, k, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("step %d (%s): %v, or the bytes differ", step, what, err)
		}
		cc.t.mu.Lock()
		if e := cc.t.entries[key]; what == "busy" && e != nil {
			e.busy = false
		}
		cc.t.mu.Unlock()
		s := cc.Stats()
		wantFiles := 1
		if what == "gone" {
			wantFiles = 0 // forgotten, made again next time
		}
		if s.TranscodedFiles != wantFiles || s.TranscodeFallbacks != 0 {
			t.Fatalf("step %d (%s): %+v", step, what, s)
		}
	}
	// Hits: every decode but the two that transcoded.
	// The transcode's memory: its headers and its entry, the cache's all
	// but the table entry's overhead.
	if s := cc.Stats(); s.TranscodeHits != 4 || s.Entries != 1 || s.TranscodedBytes+tcOverhead != s.Bytes {
		t.Fatalf("after the steps: %+v", s)
	}
}

// TestFastOutputLength: pipeline/codec (turbo.c) is told the output buffer's length and
// refuses a view that would write past it, whatever the Go side checked
// before.
func TestFastOutputLength(t *testing.T) {
	data := decodeFuzzSeeds(t)[0]
	hd, err := parseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	tr := smallTrain(t)
	p, err := tr.plan(hd.w, hd.h, Key{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	if err := d.decodeFast(data, &hd, &p, CHW, out); err != nil {
		t.Fatal(err)
	}
	f := &d.fast
	for _, short := range []int{1, len(out)} {
		f.setJob(&d.opts, &hd, []samplePlan{p}, []int{0}, len(out)-short, CHW, d.knobs())
		if err := f.s.Err(f.decode(data, out, nil)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("an output buffer %d bytes short: %v; want the job refused", short, err)
		}
	}
	f.setJob(&d.opts, &hd, []samplePlan{p}, []int{0}, len(out), CHW, d.knobs())
	if err := f.s.Err(f.decode(data, out, nil)); err != nil {
		t.Errorf("the whole buffer: %v", err)
	}
}
