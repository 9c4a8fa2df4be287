package transform

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestViewLayout: offsets, copies between buffers of other sizes, and the
// repacking a dropped sample needs.
func TestViewLayout(t *testing.T) {
	l := LayoutOf(3, 1, 2)
	if l.Views() != 3 || l.SampleBytes() != 6 || l.Offset(4, 2, 1) != 4*4+2 {
		t.Fatalf("layout %v: %d views, %d bytes, offset %d", l, l.Views(), l.SampleBytes(), l.Offset(4, 2, 1))
	}
	// A buffer of 3 samples: sample i's view v bytes are 10*i+v.
	const n = 3
	buf := make([]byte, n*l.SampleBytes())
	for i := range n {
		for v := range l.Views() {
			for b := range l.Bytes(v) {
				buf[l.Offset(n, v, i)+b] = byte(10*i + v)
			}
		}
	}
	if got := l.AppendSample(nil, buf, n, 2); !bytes.Equal(got, []byte{20, 20, 20, 21, 22, 22}) {
		t.Errorf("sample 2 is %v", got)
	}
	dst := make([]byte, 5*l.SampleBytes())
	l.CopySample(dst, 5, 4, buf, n, 1)
	if got := l.AppendSample(nil, dst, 5, 4); !bytes.Equal(got, []byte{10, 10, 10, 11, 12, 12}) {
		t.Errorf("sample 1 copied into slot 4 of 5: %v", got)
	}
	// Keep samples 0 and 2 (moved to the first places), then repack.
	l.CopySample(buf, n, 1, buf, n, 2)
	l.Repack(buf, n, 2)
	for i, want := range []int{0, 2} {
		if got := l.AppendSample(nil, buf[:2*l.SampleBytes()], 2, i); got[0] != byte(10*want) || got[3] != byte(10*want+1) || got[5] != byte(10*want+2) {
			t.Errorf("repacked slot %d: %v, want sample %d's", i, got, want)
		}
	}
}

// TestViewsRefused: bad view lists are refused before anything is made,
// naming the group and what is wrong.
func TestViewsRefused(t *testing.T) {
	crop := []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}}}
	norm := append(append([]optab.Op(nil), crop...), optab.Op{Kind: optab.OpNormalize, Args: &optab.NormalizeArgs{Mean: fn.ImagenetMean, Std: fn.ImagenetStd}})
	for _, c := range []struct {
		groups []ViewGroup
		want   string
	}{
		{nil, "no views"},
		{[]ViewGroup{{Count: 0, Ops: crop}}, "view group 0: count 0: want at least 1"},
		{[]ViewGroup{{Count: 2, Ops: crop}, {Name: "local", Count: 1, Ops: []optab.Op{{Kind: optab.OpRandomHorizontalFlip, P: 0.5}}}}, `view group 1 ("local"): op 0 is RandomHorizontalFlip: the first op must be the geometry`},
		{[]ViewGroup{{Count: 2, Ops: crop}, {Count: 1}}, "view group 1: no geometry op"},
		{[]ViewGroup{{Count: 30, Ops: crop}, {Count: 3, Ops: crop}}, "33 views or more: the limit is 32"},
		{[]ViewGroup{{Count: 1, Ops: crop}, {Count: 1, Ops: norm}}, "view group 1 ends in Normalize and view group 0 does not"},
		{[]ViewGroup{{Name: strings.Repeat("n", 65), Count: 1, Ops: crop}}, "name of 65 bytes: the limit is 64"},
	} {
		_, err := NewViews(CHW, c.groups...)
		if !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d groups: %v, want an ErrUnsupported saying %q", len(c.groups), err, c.want)
		}
	}
}
