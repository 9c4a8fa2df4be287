//go:build cgo

package pipeline

import (
	"bytes"
	"errors"
	"testing"
)

// TestCoefCacheCollision: a file whose key (xxhash64 and size) is a stored
// file's (a hash collision, made here by filing the stored entry under the
// second file's key) decodes as it does without the cache, not with the
// other file's coefficients: the entry's check hash of the bytes tells
// them apart. With the check hash forged too, the same decode does take the
// other file's coefficients: what the check prevents.
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
	for _, forge := range []bool{false, true} {
		cc := NewCoefCache(1 << 24)
		d := NewDecoder(WithCoefCache(cc))
		if err := d.Decode(a, whole, Key{}, make([]byte, whole.SampleBytes())); err != nil {
			t.Fatal(err)
		}
		cc.t.mu.Lock()
		e := cc.t.entries[keyOf(a)]
		if e == nil || d.fast.job.coefs_stored == 0 {
			cc.t.mu.Unlock()
			t.Fatalf("a's decode stored nothing (%d MCUs)", d.fast.job.coefs_stored)
		}
		delete(cc.t.entries, keyOf(a))
		cc.t.entries[keyOf(b)] = e
		if forge {
			e.check = cc.check(b)
		}
		cc.t.mu.Unlock()
		got := make([]byte, tr.SampleBytes())
		if err := d.Decode(b, tr, k, got); err != nil {
			t.Fatal(err)
		}
		hits, coll := d.fast.job.coefs_hits, cc.Stats().Collisions
		switch {
		case !forge && (hits != 0 || coll != 1 || !bytes.Equal(got, want)):
			t.Errorf("a collision: %d MCUs from the other file's entry, %d collisions counted, same bytes as without the cache: %v", hits, coll, bytes.Equal(got, want))
		case forge && (hits == 0 || bytes.Equal(got, want)):
			t.Errorf("check hash forged: %d MCUs from the other file's entry, same bytes as without the cache: %v; the test shows nothing", hits, bytes.Equal(got, want))
		}
		d.Close()
		cc.Close()
	}
}

// TestFastOutputLength: turbo.c is told the output buffer's length and
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
		if err := f.err(f.decode(data, out, nil)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("an output buffer %d bytes short: %v; want the job refused", short, err)
		}
	}
	f.setJob(&d.opts, &hd, []samplePlan{p}, []int{0}, len(out), CHW, d.knobs())
	if err := f.err(f.decode(data, out, nil)); err != nil {
		t.Errorf("the whole buffer: %v", err)
	}
}
