package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestPerSampleSizes makes a batch of RandomShortestSize(max_size) with a
// flip and ColorJitter, CHW and HWC, uint8 and normalized to float32: each sample in its slot is the same
// bytes as the sample made alone by Resize to its drawn size with the same
// ops after it (the fixed-size path), spread to the bound's top left with
// zeros around it, its size after it; PackSizes then gives each sample's
// window of the largest size, the rest zeros.
func TestPerSampleSizes(t *testing.T) {
	files := memDataset{goldenJPEGs()}
	shortest := ops.Op{Kind: transform.OpRandomShortestSize, Args: &transform.ShortestSizeArgs{MinSize: []int{96, 128, 160}, MaxSize: 200}}
	norm := ops.Op{Kind: ops.OpNormalize, Args: &ops.NormalizeArgs{Mean: [3]float64{0.5, 0.4, 0.3}, Std: [3]float64{0.2, 0.25, 0.3}}}
	var pre []ops.Op // (RandomPhotometricDistort before is refused: TestPerSampleSizesRefused)
	for c, layout := range []transform.Layout{transform.CHW, transform.HWC, transform.CHW, transform.HWC} {
		post, elem := []ops.Op{{Kind: ops.OpRandomHorizontalFlip, P: 0.5}, ops.ColorJitterOp(0.4, 0.4, 0.4, 0.1)}, 1
		if c >= 2 { // float32 samples
			post, elem = append(post, norm), 4
		}
		tr, err := transform.NewTransform(layout, slices.Concat(pre, []ops.Op{shortest}, post)...)
		if err != nil {
			t.Fatal(err)
		}
		if h, w := tr.Size(); !tr.Varies() || h != 200 || w != 200 {
			t.Fatalf("Varies %v, size %dx%d: want per-sample sizes bounded by 200x200", tr.Varies(), h, w)
		}
		e := NewExecutor(2)
		var b Batch
		if err := e.Fill(context.Background(), files, tr, 5, 1, goldenIndices, PadFromBatch, &b); err != nil {
			t.Fatal(err)
		}
		e.Close()
		if b.N != len(goldenIndices) || len(b.Errors) > 0 {
			t.Fatalf("batch of %d, errors %v", b.N, b.Errors)
		}
		d := NewDecoder()
		sizes := make([][2]int, b.N)
		slot := tr.SampleBytes()
		seen := map[[2]int]bool{}
		for i, idx := range goldenIndices {
			k := det.Key{Seed: 5, Epoch: 1, Index: uint64(idx)}
			hd, err := parseHeader(files.files[idx])
			if err != nil {
				t.Fatal(err)
			}
			w, h := transform.ResizeSize(&shortest, k, hd.w, hd.h)
			if max(w, h) > 200 || (min(w, h) != 96 && min(w, h) != 128 && min(w, h) != 160 && max(w, h) < 199) {
				t.Fatalf("sample %d (%dx%d): drawn %dx%d: not a min_size on the shorter side nor max_size on the longer", idx, hd.w, hd.h, w, h)
			}
			sizes[i] = [2]int{h, w}
			seen[sizes[i]] = true
			fixed, err := transform.NewTransform(layout, slices.Concat(pre, []ops.Op{{Kind: transform.OpResize, Size: [2]int{h, w}}}, post)...)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, fixed.SampleBytes())
			if err := d.Decode(files.files[idx], fixed, k, want); err != nil {
				t.Fatal(err)
			}
			got := b.Data[i*slot : (i+1)*slot]
			tr := got[slot-transform.SizeTrailer:]
			if slot != 3*200*200*elem+transform.SizeTrailer || binary.LittleEndian.Uint32(tr) != uint32(h) || binary.LittleEndian.Uint32(tr[4:]) != uint32(w) ||
				binary.LittleEndian.Uint32(tr[8:]) != uint32(hd.h) || binary.LittleEndian.Uint32(tr[12:]) != uint32(hd.w) {
				t.Fatalf("sample %d: slot of %d bytes ending in %v: want 3x200x200 bytes then its size %dx%d and its image's %dx%d", idx, slot, tr, h, w, hd.h, hd.w)
			}
			checkCorner(t, got[:slot-transform.SizeTrailer], want, w, h, 200, 200, layout, idx, elem)
		}
		d.Close()
		if len(seen) < 3 {
			t.Fatalf("sizes %v: want several sizes among 9 images", sizes)
		}
		bh, bw, got, packed := tr.PackSizes(b.Data, b.N)
		if !slices.Equal(got, sizes) {
			t.Fatalf("PackSizes read sizes %v, want %v", got, sizes)
		}
		for _, s := range sizes {
			if s[0] > bh || s[1] > bw {
				t.Fatalf("packed to %dx%d, smaller than a sample's %v", bh, bw, s)
			}
		}
		if len(packed) != b.N*3*bh*bw*elem {
			t.Fatalf("packed %d bytes, want %d", len(packed), b.N*3*bh*bw*elem)
		}
		// Sample by sample again, now against the packed batch.
		d = NewDecoder()
		for i, idx := range goldenIndices {
			h, w := sizes[i][0], sizes[i][1]
			fixed, _ := transform.NewTransform(layout, slices.Concat(pre, []ops.Op{{Kind: transform.OpResize, Size: [2]int{h, w}}}, post)...)
			want := make([]byte, fixed.SampleBytes())
			if err := d.Decode(files.files[idx], fixed, det.Key{Seed: 5, Epoch: 1, Index: uint64(idx)}, want); err != nil {
				t.Fatal(err)
			}
			n := 3 * bh * bw * elem
			checkCorner(t, packed[i*n:(i+1)*n], want, w, h, bw, bh, layout, idx, elem)
		}
		d.Close()
	}
}

// checkCorner checks that got, a bw x bh sample in layout of elem-byte
// values, is want (w x h) at its top left and zeros elsewhere.
//
// It compares row by row first (bytes.Equal on each row's run of want
// and of zeros: under -race an element-by-element loop is instrumented
// access by access, tens of seconds for TestBoundOwnSize's full-size
// samples); only where a row differs does it walk the pixels, to name
// the first that differs.
func checkCorner(t *testing.T, got, want []byte, w, h, bw, bh int, layout transform.Layout, idx int64, elem int) {
	t.Helper()
	if cornerRowsMatch(got, want, w, h, bw, bh, layout, elem) {
		return
	}
	for y := range bh {
		for x := range bw {
			for c := range 3 {
				var g, v []byte
				if layout == transform.CHW {
					g = got[((c*bh+y)*bw+x)*elem:][:elem]
					if x < w && y < h {
						v = want[((c*h+y)*w+x)*elem:][:elem]
					}
				} else {
					g = got[((y*bw+x)*3+c)*elem:][:elem]
					if x < w && y < h {
						v = want[((y*w+x)*3+c)*elem:][:elem]
					}
				}
				if v == nil {
					v = make([]byte, elem)
				}
				if !bytes.Equal(g, v) {
					t.Fatalf("%s sample %d (%dx%d in %dx%d): pixel (%d, %d) channel %d is %v, want %v", layout, idx, w, h, bw, bh, x, y, c, g, v)
				}
			}
		}
	}
}

// cornerRowsMatch reports whether got is want at its top left and zeros
// elsewhere (checkCorner's check), row by row: CHW's rows are one
// channel's, HWC's all three channels'.
func cornerRowsMatch(got, want []byte, w, h, bw, bh int, layout transform.Layout, elem int) bool {
	if w > bw || h > bh {
		return false // checkCorner's pixel walk says where
	}
	planes, px := 3, elem // CHW: three planes of elem-byte values
	if layout != transform.CHW {
		planes, px = 1, 3*elem // HWC: one plane of 3*elem-byte pixels
	}
	zeros := make([]byte, bw*px)
	for c := range planes {
		for y := range bh {
			row := got[((c*bh+y)*bw)*px:][:bw*px]
			n := 0 // bytes of want at the row's start
			if y < h {
				n = w * px
				if !bytes.Equal(row[:n], want[((c*h+y)*w)*px:][:n]) {
					return false
				}
			}
			if !bytes.Equal(row[n:], zeros[n:]) {
				return false
			}
		}
	}
	return true
}

// TestRaggedSamples: the same job made ragged (WithRagged, JobSpec.ragged)
// leaves each sample compact in its slot, its size after it, and
// PackRagged puts them back to back: each sample's bytes are its window of
// the padded batch (PackSizes of the same samples made padded), CHW and
// HWC, uint8 and float32, under the pad policy's copies too. Two ragged
// slots of the same sample are SameSample whatever the rest of the slot
// holds; another sample, or another size, is not.
func TestRaggedSamples(t *testing.T) {
	files := memDataset{goldenJPEGs()}
	shortest := ops.Op{Kind: transform.OpRandomShortestSize, Args: &transform.ShortestSizeArgs{MinSize: []int{96, 128, 160}, MaxSize: 200}}
	norm := ops.Op{Kind: ops.OpNormalize, Args: &ops.NormalizeArgs{Mean: [3]float64{0.5, 0.4, 0.3}, Std: [3]float64{0.2, 0.25, 0.3}}}
	for c, layout := range []transform.Layout{transform.CHW, transform.HWC, transform.CHW, transform.HWC} {
		ops, elem := []ops.Op{shortest, {Kind: ops.OpRandomHorizontalFlip, P: 0.5}}, 1
		if c >= 2 {
			ops, elem = append(ops, norm), 4
		}
		tr, err := transform.NewTransform(layout, ops...)
		if err != nil {
			t.Fatal(err)
		}
		rt := tr.WithRagged()
		if !rt.Ragged() || tr.Ragged() {
			t.Fatal("WithRagged: want a ragged copy, the transform itself unchanged")
		}
		fill := func(tr *transform.Transform) Batch {
			e := NewExecutor(2)
			defer e.Close()
			var b Batch
			if err := e.Fill(context.Background(), files, tr, 5, 1, goldenIndices, PadFromBatch, &b); err != nil {
				t.Fatal(err)
			}
			return b
		}
		padded, ragged := fill(tr), fill(rt)
		slot := rt.SampleBytes()
		first := bytes.Clone(ragged.Data[:slot])
		bh, bw, sizes, data := tr.PackSizes(padded.Data, padded.N)
		rh, rw, rsizes, rdata := rt.PackRagged(ragged.Data, ragged.N)
		if rh != bh || rw != bw || !slices.Equal(sizes, rsizes) {
			t.Fatalf("layout %d: ragged %dx%d %v, padded %dx%d %v", c, rh, rw, rsizes, bh, bw, sizes)
		}
		off := 0
		for i, s := range sizes {
			h, w := s[0], s[1]
			rowB, brow := w*elem, bw*elem
			planes, rows := 3, h
			if layout == transform.HWC {
				planes, rowB, brow = 1, 3*w*elem, 3*bw*elem
			}
			cell := planes * bh * brow
			for p := range planes {
				for y := range rows {
					want := data[i*cell+(p*bh+y)*brow:][:rowB]
					got := rdata[off+(p*h+y)*rowB:][:rowB]
					if !bytes.Equal(got, want) {
						t.Fatalf("layout %d sample %d (%dx%d) plane %d row %d: the ragged bytes differ from the padded window", c, i, h, w, p, y)
					}
				}
			}
			off += 3 * h * w * elem
		}
		if off != len(rdata) {
			t.Fatalf("layout %d: packed %d bytes, the samples are %d", c, len(rdata), off)
		}
		l := rt.ViewLayout()
		other := bytes.Clone(first)
		for j := 3 * sizes[0][0] * sizes[0][1] * elem; j < slot-transform.SizeTrailer; j++ { // the slot's rest: not compared
			other[j] ^= 0xff
		}
		if !l.SameSample(first, other) {
			t.Errorf("layout %d: SameSample compares past the sample's own bytes", c)
		}
		other[0] ^= 1
		if l.SameSample(first, other) || tr.ViewLayout().SameSample(first, bytes.Clone(first)) != true {
			t.Errorf("layout %d: SameSample of a changed pixel (or of a padded layout)", c)
		}
		other[0] ^= 1
		binary.LittleEndian.PutUint32(other[slot-transform.SizeTrailer:], uint32(sizes[0][0]-1))
		if l.SameSample(first, other) {
			t.Errorf("layout %d: SameSample of another size", c)
		}
	}
}
