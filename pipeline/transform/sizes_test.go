package transform

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

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
	PadCorner(out, w, h, bw, bh, 4, CHW)
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
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480, 800}}}}, "without max_size"},
		{[]optab.Op{{Kind: OpRandomResize, Args: &RandomResizeArgs{MinSize: 480, MaxSize: 800}}}, "RandomResize gives sizes without a bound"},
		{[]optab.Op{{Kind: OpResize, Size: [2]int{256, 0}}}, "RandomShortestSize with a max_size"},
		{[]optab.Op{{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480}, MaxSize: 600}}, {Kind: optab.OpTrivialAugmentWide, Args: &optab.TrivialAugmentWideArgs{Bins: 31}}}, "compiled for one size"},
		{[]optab.Op{{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480}, MaxSize: 600}}, {Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{
			{Kind: optab.OpAugMix, Args: &optab.AugMixArgs{Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1}}}}}, "AugMix after a geometry of per-sample sizes"},
		{[]optab.Op{{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MaxSize: 600}}}, "min_size of 0 sizes"},
		{[]optab.Op{{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{0}, MaxSize: 600}}}, "sides must be in"},
		{[]optab.Op{{Kind: OpRandomResize, Args: &RandomResizeArgs{MinSize: 800, MaxSize: 480}}, {Kind: OpCenterCrop, Size: [2]int{224, 224}}}, "min_size < max_size"},
		{[]optab.Op{{Kind: OpRandomZoomOut, P: 0.5, Args: &ZoomOutArgs{SideRange: [2]float64{1, 4}}}, {Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480}, MaxSize: 600}}}, "must come first"},
		{[]optab.Op{{Kind: optab.OpRandomHorizontalFlip, P: 0.5}, {Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480}, MaxSize: 600}}}, "the first op must be the geometry"},
		{[]optab.Op{{Kind: optab.OpRandomPhotometricDistort, P: 0.5, Args: &optab.PhotometricDistortArgs{Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}},
			{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480}, MaxSize: 600}}}, "needs a geometry that ends in Resize((h, w))"},
	} {
		_, err := NewTransform(CHW, c.ops...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one saying %q", c.ops, err, c.want)
		}
	}
	// Which ops are compiled for one size is their Def's to say (OneSize):
	// the policies. GaussianBlur is not: its kernel runs on any size, and
	// a sample too small for it fails alone (TestBlurOfPerSampleSizes).
	var oneSize []string
	for k, d := range optab.Defs {
		if d.OneSize {
			oneSize = append(oneSize, string(k))
		}
	}
	slices.Sort(oneSize)
	if want := []string{"AugMix", "AutoAugment", "RandAugment", "TimmAugMix", "TimmAutoAugment", "TimmRandAugment", "TrivialAugmentWide"}; !slices.Equal(oneSize, want) {
		t.Errorf("the ops compiled for one size are %v, want %v", oneSize, want)
	}
	vt, err := NewViews(CHW, ViewGroup{Count: 2, Ops: []optab.Op{{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480}, MaxSize: 600}}}})
	if err == nil || !strings.Contains(err.Error(), "several views") {
		t.Errorf("two views of per-sample sizes: %v, %v; want refused", vt, err)
	}
	// A CenterCrop after them fixes the size: no per-sample sizes.
	for _, op := range []optab.Op{{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{480}}}, {Kind: OpRandomResize, Args: &RandomResizeArgs{MinSize: 256, MaxSize: 320}}} {
		tr, err := NewTransform(CHW, op, optab.Op{Kind: OpCenterCrop, Size: [2]int{224, 224}})
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
