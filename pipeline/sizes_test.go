package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPerSampleSizes makes a batch of RandomShortestSize(max_size) with a
// flip and ColorJitter, CHW and HWC, uint8 and normalized to float32: each sample in its slot is the same
// bytes as the sample made alone by Resize to its drawn size with the same
// ops after it (the fixed-size path), spread to the bound's top left with
// zeros around it, its size after it; PackSizes then gives each sample's
// window of the largest size, the rest zeros.
func TestPerSampleSizes(t *testing.T) {
	files := memDataset{goldenJPEGs()}
	shortest := Op{Kind: OpRandomShortestSize, Sizes: []int{96, 128, 160}, MaxSize: 200}
	norm := Op{Kind: OpNormalize, Mean: [3]float64{0.5, 0.4, 0.3}, Std: [3]float64{0.2, 0.25, 0.3}}
	var pre []Op // (RandomPhotometricDistort before is refused: TestPerSampleSizesRefused)
	for c, layout := range []Layout{CHW, HWC, CHW, HWC} {
		post, elem := []Op{{Kind: OpRandomHorizontalFlip, P: 0.5}, ColorJitterOp(0.4, 0.4, 0.4, 0.1)}, 1
		if c >= 2 { // float32 samples
			post, elem = append(post, norm), 4
		}
		tr, err := NewTransform(layout, slices.Concat(pre, []Op{shortest}, post)...)
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
			k := Key{Seed: 5, Epoch: 1, Index: uint64(idx)}
			hd, err := parseHeader(files.files[idx])
			if err != nil {
				t.Fatal(err)
			}
			w, h := resizeSize(&shortest, k, hd.w, hd.h)
			if max(w, h) > 200 || (min(w, h) != 96 && min(w, h) != 128 && min(w, h) != 160 && max(w, h) < 199) {
				t.Fatalf("sample %d (%dx%d): drawn %dx%d: not a min_size on the shorter side nor max_size on the longer", idx, hd.w, hd.h, w, h)
			}
			sizes[i] = [2]int{h, w}
			seen[sizes[i]] = true
			fixed, err := NewTransform(layout, slices.Concat(pre, []Op{{Kind: OpResize, Size: [2]int{h, w}}}, post)...)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, fixed.SampleBytes())
			if err := d.Decode(files.files[idx], fixed, k, want); err != nil {
				t.Fatal(err)
			}
			got := b.Data[i*slot : (i+1)*slot]
			if slot != 3*200*200*elem+8 || binary.LittleEndian.Uint32(got[slot-8:]) != uint32(h) || binary.LittleEndian.Uint32(got[slot-4:]) != uint32(w) {
				t.Fatalf("sample %d: slot of %d bytes ending in %v: want 3x200x200 bytes then its size %dx%d", idx, slot, got[slot-8:], h, w)
			}
			checkCorner(t, got[:slot-8], want, w, h, 200, 200, layout, idx, elem)
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
			fixed, _ := NewTransform(layout, slices.Concat(pre, []Op{{Kind: OpResize, Size: [2]int{h, w}}}, post)...)
			want := make([]byte, fixed.SampleBytes())
			if err := d.Decode(files.files[idx], fixed, Key{Seed: 5, Epoch: 1, Index: uint64(idx)}, want); err != nil {
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
func checkCorner(t *testing.T, got, want []byte, w, h, bw, bh int, layout Layout, idx int64, elem int) {
	t.Helper()
	for y := range bh {
		for x := range bw {
			for c := range 3 {
				var g, v []byte
				if layout == CHW {
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

// TestPadCornerFloat spreads float32 samples (Normalize's 4-byte
// elements) as it does bytes.
func TestPadCornerFloat(t *testing.T) {
	w, h, bw, bh := 3, 2, 5, 4
	src := make([]byte, 4*3*w*h)
	for i := range src {
		src[i] = byte(i + 1)
	}
	out := make([]byte, 4*3*bw*bh)
	copy(out, src)
	padCorner(out, w, h, bw, bh, 4, CHW)
	for c := range 3 {
		for y := range bh {
			row := out[4*((c*bh+y)*bw) : 4*((c*bh+y+1)*bw)]
			want := make([]byte, 4*bw)
			if y < h {
				copy(want, src[4*((c*h+y)*w):4*((c*h+y+1)*w)])
			}
			if !bytes.Equal(row, want) {
				t.Fatalf("channel %d row %d: %v, want %v", c, y, row, want)
			}
		}
	}
}

// TestPerSampleSizesRefused: sizes without a bound, or ops compiled for
// one size after them, are refused saying why.
func TestPerSampleSizesRefused(t *testing.T) {
	for _, c := range []struct {
		ops  []Op
		want string
	}{
		{[]Op{{Kind: OpRandomShortestSize, Sizes: []int{480, 800}}}, "without max_size"},
		{[]Op{{Kind: OpRandomResize, Sizes: []int{480, 800}}}, "RandomResize gives sizes without a bound"},
		{[]Op{{Kind: OpResize, Size: [2]int{256, 0}}}, "RandomShortestSize with a max_size"},
		{[]Op{{Kind: OpRandomShortestSize, Sizes: []int{480}, MaxSize: 600}, {Kind: OpGaussianBlur, KernelSize: [2]int{3, 3}, Sigma: [2]float64{0.1, 2}}}, "compiled for one size"},
		{[]Op{{Kind: OpRandomShortestSize, Sizes: []int{480}, MaxSize: 600}, {Kind: OpTrivialAugmentWide, Bins: 31}}, "compiled for one size"},
		{[]Op{{Kind: OpRandomShortestSize, MaxSize: 600}}, "min_size of 0 sizes"},
		{[]Op{{Kind: OpRandomShortestSize, Sizes: []int{0}, MaxSize: 600}}, "sides must be in"},
		{[]Op{{Kind: OpRandomResize, Sizes: []int{800, 480}}, {Kind: OpCenterCrop, Size: [2]int{224, 224}}}, "min_size < max_size"},
		{[]Op{{Kind: OpRandomZoomOut, P: 0.5, SideRange: [2]float64{1, 4}}, {Kind: OpRandomShortestSize, Sizes: []int{480}, MaxSize: 600}}, "must come first"},
		{[]Op{{Kind: OpRandomHorizontalFlip, P: 0.5}, {Kind: OpRandomShortestSize, Sizes: []int{480}, MaxSize: 600}}, "the first op must be the geometry"},
		{[]Op{{Kind: OpRandomPhotometricDistort, P: 0.5, JitterRanges: true, Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}},
			{Kind: OpRandomShortestSize, Sizes: []int{480}, MaxSize: 600}}, "needs a geometry that ends in Resize((h, w))"},
	} {
		_, err := NewTransform(CHW, c.ops...)
		if err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one saying %q", c.ops, err, c.want)
		}
	}
	vt, err := NewViews(CHW, ViewGroup{Count: 2, Ops: []Op{{Kind: OpRandomShortestSize, Sizes: []int{480}, MaxSize: 600}}})
	if err == nil || !strings.Contains(err.Error(), "several views") {
		t.Errorf("two views of per-sample sizes: %v, %v; want refused", vt, err)
	}
	// A CenterCrop after them fixes the size: no per-sample sizes.
	for _, op := range []Op{{Kind: OpRandomShortestSize, Sizes: []int{480}}, {Kind: OpRandomResize, Sizes: []int{256, 320}}} {
		tr, err := NewTransform(CHW, op, Op{Kind: OpCenterCrop, Size: [2]int{224, 224}})
		if err != nil || tr.Varies() {
			t.Errorf("%s then CenterCrop: %v, varies %v", op.Kind, err, tr != nil && tr.Varies())
		}
	}
}

// BenchmarkPackSizes packs a batch of 8 frcnn samples (slots of the
// 1333x1333 bound) of COCO-like sizes to its largest, 800x1333 here: the
// copy the Feed stream makes before it sends a batch.
func BenchmarkPackSizes(b *testing.B) {
	tr, err := Preset("frcnn")
	if err != nil {
		b.Fatal(err)
	}
	t, err := NewTransform(CHW, tr...)
	if err != nil {
		b.Fatal(err)
	}
	sizes := [][2]int{{800, 1066}, {800, 1201}, {1333, 800}, {800, 1333}, {640, 1066}, {800, 800}, {576, 1024}, {800, 1199}}
	slot := t.SampleBytes()
	data := make([]byte, len(sizes)*slot)
	fill := func() {
		for i, s := range sizes {
			binary.LittleEndian.PutUint32(data[(i+1)*slot-8:], uint32(s[0]))
			binary.LittleEndian.PutUint32(data[(i+1)*slot-4:], uint32(s[1]))
		}
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		fill()
		t.PackSizes(data, len(sizes))
	}
}
