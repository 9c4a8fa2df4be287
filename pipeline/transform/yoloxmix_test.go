package transform_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestYOLOXMixUpPartners: YOLOX's MixUp after the Mosaic's warp hands one
// partner more (after the Mosaic's three) to the samples its p draws, a
// pure function of the key; its room counts a partner loaded whole.
func TestYOLOXMixUpPartners(t *testing.T) {
	tr := mustTransform(t, transform.CHW, yoloOps(t, "YOLOMosaic", map[string]any{"imgsz": 32.0},
		"YOLORandomPerspective", map[string]any{"translate": 0.1, "scale": 0.5, "size": []float64{32, 32}},
		"YOLOXMixUp", map[string]any{"p": 0.5, "mixup_scale": []float64{0.5, 1.5}})...)
	const n = 400
	with := 0
	for i := range n {
		k := det.Key{Seed: 3, Epoch: 1, Index: uint64(i)}
		ps := tr.PartnersOf(k, n)
		switch len(ps) {
		case 4:
			with++
		case 3:
		default:
			t.Fatalf("sample %d: partners %v, want the Mosaic's 3 and at most one more", i, ps)
		}
		if again := tr.PartnersOf(k, n); !slices.Equal(again, ps) {
			t.Fatalf("sample %d: partners %v, then %v", i, ps, again)
		}
	}
	if with < n/4 || with > 3*n/4 {
		t.Fatalf("p=0.5 drew YOLOX's partner for %d samples of %d", with, n)
	}
	r, ok := tr.MultiRoom()
	if !ok || !r.Whole || r.Partners < 3*3*32*32+3*48*48 {
		t.Fatalf("room %+v (ok %v): want a partner loaded whole, its resizes, its canvas and its jit's", r, ok)
	}
	// A stop_epoch that switches the Mosaic off (close_mosaic) ends the
	// YOLOX MixUp with it, as YOLOX's close_mosaic does: no partner; one
	// that switches the YOLOX MixUp off alone leaves the Mosaic's three.
	for _, c := range []struct {
		off  []optab.OpKind
		want int
	}{{[]optab.OpKind{transform.OpMosaic}, 0}, {[]optab.OpKind{transform.OpYOLOXMixUp}, 3}} {
		st, err := tr.WithStopEpoch(2, c.off)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			k := det.Key{Seed: 3, Epoch: 2, Index: uint64(i)}
			if ps := st.PartnersOf(k, n); len(ps) != c.want {
				t.Fatalf("%v off at epoch 2: sample %d has partners %v, want %d", c.off, i, ps, c.want)
			}
		}
		if r, ok := st.AtEpoch(2).MultiRoom(); ok && r.Whole {
			t.Fatalf("%v off: the YOLOX MixUp's room is still counted", c.off)
		}
	}
}

// TestYOLOXMixUpWhere: YOLOX's MixUp where its recipe does not put it, or
// with arguments out of range, is refused, saying why.
func TestYOLOXMixUpWhere(t *testing.T) {
	mosaic := []any{"YOLOMosaic", map[string]any{"imgsz": 32.0}}
	persp := []any{"YOLORandomPerspective", map[string]any{"size": []float64{32, 32}}}
	x := []any{"YOLOXMixUp", map[string]any{}}
	cat := func(parts ...[]any) []any {
		var out []any
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		ops  []any
		want string
	}{
		{cat(mosaic, x), "right after a YOLOMosaic (p=1)'s YOLORandomPerspective"},
		{cat(mosaic, persp, []any{"YOLOMixUp", map[string]any{"p": 0.5}}, x), "without a YOLOMixUp"},
		{cat(mosaic, persp, x, []any{"YOLOCutMix", map[string]any{"p": 0.5}}), "YOLOCutMix is supported"},
		{cat(mosaic, persp, []any{"YOLOXMixUp", map[string]any{"mixup_scale": []float64{1.5, 0.5}}}), "mixup_scale"},
		{cat([]any{"YOLOMosaic", map[string]any{"imgsz": 32.0, "p": 0.5}}, persp, x), "YOLOMosaic (p=1)"},
	} {
		_, err := transform.NewTransform(transform.CHW, yoloOps(t, c.ops...)...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one saying %q", c.ops, err, c.want)
		}
	}
}
