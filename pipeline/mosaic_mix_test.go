package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestMixUpPartners: with MixUp after the Mosaic, a sample's partners
// are its mosaic's, then its MixUp partner and that one's mosaic's, the
// same bytes whatever the batch split; its pixels are the cv kernels'
// blend of the two mosaics (each rebuilt from its trace) and its boxes
// the two mosaics' concatenated. A stop_epoch switches MixUp off.
func TestMixUpPartners(t *testing.T) {
	files := mosaicPNGs(t, 10)
	ds := yoloMem{memDataset{files}, -1}
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 40, N: 4}}, ops.Op{Kind: transform.OpMixUp, P: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	plan := []int64{4, 9, 0, 7, 1, 5, 2, 8, 6, 3}
	d1, tr1, tg1, e1 := fillMosaic(t, ds, tr, 1, plan, len(plan), 1)
	d2, tr2, tg2, _ := fillMosaic(t, ds, tr, 1, plan, 3, 2)
	mixed := 0
	for i, idx := range plan {
		if e1[i] != "" {
			t.Fatalf("sample %d: %s", idx, e1[i])
		}
		if !bytes.Equal(d1[i], d2[i]) || !bytes.Equal(tr1[i], tr2[i]) || !bytes.Equal(tg1[i], tg2[i]) {
			t.Fatalf("sample %d: another batch split made other bytes", idx)
		}
		var steps [][2]json.RawMessage
		if err := json.Unmarshal(tr1[i], &steps); err != nil {
			t.Fatal(err)
		}
		var m mosaicTrace
		json.Unmarshal(steps[0][1], &m)
		p := tr.PartnersOf(det.Key{Seed: 5, Epoch: 1, Index: uint64(idx)}, len(files))
		if len(steps) == 1 {
			if fmt.Sprint(p) != fmt.Sprint(m.Indexes[1:]) {
				t.Fatalf("sample %d: partners %v, traced %v", idx, p, m.Indexes)
			}
			continue
		}
		mixed++
		var mx struct {
			R      float64     `json:"r"`
			Mosaic mosaicTrace `json:"mosaic"`
		}
		if string(steps[1][0]) != `"yolo_mixup"` || json.Unmarshal(steps[1][1], &mx) != nil || !(mx.R > 0.2 && mx.R < 0.8) {
			t.Fatalf("sample %d: trace %s", idx, tr1[i])
		}
		if want := append(append([]int{}, m.Indexes[1:]...), mx.Mosaic.Indexes...); fmt.Sprint(p) != fmt.Sprint(want) {
			t.Fatalf("sample %d: partners %v, traced %v", idx, p, want)
		}
		a, ia := kernelMosaic(t, files, ds, m)
		b, ib := kernelMosaic(t, files, ds, mx.Mosaic)
		wi := cv.MixUp(a, b, mx.R, ia, ib)
		if !bytes.Equal(a.Pix, d1[i]) {
			t.Fatalf("sample %d: the blend differs from the kernels'", idx)
		}
		checkTargets(t, tg1[i], wi, 80)
	}
	if mixed == 0 || mixed == len(plan) {
		t.Errorf("MixUp(p=0.5) mixed %d of %d", mixed, len(plan))
	}
	stop, err := tr.WithStopEpoch(3, []ops.OpKind{transform.OpMixUp})
	if err != nil {
		t.Fatal(err)
	}
	_, tr3, _, _ := fillMosaic(t, ds, stop, 3, plan, 5, 2)
	for i := range plan {
		if bytes.Contains(tr3[i], []byte("mixup")) {
			t.Fatalf("after the stop_epoch: %s", tr3[i])
		}
	}
}

// hinted is yoloMem recording what it is told to prefetch.
type hinted struct {
	yoloMem
	calls *[][]int64
}

func (d hinted) Prefetch(indices []int64) { *d.calls = append(*d.calls, append([]int64{}, indices...)) }

// TestMosaicPartnersPrefetched: a Prefetcher is told a batch's samples,
// then their partners in the order the workers read them.
func TestMosaicPartnersPrefetched(t *testing.T) {
	var calls [][]int64
	ds := hinted{yoloMem{memDataset{mosaicPNGs(t, 8)}, -1}, &calls}
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 32, N: 4}}, ops.Op{Kind: transform.OpMixUp, P: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	plan := []int64{5, 1, 7, 0}
	fillMosaic(t, ds, tr, 2, plan, 4, 1)
	var want []int64
	for _, idx := range plan {
		for _, p := range tr.PartnersOf(det.Key{Seed: 5, Epoch: 2, Index: uint64(idx)}, 8) {
			want = append(want, int64(p))
		}
	}
	if len(calls) != 2 || fmt.Sprint(calls[0]) != fmt.Sprint(plan) || fmt.Sprint(calls[1]) != fmt.Sprint(want) || len(want) < 3*len(plan) {
		t.Fatalf("prefetched %v, want %v then %v", calls, plan, want)
	}
}

// TestMosaicStoreDataset: a Mosaic over a directory read as a local
// ImageFolder and as a StoreDataset (its manifest, its byte cache and
// read-ahead, which is told the partners) makes the same bytes and
// traces.
func TestMosaicStoreDataset(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, b := range mosaicPNGs(t, 9) {
		if err := os.WriteFile(filepath.Join(dir, "a", fmt.Sprintf("%02d.png", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	local, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	m, err := dataset.IndexStore(context.Background(), openDirStore(t, dir), dataset.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := dataset.NewStoreDataset(openDirStore(t, dir), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 40, N: 9}}, ops.Op{Kind: transform.OpMixUp, P: 1})
	if err != nil {
		t.Fatal(err)
	}
	plan := []int64{8, 3, 0, 5, 1, 7, 2, 6, 4}
	var got [2]Batch
	for i, ds := range []dataset.Dataset{local, remote} {
		e := NewExecutor(2)
		got[i].Trace = true
		if err := e.Fill(context.Background(), ds, tr, 9, 0, plan, PadFromBatch, &got[i]); err != nil {
			t.Fatal(err)
		}
		e.Close()
		if len(got[i].Errors) > 0 {
			t.Fatalf("dataset %d: %v", i, got[i].Errors)
		}
	}
	if !bytes.Equal(got[0].Data, got[1].Data) || fmt.Sprint(got[0].Traces) != fmt.Sprint(got[1].Traces) {
		t.Fatal("the store's mosaics differ from the directory's")
	}
	for i := range plan {
		if !bytes.Contains(got[1].Traces[i], []byte(`"yolo_mixup"`)) {
			t.Fatalf("sample %d: %s", plan[i], got[1].Traces[i])
		}
	}
}

// TestMosaicP: a Mosaic of p=0.5 before a YOLORandomPerspective mosaics
// about half the samples; the others read no partners and are the YOLO
// geometry's (YOLOLoadImage of its imgsz, the same warp): the same bytes
// and trace as that transform's. A stop_epoch switches the Mosaic off:
// every sample is then that geometry's.
func TestMosaicP(t *testing.T) {
	files := mosaicPNGs(t, 12)
	ds := yoloMem{memDataset{files}, -1}
	persp := ops.Op{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Translate: 0.1, Scale: 0.5, Size: [2]int{40, 40}}}
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 0.5, Args: &transform.MosaicArgs{ImgSz: 40, N: 4}}, persp)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpYOLOLoadImage, Args: &transform.YOLOLoadImageArgs{ImgSz: 40}}, persp)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := tr.WithStopEpoch(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := []int64{3, 9, 0, 7, 1, 10, 5, 2, 8, 6, 4, 11}
	for _, c := range []struct {
		tr    *transform.Transform
		epoch uint64
	}{{tr, 0}, {stop, 1}} {
		d, trc, tg, errs := fillMosaic(t, ds, c.tr, c.epoch, plan, 5, 2)
		dp, trp, tgp, _ := fillMosaic(t, ds, plain, c.epoch, plan, 5, 2)
		mosaics := 0
		for i, idx := range plan {
			if errs[i] != "" {
				t.Fatalf("sample %d: %s", idx, errs[i])
			}
			p := c.tr.PartnersOf(det.Key{Seed: 5, Epoch: c.epoch, Index: uint64(idx)}, len(files))
			if bytes.HasPrefix(trc[i], []byte(`[["yolo_mosaic"`)) {
				mosaics++
				if len(p) != 3 || c.epoch == 1 {
					t.Fatalf("epoch %d sample %d: mosaicked, partners %v", c.epoch, idx, p)
				}
				continue
			}
			if p != nil || !bytes.Equal(d[i], dp[i]) || !bytes.Equal(trc[i], trp[i]) || !bytes.Equal(tg[i], tgp[i]) {
				t.Fatalf("epoch %d sample %d (partners %v): %s, the YOLO geometry's %s", c.epoch, idx, p, trc[i], trp[i])
			}
		}
		if c.epoch == 0 && (mosaics == 0 || mosaics == len(plan)) {
			t.Errorf("p=0.5: %d of %d mosaicked", mosaics, len(plan))
		}
	}
}

// TestMosaicCanvasClipped: a mosaic's canvas built only where its warp
// reads it gives the bytes, traces and targets of the whole canvas, for
// Mosaics of 4 and 9, with MixUp, rotations, shears, perspective and
// translations that reach the 114 around the tiles, on images as small as
// a few pixels a side (tiles that leave most of the canvas 114), over
// epochs and decoders that reuse their canvas from sample to sample.
func TestMosaicCanvasClipped(t *testing.T) {
	files := mosaicPNGs(t, 8)
	for i, wh := range [][2]int{{3, 2}, {40, 4}, {5, 37}, {1, 1}} {
		im := image.NewNRGBA(image.Rect(0, 0, wh[0], wh[1]))
		for y := range wh[1] {
			for x := range wh[0] {
				im.Set(x, y, color.NRGBA{uint8(200 - x*9 - i), uint8(30 + y*11), uint8(i * 60), 255})
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, im); err != nil {
			t.Fatal(err)
		}
		files = append(files, b.Bytes())
	}
	ds := yoloMem{memDataset{files}, -1}
	plan := []int64{3, 9, 0, 7, 1, 10, 5, 2, 8, 6, 4, 11}
	ps := []ops.Op{
		{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Translate: 0.1, Scale: 0.5, Size: [2]int{40, 40}}},
		{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Degrees: 30, Translate: 0.4, Scale: 0.9, Shear: 20, Perspective: 0.001, Size: [2]int{40, 40}}},
		{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Degrees: 180, Translate: 0.9, Scale: 0.3, Shear: 60, Perspective: 0.01, Size: [2]int{36, 44}}},
	}
	clipped := 0
	for pi, persp := range ps {
		for _, tiles := range []int{4, 9} {
			tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 40, N: tiles}}, persp, ops.Op{Kind: transform.OpMixUp, P: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			for e := range uint64(3) {
				fullCanvas = true
				dw, trw, tgw, errw := fillMosaic(t, ds, tr, e, plan, 5, 2)
				fullCanvas = false
				d, trc, tg, errs := fillMosaic(t, ds, tr, e, plan, 5, 2)
				for i, idx := range plan {
					if errs[i] != "" || errw[i] != "" {
						t.Fatalf("sample %d: %s %s", idx, errs[i], errw[i])
					}
					if !bytes.Equal(d[i], dw[i]) || !bytes.Equal(trc[i], trw[i]) || !bytes.Equal(tg[i], tgw[i]) {
						t.Fatalf("perspective %d, %d tiles, epoch %d, sample %d: the clipped canvas made other bytes (%s)", pi, tiles, e, idx, trc[i])
					}
				}
				for _, idx := range plan {
					k := det.Key{Seed: 5, Epoch: e, Index: uint64(idx)}
					s := cv.MosaicSize(40)
					pa := ops.ArgsOf[transform.YOLOPerspectiveArgs](&persp)
					m := cv.PerspectiveMatrix(transform.DrawYOLOPersp(&persp, k), s, s, pa.Size[0], pa.Size[1])
					if r, ok := cv.PerspectiveFootprint(m, pa.Perspective != 0, s, s, pa.Size[0], pa.Size[1]); ok && (r.X1-r.X0)*(r.Y1-r.Y0) < s*s {
						clipped++
					}
				}
			}
		}
	}
	if clipped < 50 {
		t.Errorf("only %d draws clipped the canvas", clipped)
	}
}

// BenchmarkYOLOPreset is the decode of a sample of the yolo preset (a
// Mosaic of four photos at 640, its warp, HSV, flip), the load_image'd
// photos from a PartnerCache as with --partner-budget: the canvas built
// whole (full) and only where the warp reads it (clipped).
func BenchmarkYOLOPreset(b *testing.B) {
	tr, err := transform.ParseTransform("yolo", transform.CHW)
	if err != nil {
		b.Fatal(err)
	}
	paths, _ := filepath.Glob("../testdata/photos/*/*.jpg")
	if len(paths) < 4 {
		b.Fatal("fewer than 4 photos in testdata/photos")
	}
	var files [][]byte
	for _, p := range paths[:4] {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, data)
	}
	for _, full := range []bool{true, false} {
		name := "clipped"
		if full {
			name = "full"
		}
		b.Run(name, func(b *testing.B) {
			fullCanvas = full
			defer func() { fullCanvas = false }()
			d := NewDecoder(WithPartnerCache(cv.NewPartnerCache(1 << 30)))
			defer d.Close()
			out := make([]byte, tr.SampleBytes())
			for i := 0; b.Loop(); i++ {
				s := Sample{Data: files[0], Partners: []int{1, 2, 3}, PartnerFiles: files[1:]}
				if err := d.DecodeSample(s, tr, det.Key{Seed: 1, Index: uint64(i)}, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMosaicCutMix: YOLOCutMix(p=1) after a Mosaic and its warp reads one
// more partner (and its mosaic's), and traces its areas and choice; where
// it applied, the image is the warped mosaic's outside the chosen area and
// the targets the mosaic's then more; it is refused but last of the
// Mosaic's ops, and a stop_epoch switches it off.
func TestMosaicCutMix(t *testing.T) {
	files := mosaicPNGs(t, 11)
	plan := []int64{3, 9, 0, 7, 1, 10, 5, 2}
	mo := ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}}
	persp := ops.Op{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Scale: 0.5, Translate: 0.1, Size: [2]int{48, 48}}}
	cut := ops.Op{Kind: transform.OpCutMix, P: 1, Args: &transform.CutMixArgs{Beta: 1, Areas: 8}}
	plain, err := transform.NewTransform(transform.CHW, mo, persp)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := transform.NewTransform(transform.CHW, mo, persp, cut)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cm.PartnersOf(det.Key{Seed: 5, Epoch: 2, Index: 3}, 11)); n != 7 {
		t.Errorf("%d partners, want 3 and 1 + 3", n)
	}
	ds := segMem{yoloMem: yoloMem{memDataset{files}, -1}}
	data0, _, tg0, _ := fillMosaic(t, ds, plain, 2, plan, 4, 1)
	data, traces, tg, errs := fillMosaic(t, ds, cm, 2, plan, 4, 2)
	applied := 0
	for i, idx := range plan {
		if errs[i] != "" {
			t.Fatalf("sample %d: %s", idx, errs[i])
		}
		var steps [][]json.RawMessage
		var c struct {
			Areas   [][3]float64 `json:"areas"`
			Choice  int          `json:"choice"`
			Applied bool         `json:"applied"`
		}
		if err := json.Unmarshal(traces[i], &steps); err != nil || len(steps) != 3 || string(steps[2][0]) != `"yolo_cutmix"` ||
			json.Unmarshal(steps[2][1], &c) != nil || len(c.Areas) != 8 {
			t.Fatalf("sample %d: trace %s", idx, traces[i])
		}
		got, base := parseKpTargets(t, tg[i]), parseKpTargets(t, tg0[i])
		if !c.Applied {
			if !bytes.Equal(data[i], data0[i]) || len(got.boxes) != len(base.boxes) {
				t.Fatalf("sample %d: CutMix not applied, yet the sample differs", idx)
			}
			continue
		}
		applied++
		a := c.Areas[c.Choice]
		ar := cv.CutMixArea(48, 48, a[0], int(a[1]), int(a[2]))
		for p := range data[i] {
			x, y := p%48, p/48%48
			in := x >= int(ar[0]) && x < int(ar[2]) && y >= int(ar[1]) && y < int(ar[3])
			if !in && data[i][p] != data0[i][p] {
				t.Fatalf("sample %d: byte %d (%d, %d) outside the area %v changed", idx, p, x, y, ar)
			}
		}
		if len(got.boxes) <= len(base.boxes) || got.boxes[0] != base.boxes[0] {
			t.Fatalf("sample %d: %d instances, the mosaic's %d", idx, len(got.boxes), len(base.boxes))
		}
	}
	if applied == 0 {
		t.Error("CutMix never applied")
	}
	for _, ops := range [][]ops.Op{{mo, cut, persp}, {cut}, {{Kind: transform.OpMosaic, P: 0.5, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}}, persp, cut},
		{mo, persp, {Kind: transform.OpCutMix, P: 1, Args: &transform.CutMixArgs{Beta: 1, Areas: 0}}}} {
		if _, err := transform.NewTransform(transform.CHW, ops...); err == nil {
			t.Errorf("%v: accepted", ops)
		}
	}
	st, err := cm.WithStopEpoch(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := st.AtEpoch(2).MultiRoom()
	after, _ := st.AtEpoch(3).MultiRoom()
	if !before.CutMix || after.CutMix || transform.NeedsTargets(cm) != "YOLOCutMix (op 2)" {
		t.Error("stop_epoch does not switch CutMix off, or it does not need targets")
	}
}
