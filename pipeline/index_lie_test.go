//go:build cgo

package pipeline

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/det"
)

// craftedEntry is an entry of a crafted index file.
type craftedEntry struct {
	key  indexKey
	blob []byte
}

// craftIndexFile writes entries as an index file for fingerprint, with the
// checksum recomputed: what anyone who can write --index-dir can make.
func craftIndexFile(fingerprint string, ents []craftedEntry) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.WriteString(index.FileMagic)
	b.Write(le.AppendUint32(nil, index.FileVersion))
	b.Write(le.AppendUint32(nil, uint32(len(fingerprint))))
	b.WriteString(fingerprint)
	b.Write(le.AppendUint64(nil, uint64(len(ents))))
	for _, e := range ents {
		b.Write(le.AppendUint64(nil, e.key.Sum))
		b.Write(le.AppendUint64(nil, uint64(e.key.Size)))
		b.Write(le.AppendUint32(nil, uint32(len(e.blob))))
		b.Write(e.blob)
	}
	b.Write(le.AppendUint32(nil, crc32.Checksum(b.Bytes(), crc32.MakeTable(crc32.Castagnoli))))
	return b.Bytes()
}

// diskBlob is k's entry in ix as Save writes it.
func diskBlob(t testing.TB, ix *index.Index, k indexKey) []byte {
	t.Helper()
	b := ixGet(ix, k)
	if b == nil {
		t.Fatalf("no index entry")
	}
	d := make([]byte, len(b))
	index.BlobConfirmedOnly(d, b)
	return d
}

// blobEdit returns a copy of blob (a disk form) with f applied to each
// known checkpoint k: its position and DC predictors, in place.
func blobEdit(blob []byte, f func(k int, pos *uint32, dc []int16)) []byte {
	b := bytes.Clone(blob)
	n, nc := index.BlobCheckpoints(b)
	dc := make([]int16, nc)
	for k := range n {
		pa, da := index.BlobHeader+4*k, index.BlobHeader+4*n+2*nc*k
		p := binary.LittleEndian.Uint32(b[pa:])
		if p == 0 {
			continue
		}
		for c := range dc {
			dc[c] = int16(binary.LittleEndian.Uint16(b[da+2*c:]))
		}
		f(k, &p, dc)
		binary.LittleEndian.PutUint32(b[pa:], p)
		for c := range dc {
			binary.LittleEndian.PutUint16(b[da+2*c:], uint16(dc[c]))
		}
	}
	return b
}

// liePlans are the lies: each makes, from a file's honest entry (disk
// form) and another file's, the entry a crafted index file holds for it.
var liePlans = []struct {
	name string
	lie  func(r *rand.Rand, own, other []byte) []byte
	// caught: the lie shows at the latest when the file's first decode
	// passes its first rows (which every decode from the scan's start
	// does), so the whole index file must be dropped; static: before any
	// decoding, by the checks against the JPEG's bytes.
	caught, static bool
}{
	{"dc-shifted-everywhere", func(_ *rand.Rand, own, _ []byte) []byte {
		return blobEdit(own, func(_ int, _ *uint32, dc []int16) { dc[0] += 3 })
	}, true, true},
	{"dc-shifted-past-checkpoint-0", func(_ *rand.Rand, own, _ []byte) []byte {
		// Every link between two checkpoints agrees but the first.
		return blobEdit(own, func(k int, _ *uint32, dc []int16) {
			if k > 0 {
				dc[len(dc)-1] -= 2
			}
		})
	}, true, false},
	{"dc-off-by-one-once", func(r *rand.Rand, own, _ []byte) []byte {
		n, _ := index.BlobCheckpoints(own)
		at := 1 + r.IntN(max(n-1, 1))
		return blobEdit(own, func(k int, _ *uint32, dc []int16) {
			if k == at {
				dc[0]++
			}
		})
	}, false, false},
	{"dc-out-of-range", func(_ *rand.Rand, own, _ []byte) []byte {
		return blobEdit(own, func(k int, _ *uint32, dc []int16) {
			if k == 1 {
				dc[0] = 2000
			}
		})
	}, true, true},
	{"positions-garbage", func(r *rand.Rand, own, _ []byte) []byte {
		return blobEdit(own, func(k int, p *uint32, _ []int16) {
			if k > 0 {
				*p = 1 + r.Uint32N(1<<20)
			}
		})
	}, true, false},
	{"positions-one-checkpoint-on", func(_ *rand.Rand, own, _ []byte) []byte {
		// Each checkpoint claims the next one's position: increasing,
		// inside the scan, the last one's copied twice.
		n, _ := index.BlobCheckpoints(own)
		pos := make([]uint32, n)
		blobEdit(own, func(k int, p *uint32, _ []int16) { pos[k] = *p })
		return blobEdit(own, func(k int, p *uint32, _ []int16) {
			if k > 0 && k+1 < n && pos[k+1] != 0 {
				*p = pos[k+1]
			}
		})
	}, true, false},
	{"positions-of-another-file", func(_ *rand.Rand, own, other []byte) []byte {
		// Another photo's checkpoints, under this one's header.
		n, nc := index.BlobCheckpoints(own)
		m, mc := index.BlobCheckpoints(other)
		if nc != mc {
			return blobEdit(own, func(k int, p *uint32, _ []int16) {
				if k > 0 {
					*p += 8
				}
			})
		}
		b := bytes.Clone(own)
		clear(b[index.BlobHeader:])
		for k := range min(n, m) {
			copy(b[index.BlobHeader+4*k:][:4], other[index.BlobHeader+4*k:])
			copy(b[index.BlobHeader+4*n+2*nc*k:][:2*nc], other[index.BlobHeader+4*m+2*mc*k:])
		}
		return b
	}, true, false},
}

// lieRun decodes every file over epochs through an Index loaded from the
// index file raw (with a CoefCache too, with coefs) and without an index,
// with several transforms, and counts the samples that differ and those
// that fail with the index.
func lieRun(t *testing.T, files [][]byte, raw []byte, epochs int, coefs bool) (ix *index.Index, drops []string, wrong, failed, n int) {
	t.Helper()
	ix = index.New(1 << 30)
	ix.OnFileDropped(func(name string, entries int, reason string) {
		drops = append(drops, name+": "+reason)
	})
	if _, err := ix.Load(bytes.NewReader(raw), "fp"); err != nil {
		t.Fatalf("the crafted file was refused at load: %v", err)
	}
	opts := []Option{WithIndex(ix)}
	if coefs {
		cc := codec.NewCoefCache(1 << 28)
		defer cc.Close()
		opts = append(opts, WithCoefCache(cc))
	}
	warm, cold := NewDecoder(opts...), NewDecoder()
	defer warm.Close()
	defer cold.Close()
	for _, tr := range fastTransforms(t)[:2] {
		a, b := make([]byte, tr.t.SampleBytes()), make([]byte, tr.t.SampleBytes())
		for e := range epochs {
			for i, data := range files {
				k := det.Key{Seed: 5, Epoch: uint64(e), Index: uint64(i)}
				if err := cold.Decode(data, tr.t, k, b); err != nil {
					t.Fatal(err)
				}
				n++
				if err := warm.Decode(data, tr.t, k, a); err != nil {
					failed++
					t.Logf("%s epoch %d file %d: %v", tr.name, e, i, err)
					continue
				}
				if !bytes.Equal(a, b) {
					wrong++
				}
			}
		}
	}
	return ix, drops, wrong, failed, n
}

// TestExactIndexFileLies: index files that pass every structural check and the
// checksum but lie (DC predictors shifted everywhere, past the first
// checkpoint only, by one at one checkpoint, out of range; positions
// random, shifted by a checkpoint, another photo's) about every photo, or
// about every other one (the rest honest). Over several epochs, decodes
// through an Index loaded from them give the very bytes of decodes without
// an index, no sample fails, and a lie that any decode from a scan's start
// passes gets the whole file dropped (its honest entries too), counted
// once, reported once; what is saved afterwards holds nothing of it.
func TestExactIndexFileLies(t *testing.T) {
	exactTest(t)
	_, files := fastPhotos(t, 0)
	honest := warmIndex(t, files, 1<<30)
	epochs := 3
	if testing.Short() {
		epochs = 2
	}
	for _, plan := range liePlans {
		for _, mix := range []bool{false, true} {
			name := plan.name
			if mix {
				name += "/every-other"
			}
			t.Run(name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(27, uint64(len(name))))
				var ents []craftedEntry
				var keys []indexKey
				for i, data := range files {
					k := keyOf(data)
					if ixGet(honest, k) == nil {
						continue // progressive: no index
					}
					keys = append(keys, k)
					own := diskBlob(t, honest, k)
					if mix && i%2 == 1 {
						ents = append(ents, craftedEntry{k, own})
						continue
					}
					j := (i + 3) % len(files)
					for ixGet(honest, keyOf(files[j])) == nil {
						j = (j + 1) % len(files)
					}
					other := diskBlob(t, honest, keyOf(files[j]))
					ents = append(ents, craftedEntry{k, plan.lie(r, own, other)})
				}
				ix, drops, wrong, failed, n := lieRun(t, files, craftIndexFile("fp", ents), epochs, mix)
				s := ix.Stats()
				t.Logf("%d samples: %d wrong, %d failed; %d bad, %d stale, %d index files dropped (%v)", n, wrong, failed, s.Bad, s.Stale, s.FilesDropped, drops)
				if wrong != 0 || failed != 0 {
					t.Errorf("%d of %d samples wrong, %d failed", wrong, n, failed)
				}
				if len(drops) > 1 || s.FilesDropped > 1 {
					t.Errorf("the file dropped %d times, reported %d times", s.FilesDropped, len(drops))
				}
				if plan.caught && (s.FilesDropped != 1 || s.Bad+s.Stale == 0) {
					t.Errorf("a lie every decode passes went uncaught: %+v", s)
				}
				if plan.static && (len(drops) != 1 || !strings.HasSuffix(drops[0], index.RejectChecks)) {
					t.Errorf("a lie the JPEG's bytes show was not found by the checks: %v", drops)
				}
				// Saved now: only what decodes here confirmed; nothing of a
				// dropped file but what decodes re-derived.
				var saved bytes.Buffer
				if err := ix.Save(&saved, "fp"); err != nil {
					t.Fatal(err)
				}
				back := index.New(1 << 30)
				if _, err := back.Load(bytes.NewReader(saved.Bytes()), "fp"); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					if b := ixGet(back, k); b != nil {
						got, want := checkpointsOf(b), checkpointsOf(diskBlob(t, honest, k))
						for c, g := range got {
							if w, ok := want[c]; ok && w != g {
								t.Fatalf("saved checkpoint %d %+v; the file's is %+v", c, g, w)
							}
						}
					}
				}
				if s.FilesDropped == 1 {
					if ix.LoadedEntries() != 0 {
						t.Errorf("an entry of the dropped file is still held")
					}
				}
			})
		}
	}
}

// checkpoint is a checkpoint's position and first two DC predictors.
type checkpoint struct {
	pos     uint32
	dc, dc2 int16
}

// checkpointsOf are a blob's known checkpoints, by number.
func checkpointsOf(blob []byte) map[int]checkpoint {
	m := map[int]checkpoint{}
	blobEdit(blob, func(k int, p *uint32, dc []int16) {
		c := checkpoint{pos: *p, dc: dc[0]}
		if len(dc) > 1 {
			c.dc2 = dc[len(dc)-1]
		}
		m[k] = c
	})
	return m
}

// TestIndexFileNotConfirmedNotSaved: an honest index file loaded and only
// half its photos decoded: Save writes those (with what their decodes
// confirmed or recorded) and none of the others.
func TestIndexFileNotConfirmedNotSaved(t *testing.T) {
	_, files := fastPhotos(t, 0)
	honest := warmIndex(t, files, 1<<30)
	var buf bytes.Buffer
	if err := honest.Save(&buf, "fp"); err != nil {
		t.Fatal(err)
	}
	ix := index.New(1 << 30)
	if n, err := ix.Load(bytes.NewReader(buf.Bytes()), "fp"); err != nil || n == 0 {
		t.Fatalf("Load: %d, %v", n, err)
	}
	d := NewDecoder(WithIndex(ix))
	defer d.Close()
	tr := fastTransforms(t)[0].t
	out := make([]byte, tr.SampleBytes())
	decoded := map[indexKey]bool{}
	for i, data := range files {
		if i%2 == 0 {
			if err := d.Decode(data, tr, det.Key{Seed: 3, Index: uint64(i)}, out); err != nil {
				t.Fatal(err)
			}
			decoded[keyOf(data)] = true
		}
	}
	buf.Reset()
	if err := ix.Save(&buf, "fp"); err != nil {
		t.Fatal(err)
	}
	back := index.New(1 << 30)
	if _, err := back.Load(bytes.NewReader(buf.Bytes()), "fp"); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, data := range files {
		k := keyOf(data)
		b := ixGet(back, k)
		switch {
		case b != nil && !decoded[k]:
			t.Errorf("saved a loaded entry no decode confirmed")
		case b != nil:
			kept++
		}
	}
	if kept == 0 {
		t.Errorf("nothing saved of the entries decodes confirmed")
	}
	if s := ix.Stats(); s.Bad+s.Stale != 0 || s.FilesDropped != 0 {
		t.Errorf("an honest file was blamed: %+v", s)
	}
}

// TestIndexFileSureBitRefused: a file whose positions carry the in-memory
// "confirmed" bit is not an index file Save writes: refused whole.
func TestIndexFileSureBitRefused(t *testing.T) {
	_, files := fastPhotos(t, 4)
	honest := warmIndex(t, files, 1<<30)
	k := keyOf(files[0])
	raw := craftIndexFile("fp", []craftedEntry{{k, ixGet(honest, k)}}) // as held in memory
	ix := index.New(1 << 30)
	if n, err := ix.Load(bytes.NewReader(raw), "fp"); !errors.Is(err, index.ErrFile) || n != 0 || !strings.Contains(err.Error(), "not an index") {
		t.Errorf("Load: %d, %v; want it refused", n, err)
	}
	if s := ix.Stats(); s.Entries != 0 || s.FilesDropped != 1 {
		t.Errorf("after a refused file: %+v", s)
	}
}
