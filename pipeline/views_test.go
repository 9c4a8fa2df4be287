package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// viewGroups are two groups of views unlike in every way a view can be:
// size, filter, ops, a fused flip or none.
func viewGroups(norm bool) []transform.ViewGroup {
	g := []transform.ViewGroup{
		{Name: "global", Count: 2, Ops: []ops.Op{
			{Kind: transform.OpRandomResizedCrop, Size: [2]int{48, 40}, Args: &transform.RRCArgs{Scale: [2]float64{0.4, 1}, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}},
			{Kind: ops.OpRandomHorizontalFlip, P: 0.5},
			{Kind: ops.OpRandomApply, P: 0.8, Ops: []ops.Op{ops.ColorJitterOp(0.4, 0.4, 0.2, 0.1)}},
			{Kind: ops.OpGaussianBlur, Args: &ops.BlurArgs{KernelSize: [2]int{5, 5}, Sigma: [2]float64{0.1, 2}}},
		}},
		{Name: "local", Count: 3, Ops: []ops.Op{
			{Kind: transform.OpRandomResizedCrop, Size: [2]int{24, 24}, Args: &transform.RRCArgs{Scale: [2]float64{0.05, 0.4}}},
			{Kind: ops.OpRandomGrayscale, P: 0.5},
		}},
	}
	if norm {
		for i := range g {
			g[i].Ops = append(g[i].Ops, ops.Op{Kind: ops.OpNormalize, Args: &ops.NormalizeArgs{Mean: fn.ImagenetMean, Std: fn.ImagenetStd}})
		}
	}
	return g
}

// singleViews is each view of groups as a one-view transform, in order.
func singleViews(t *testing.T, layout transform.Layout, groups []transform.ViewGroup) []*transform.Transform {
	var out []*transform.Transform
	for _, g := range groups {
		tr := mustTransform(t, layout, g.Ops...)
		for range g.Count {
			out = append(out, tr)
		}
	}
	return out
}

// TestExactViewsAreSingleViews: each view of a sample of several views is the
// bytes its own ops make as a one-view transform with the view's key
// (Key.View), in both layouts, uint8 and float, on both decode paths, when
// the decode is at full scale (ScaleOff): the decode is shared, nothing
// else is.
func TestExactViewsAreSingleViews(t *testing.T) {
	exactTest(t)
	files := goldenJPEGs()
	for _, ref := range []bool{false, true} {
		for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
			for _, norm := range []bool{false, true} {
				groups := viewGroups(norm)
				tr, err := transform.NewViews(layout, groups...)
				if err != nil {
					t.Fatal(err)
				}
				singles := singleViews(t, layout, groups)
				if tr.Views() != 5 || len(singles) != 5 {
					t.Fatalf("%d views", tr.Views())
				}
				d := NewDecoder(WithDCTScaling(ScaleOff), WithReference(ref))
				one := NewDecoder(WithDCTScaling(ScaleOff), WithReference(ref))
				out := make([]byte, tr.SampleBytes())
				for idx, data := range files {
					k := det.Key{Seed: 3, Epoch: 1, Index: uint64(idx)}
					if err := d.Decode(data, tr, k, out); err != nil {
						t.Fatal(err)
					}
					off := 0
					for v, st := range singles {
						want := make([]byte, st.SampleBytes())
						kv := k
						kv.View = uint64(v)
						if err := one.Decode(data, st, kv, want); err != nil {
							t.Fatal(err)
						}
						if got := out[off : off+len(want)]; !bytes.Equal(got, want) {
							t.Errorf("ref %v %s norm %v: image %d view %d differs from its one-view decode", ref, layout, norm, idx, v)
						}
						off += len(want)
					}
				}
				d.Close()
				one.Close()
			}
		}
	}
}

// TestViewsBatchLayout: a batch of several views is view after view, each
// view's samples back to back, under both fail policies (a failed sample
// padded or dropped in every view) and in parts made into their places.
func TestViewsBatchLayout(t *testing.T) {
	ds := mixedFolder(t)
	tr, err := transform.NewViews(transform.CHW, viewGroups(false)...)
	if err != nil {
		t.Fatal(err)
	}
	l := tr.ViewLayout()
	e := NewExecutor(2)
	defer e.Close()
	indices := []int64{0, 1, 2, 3, 6, 4}
	sample := map[int64][]byte{}
	for _, idx := range goodIdx {
		sample[idx] = sampleOf(t, ds, tr, 9, 2, idx)
	}
	check := func(what string, b *Batch, want []int64) {
		t.Helper()
		if b.N != len(want) || len(b.Data) != b.N*tr.SampleBytes() {
			t.Fatalf("%s: %d samples in %d bytes, want %d", what, b.N, len(b.Data), len(want))
		}
		for i, idx := range want {
			if b.Indices[i] != idx {
				t.Fatalf("%s: indices %v, want %v", what, b.Indices, want)
			}
			if got := l.AppendSample(nil, b.Data, b.N, i); !bytes.Equal(got, sample[idx]) {
				t.Errorf("%s: slot %d (sample %d) differs from the sample made alone", what, i, idx)
			}
		}
	}
	for _, policy := range []FailPolicy{PadFromBatch, Drop} {
		var b Batch
		if err := e.Fill(context.Background(), ds, tr, 9, 2, indices, policy, &b); err != nil {
			t.Fatal(err)
		}
		want := []int64{0, 2, 3, 6}
		if policy == PadFromBatch {
			want = []int64{0, 0, 2, 3, 6, 2}
		}
		check(fmt.Sprintf("policy %d", policy), &b, want)
	}
	// Two parts of a batch of 4 made into their places.
	whole := Batch{Data: make([]byte, 4*tr.SampleBytes())}
	for _, part := range []struct {
		idx   []int64
		place []int
	}{{[]int64{6, 0}, []int{3, 0}}, {[]int64{3, 2}, []int{2, 1}}} {
		pb := Batch{Data: whole.Data}
		if err := e.Queue("").FillAt(context.Background(), ds, tr, 9, 2, part.idx, part.place, PadFromBatch, &pb); err != nil {
			t.Fatal(err)
		}
	}
	whole.N, whole.Indices = 4, []int64{0, 2, 3, 6}
	check("parts", &whole, whole.Indices)
}

// TestViewsTrace: a sample of several views traces each view, in order,
// as the view's own one-view trace with its key.
func TestViewsTrace(t *testing.T) {
	groups := viewGroups(true)
	tr, err := transform.NewViews(transform.CHW, groups...)
	if err != nil {
		t.Fatal(err)
	}
	singles := singleViews(t, transform.CHW, groups)
	d := NewDecoder()
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	for idx, data := range goldenJPEGs() {
		k := det.Key{Seed: 1, Epoch: 4, Index: uint64(idx)}
		if err := d.Decode(data, tr, k, out); err != nil {
			t.Fatal(err)
		}
		var views []json.RawMessage
		got := d.AppendTrace(nil)
		if err := json.Unmarshal(got, &views); err != nil || len(views) != len(singles) {
			t.Fatalf("trace %s: %v, %d views", got, err, len(views))
		}
		if len(got) > tr.MaxTraceBytes() {
			t.Errorf("trace of %d bytes over MaxTraceBytes %d", len(got), tr.MaxTraceBytes())
		}
		hd, _ := parseHeader(data)
		for v, st := range singles {
			kv := k
			kv.View = uint64(v)
			want, err := st.Trace(hd.w, hd.h, kv)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(views[v], want) {
				t.Errorf("image %d view %d: trace %s, want %s", idx, v, views[v], want)
			}
		}
		if again, _ := tr.Trace(hd.w, hd.h, k); !bytes.Equal(again, got) {
			t.Errorf("image %d: Transform.Trace %s, the decode's %s", idx, again, got)
		}
	}
}

// TestSkipViews: a sample made with some of its views skipped (the
// executor's recordSkip: OneVision's square for an image of a record of
// one, its canvas and base for one of a record of several) has its other
// views byte for byte as when every view is made, a skipped view of one
// size zeros, and a skipped ragged view 0 x 0 with its image's size in
// its trailer.
func TestSkipViews(t *testing.T) {
	resize := ops.Op{Kind: transform.OpResize, Size: [2]int{32, 32}, Args: &transform.ResizeArgs{Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}
	tr, err := transform.NewViews(transform.CHW,
		transform.ViewGroup{Name: "canvas", Count: 1, Images: transform.OneImage, Ops: []ops.Op{
			{Kind: transform.OpAnyResResize, Args: &transform.AnyResResizeArgs{GridPinpoints: []int{32, 32, 32, 64, 64, 32, 64, 64}, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}}},
		transform.ViewGroup{Name: "base", Count: 1, Images: transform.OneImage, Ops: []ops.Op{resize}},
		transform.ViewGroup{Name: "square", Count: 1, Images: transform.SeveralImages, Ops: []ops.Op{
			{Kind: transform.OpPadToSquare, Args: &transform.PadToSquareArgs{Filling: ops.Filling{Fill: [3]float64{127, 127, 127}}}}, resize}})
	if err != nil {
		t.Fatal(err)
	}
	one, several := tr.SkipViews(false), tr.SkipViews(true)
	if fmt.Sprint(one, several) != "[false false true] [true true false]" {
		t.Fatalf("SkipViews %v, %v", one, several)
	}
	offs := []int{0}
	for v := range tr.Views() - 1 {
		offs = append(offs, offs[v]+tr.View(v).SampleBytes())
	}
	for f, data := range goldenJPEGs()[:4] {
		all := make([]byte, tr.SampleBytes())
		d := NewDecoder()
		if err := d.Decode(data, tr, det.Key{Index: uint64(f)}, all); err != nil {
			t.Fatal(err)
		}
		hd, err := parseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, skip := range [][]bool{one, several} {
			got := bytes.Repeat([]byte{0xa5}, tr.SampleBytes())
			err := d.DecodeSample(Sample{Data: data, skip: skip}, tr, det.Key{Index: uint64(f)}, got)
			if err != nil {
				t.Fatal(err)
			}
			for v := range tr.Views() {
				vt := tr.View(v)
				g, a := got[offs[v]:][:vt.SampleBytes()], all[offs[v]:][:vt.SampleBytes()]
				switch {
				case !skip[v] && !bytes.Equal(g, a):
					t.Errorf("file %d, skipping %v: view %d differs from the sample of every view", f, skip, v)
				case skip[v] && vt.Varies():
					if tail, want := g[len(g)-transform.SizeTrailer:], trailer(0, 0, hd.w, hd.h); !bytes.Equal(tail, want) {
						t.Errorf("file %d: skipped ragged view %d's trailer %v; want %v (0 x 0, its image %dx%d)", f, v, tail, want, hd.w, hd.h)
					}
				case skip[v] && !bytes.Equal(g, make([]byte, len(g))):
					t.Errorf("file %d: skipped view %d is not zeros", f, v)
				}
			}
		}
	}
}

// trailer is a ragged sample's trailer: its size (h, w), its image's.
func trailer(w, h, srcW, srcH int) []byte {
	b := make([]byte, 0, transform.SizeTrailer)
	for _, x := range []int{h, w, srcH, srcW} {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// TestSharedPreViews: a vision-language processor's views that start
// with the same ColorJitter (SharedPre) are of one jittered image: every
// view's trace starts with view 0's steps, and each view of one size is
// the bytes its own ops make as a one-view transform with view 0's key,
// also when some views are skipped (the first among them, whose decoded
// canvas the others share).
func TestSharedPreViews(t *testing.T) {
	cj := ops.ColorJitterOp(0.4, 0.4, 0.4, 0.1)
	resize := ops.Op{Kind: transform.OpResize, Size: [2]int{32, 32}, Args: &transform.ResizeArgs{Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}
	square := []ops.Op{cj, {Kind: transform.OpPadToSquare, Args: &transform.PadToSquareArgs{Filling: ops.Filling{Fill: [3]float64{127, 127, 127}}}}, resize}
	tr, err := transform.NewViews(transform.CHW,
		transform.ViewGroup{Name: "canvas", Count: 1, Ops: []ops.Op{
			cj, {Kind: transform.OpAnyResResize, Args: &transform.AnyResResizeArgs{GridPinpoints: []int{32, 32, 32, 64, 64, 32, 64, 64}, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}}},
		transform.ViewGroup{Name: "base", Count: 1, Ops: []ops.Op{cj, resize}},
		transform.ViewGroup{Name: "square", Count: 1, Ops: square})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.SharedPre() {
		t.Fatal("not SharedPre")
	}
	singles := []*transform.Transform{mustTransform(t, transform.CHW, cj, resize), mustTransform(t, transform.CHW, square...)}
	d := NewDecoder()
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	for idx, data := range goldenJPEGs()[:6] {
		k := det.Key{Seed: 3, Epoch: 1, Index: uint64(idx)}
		if err := d.Decode(data, tr, k, out); err != nil {
			t.Fatal(err)
		}
		var views [][]json.RawMessage
		if got := d.AppendTrace(nil); json.Unmarshal(got, &views) != nil || len(views) != 3 {
			t.Fatalf("trace %s", got)
		}
		for v := range views {
			if len(views[v]) < 2 || !bytes.Equal(views[v][0], views[0][0]) {
				t.Errorf("image %d view %d: trace %s; want it to start with view 0's jitter %s", idx, v, views[v], views[0][0])
			}
		}
		off := tr.View(0).SampleBytes()
		for v, st := range singles {
			want := make([]byte, st.SampleBytes())
			if err := d.Decode(data, st, k, want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out[off:][:len(want)], want) {
				t.Errorf("image %d view %d: not the one-view transform's bytes with view 0's key", idx, v+1)
			}
			off += len(want)
		}
		// Of the views a record's image gets (the first skipped: the
		// canvas another view shares), each the same bytes.
		for _, skip := range [][]bool{{true, false, false}, {false, true, false}, {true, true, false}} {
			got := make([]byte, tr.SampleBytes())
			err := d.DecodeSample(Sample{Data: data, skip: skip}, tr, k, got)
			if err != nil {
				t.Fatal(err)
			}
			off := 0
			for v := range tr.Views() {
				n := tr.View(v).SampleBytes()
				if !skip[v] && !bytes.Equal(got[off:][:n], out[off:][:n]) {
					t.Errorf("image %d, skipping %v: view %d differs from the sample of every view", idx, skip, v)
				}
				off += n
			}
		}
	}
}

// TestPreCanvasIsTheGeometry: a ColorJitter that changes nothing
// (brightness (1, 1)) before a whole-image resize takes the canvas path
// (the image decoded at its own size, then resized), and makes the bytes
// the resize makes alone: a vision-language resize's (AnyResResize's
// canvas padded as its resolution pads it, SmartResize's), Resize((h,
// w))'s and PadToSquare's; flipped too.
func TestPreCanvasIsTheGeometry(t *testing.T) {
	none := ops.Op{Kind: ops.OpColorJitter, Args: &ops.ColorJitterArgs{Ranges: true, Jitter: [4][2]float64{{1, 1}, {1, 1}, {1, 1}, {0, 0}}}}
	resize := ops.Op{Kind: transform.OpResize, Size: [2]int{32, 40}, Args: &transform.ResizeArgs{Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}
	anyRes := ops.Op{Kind: transform.OpAnyResResize, Args: &transform.AnyResResizeArgs{GridPinpoints: []int{32, 32, 32, 64, 64, 32, 64, 64, 96, 32}, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}
	for name, geom := range map[string][]ops.Op{
		"AnyResResize":         {anyRes},
		"AnyResResize flipped": {anyRes, {Kind: ops.OpRandomHorizontalFlip, P: 1}},
		"SmartResize":          {{Kind: transform.OpSmartResize, Args: &transform.SmartResizeArgs{MinPixels: 1024, MaxPixels: 8192, Factor: 16, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}},
		"Resize":               {resize},
		"PadToSquare":          {{Kind: transform.OpPadToSquare, Args: &transform.PadToSquareArgs{Filling: ops.Filling{Fill: [3]float64{127, 0, 255}}}}, resize},
	} {
		for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
			plain, err := transform.NewViewsBound(layout, [2]int{512, 512}, transform.ViewGroup{Count: 1, Ops: geom})
			if err != nil {
				t.Fatal(err)
			}
			pre, err := transform.NewViewsBound(layout, [2]int{512, 512}, transform.ViewGroup{Count: 1, Ops: append([]ops.Op{none}, geom...)})
			if err != nil {
				t.Fatal(err)
			}
			if plain.SampleBytes() != pre.SampleBytes() {
				t.Fatalf("%s: %d bytes a sample, with the ColorJitter %d", name, plain.SampleBytes(), pre.SampleBytes())
			}
			d := NewDecoder()
			for f, data := range goldenJPEGs()[:6] {
				k := det.Key{Seed: 5, Index: uint64(f)}
				want, got := make([]byte, plain.SampleBytes()), make([]byte, pre.SampleBytes())
				if err := d.Decode(data, plain, k, want); err != nil {
					t.Fatal(err)
				}
				if err := d.Decode(data, pre, k, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s %v file %d: the canvas path's bytes are not the resize's", name, layout, f)
				}
			}
			d.Close()
		}
	}
}

// TestCropBeforeTheResize: a RandomResizedCrop before a resize of the
// whole image (a trainer's crop before a vision-language processor) is
// two resizes: each view's bytes are what the resize alone makes of the
// crop's pixels (the crop made alone, stored losslessly as a PNG and
// decoded again), its trailer the crop's size; in a processor's views
// (SharedPre) every view is of the one crop, view 0's draw.
func TestCropBeforeTheResize(t *testing.T) {
	crop := ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{60, 44}, Args: &transform.RRCArgs{Scale: [2]float64{0.2, 1}, Ratio: [2]float64{0.5, 2}, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}
	resize := ops.Op{Kind: transform.OpResize, Size: [2]int{32, 32}, Args: &transform.ResizeArgs{Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}
	geoms := [][]ops.Op{
		{{Kind: transform.OpTileResize, Args: &transform.TileResizeArgs{TileSize: 16, MinTiles: 1, MaxTiles: 12, TokensPerTile: 16, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}},
		{resize},
		{{Kind: transform.OpAnyResResize, Args: &transform.AnyResResizeArgs{GridPinpoints: []int{32, 32, 32, 64, 64, 32, 64, 64}, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}},
		{{Kind: transform.OpPadToSquare, Args: &transform.PadToSquareArgs{Filling: ops.Filling{Fill: [3]float64{127, 0, 255}}}}, resize},
		{{Kind: transform.OpSmartResize, Args: &transform.SmartResizeArgs{MinPixels: 256, MaxPixels: 8192, Factor: 28, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}},
	}
	alone := mustTransform(t, transform.CHW, crop)
	d := NewDecoder()
	defer d.Close()
	for f, data := range goldenJPEGs()[:6] {
		for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
			checkCropBefore(t, d, data, f, layout, crop, geoms, alone)
		}
	}
}

// checkCropBefore is TestCropBeforeTheResize's check of one image (file
// f) in one layout.
func checkCropBefore(t *testing.T, d *Decoder, data []byte, f int, layout transform.Layout, crop ops.Op, geoms [][]ops.Op, alone *transform.Transform) {
	t.Helper()
	var groups []transform.ViewGroup
	for _, g := range geoms {
		groups = append(groups, transform.ViewGroup{Count: 1, Ops: append([]ops.Op{crop}, g...)})
	}
	tr, err := transform.NewViews(layout, groups...)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.SharedPre() {
		t.Fatal("a processor's views after one crop: not SharedPre")
	}
	out := make([]byte, tr.SampleBytes())
	k := det.Key{Seed: 9, Epoch: 2, Index: uint64(f)}
	if err := d.Decode(data, tr, k, out); err != nil {
		t.Fatal(err)
	}
	var traces [][]json.RawMessage
	if got := d.AppendTrace(nil); json.Unmarshal(got, &traces) != nil || len(traces) != len(geoms) {
		t.Fatalf("trace %s", got)
	}
	for v := range traces { // each view's first step: the one crop
		if !bytes.Contains(traces[v][0], []byte(`"resized_crop"`)) || !bytes.Equal(traces[v][0], traces[0][0]) {
			t.Errorf("file %d view %d: trace %s; want it to start with view 0's crop %s", f, v, traces[v], traces[0][0])
		}
	}
	pix := make([]byte, alone.SampleBytes())
	if err := d.Decode(data, alone, k, pix); err != nil {
		t.Fatal(err)
	}
	img := image.NewNRGBA(image.Rect(0, 0, 44, 60))
	for i := range 44 * 60 {
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = pix[i], pix[44*60+i], pix[2*44*60+i], 255
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	off := 0
	for v, g := range geoms {
		vt := tr.View(v)
		one, err := transform.NewViewsBound(layout, [2]int{512, 512}, transform.ViewGroup{Count: 1, Ops: g})
		if err != nil {
			t.Fatal(err)
		}
		one = one.WithRagged()
		want := make([]byte, one.SampleBytes())
		if err := d.Decode(b.Bytes(), one, k, want); err != nil {
			t.Fatal(err)
		}
		got := out[off:][:vt.SampleBytes()]
		off += vt.SampleBytes()
		if !vt.Varies() { // of one size: the bytes
			if !bytes.Equal(got, want) {
				t.Errorf("file %d %v view %d (%s): not what the resize alone makes of the crop", f, layout, v, ops.OpsString(g))
			}
			continue
		}
		gt, wt := got[len(got)-transform.SizeTrailer:], want[len(want)-transform.SizeTrailer:]
		h, w := int(binary.LittleEndian.Uint32(gt)), int(binary.LittleEndian.Uint32(gt[4:]))
		if !bytes.Equal(gt, wt) || !bytes.Equal(gt[8:], trailer(0, 0, 44, 60)[8:]) {
			t.Errorf("file %d view %d: trailer %v, the resize's alone %v; want the crop's size 44x60", f, v, gt, wt)
			continue
		}
		if !bytes.Equal(got[:3*w*h], want[:3*w*h]) {
			t.Errorf("file %d view %d (%s): not what the resize alone makes of the crop", f, v, ops.OpsString(g))
		}
	}
}
