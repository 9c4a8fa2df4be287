//go:build cgo

package pipeline

import (
	"bytes"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestViewsDecodeOnceAtTheFinestScale: the decode of several views is at
// the DCT scale the view that needs the most pixels needs, and a view is
// its one-view bytes whenever that is its own scale (DecodeFast: the
// default decodes every view at full scale).
func TestViewsDecodeOnceAtTheFinestScale(t *testing.T) {
	files := goldenJPEGs()
	groups := []transform.ViewGroup{
		{Count: 1, Ops: []ops.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{16, 16}, Args: &transform.RRCArgs{Scale: [2]float64{0.9, 1}}}}},
		{Count: 2, Ops: []ops.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{64, 64}, Args: &transform.RRCArgs{Scale: [2]float64{0.3, 1}}}}},
	}
	tr, err := transform.NewViews(transform.CHW, groups...)
	if err != nil {
		t.Fatal(err)
	}
	tr = tr.WithDecode(transform.DecodeFast)
	singles := singleViews(t, transform.CHW, groups)
	for i := range singles {
		singles[i] = singles[i].WithDecode(transform.DecodeFast)
	}
	d, one := NewDecoder(), NewDecoder()
	defer d.Close()
	defer one.Close()
	out := make([]byte, tr.SampleBytes())
	same, scaled := 0, 0
	for idx, data := range files {
		k := det.Key{Seed: 5, Index: uint64(idx)}
		if err := d.Decode(data, tr, k, out); err != nil {
			t.Fatal(err)
		}
		got := d.fast.stats().scaleM
		finest, off := 1, 0
		var scales []int
		for v, st := range singles {
			want := make([]byte, st.SampleBytes())
			kv := k
			kv.View = uint64(v)
			if err := one.Decode(data, st, kv, want); err != nil {
				t.Fatal(err)
			}
			m := one.fast.stats().scaleM
			scales = append(scales, m)
			finest = max(finest, m)
			if m == got {
				same++
				if !bytes.Equal(out[off:off+len(want)], want) {
					t.Errorf("image %d view %d: decoded at its own scale %d/8, and its bytes differ from its one-view decode", idx, v, m)
				}
			}
			off += len(want)
		}
		if got != finest {
			t.Errorf("image %d: decoded at %d/8; the views' own scales are %v", idx, got, scales)
		}
		if finest < 8 {
			scaled++
		}
	}
	if same == 0 || scaled == 0 {
		t.Errorf("%d views at their own scale, %d images decoded scaled: the test checks nothing", same, scaled)
	}
}
