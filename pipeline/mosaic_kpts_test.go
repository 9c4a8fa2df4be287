package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// kptMem is yoloMem with 3 keypoints an instance: its box's top-left
// corner (visible, 2), its centre (labelled, not visible, 1) and its
// bottom-right corner (visible), in pixels of the w x h image.
type kptMem struct{ yoloMem }

func (d kptMem) SourceTargets(i, w, h int, t *transform.Instances) error {
	if err := d.yoloMem.SourceTargets(i, w, h, t); err != nil {
		return err
	}
	t.P = 3
	for _, b := range t.Boxes {
		cx, cy := float32((b[0]+b[2])/2), float32((b[1]+b[3])/2)
		t.Points = append(t.Points, [2]float32{b[0], b[1]}, [2]float32{cx, cy}, [2]float32{b[2], b[3]})
		t.Vis = append(t.Vis, 2, 1, 2)
	}
	return nil
}

// kpTargets is a sample's targets as the wire has them: the canvas'
// side, boxes, labels, keypoints [K][P] (x, y, visibility).
type kpTargets struct {
	side   int
	boxes  [][4]float32
	labels []int64
	kpts   [][][3]float32
}

func parseKpTargets(t *testing.T, b []byte) kpTargets {
	t.Helper()
	le := binary.LittleEndian
	k, p := int(le.Uint32(b[16:])), int(le.Uint32(b[20:])>>8&0x7fffff)
	out := kpTargets{side: int(le.Uint32(b))}
	f := func(o int) float32 { return math.Float32frombits(le.Uint32(b[o:])) }
	at := 24
	for range k {
		out.boxes = append(out.boxes, [4]float32{f(at), f(at + 4), f(at + 8), f(at + 12)})
		at += 16
	}
	for range k {
		out.labels = append(out.labels, int64(le.Uint64(b[at:])))
		at += 8
	}
	pts := at
	vis := at + 8*k*p + k // after the keypoints and the crowd flags
	if len(b) != vis+k*p {
		t.Fatalf("targets of %d bytes, want %d for %d instances of %d keypoints", len(b), vis+k*p, k, p)
	}
	for q := range k {
		var kp [][3]float32
		for j := range p {
			o := (q*p + j)
			kp = append(kp, [3]float32{f(pts + 8*o), f(pts + 8*o + 4), float32(b[vis+o])})
		}
		out.kpts = append(out.kpts, kp)
	}
	return out
}

// wantMosaicKpts is the mosaic m's instances of ds worked out here, as
// ultralytics' Mosaic moves them: each image's at its load_image size
// plus its tile's (padw, padh), concatenated; then Instances.clip to the
// 2s canvas (a keypoint outside it made invisible, then clamped) and
// remove_zero_area_boxes. clipped counts the keypoints the clip made
// invisible, dropped the instances it dropped.
func wantMosaicKpts(t *testing.T, ds kptMem, m mosaicTrace) (out kpTargets, clipped, dropped int) {
	t.Helper()
	tiles, err := cv.MosaicLayout(m.N, m.ImgSz, m.XC, m.YC, m.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	s := float32(2 * m.ImgSz)
	out.side = 2 * m.ImgSz
	for j, i := range m.Indexes {
		var in transform.Instances
		if err := ds.SourceTargets(i, m.Sizes[j][0], m.Sizes[j][1], &in); err != nil {
			t.Fatal(err)
		}
		pw, ph := float32(tiles[j].PadW), float32(tiles[j].PadH)
		for q, b := range in.Boxes {
			c := func(v float32) float32 { return min(max(v, 0), s) }
			nb := [4]float32{c(b[0] + pw), c(b[1] + ph), c(b[2] + pw), c(b[3] + ph)}
			if (nb[2]-nb[0])*(nb[3]-nb[1]) <= 0 {
				dropped++
				continue
			}
			var kp [][3]float32
			for k := range in.P {
				pt, v := in.Points[q*in.P+k], float32(in.Vis[q*in.P+k])
				x, y := pt[0]+pw, pt[1]+ph
				if x < 0 || y < 0 || x > s || y > s {
					if v != 0 {
						clipped++
					}
					v = 0
				}
				kp = append(kp, [3]float32{c(x), c(y), v})
			}
			out.boxes, out.labels, out.kpts = append(out.boxes, nb), append(out.labels, in.Labels[q]), append(out.kpts, kp)
		}
	}
	return out, clipped, dropped
}

// sameKpTargets fails unless got is want: boxes and keypoints within
// 1e-3 px, labels and visibilities exactly.
func sameKpTargets(t *testing.T, what string, got, want kpTargets) {
	t.Helper()
	if got.side != want.side || len(got.boxes) != len(want.boxes) || len(got.kpts) != len(want.kpts) {
		t.Fatalf("%s: %d instances (%d with keypoints) on %d, want %d on %d", what, len(got.boxes), len(got.kpts), got.side, len(want.boxes), want.side)
	}
	near := func(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-3 }
	for q := range want.boxes {
		for c := range 4 {
			if !near(got.boxes[q][c], want.boxes[q][c]) {
				t.Fatalf("%s: box %d %v, want %v", what, q, got.boxes[q], want.boxes[q])
			}
		}
		if got.labels[q] != want.labels[q] || len(got.kpts[q]) != len(want.kpts[q]) {
			t.Fatalf("%s: instance %d label %d, %d keypoints; want %d, %d", what, q, got.labels[q], len(got.kpts[q]), want.labels[q], len(want.kpts[q]))
		}
		for k, p := range want.kpts[q] {
			g := got.kpts[q][k]
			if !near(g[0], p[0]) || !near(g[1], p[1]) || g[2] != p[2] {
				t.Fatalf("%s: instance %d keypoint %d %v, want %v", what, q, k, g, p)
			}
		}
	}
}

// TestMosaicKeypoints: keypoints with their visibility go through
// YOLOMosaic (4 and 9) as ultralytics' Mosaic moves them (worked out
// here from the traced layout), and through YOLOMixUp: the partner's
// mosaic's after the sample's. Some points leave the canvas (made
// invisible and clamped) and some instances are dropped with their
// keypoints, else the case is too easy.
func TestMosaicKeypoints(t *testing.T) {
	files := mosaicPNGs(t, 11)
	ds := kptMem{yoloMem{memDataset{files}, -1}}
	plan := []int64{3, 9, 0, 7, 1, 10, 5, 2, 8, 6, 4}
	for _, n := range []int{4, 9} {
		tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 48, N: n}})
		if err != nil {
			t.Fatal(err)
		}
		_, traces, targets, errs := fillMosaic(t, ds, tr, 2, plan, 4, 2)
		clipped, dropped := 0, 0
		for i, idx := range plan {
			if errs[i] != "" {
				t.Fatalf("n=%d sample %d: %s", n, idx, errs[i])
			}
			want, c, d := wantMosaicKpts(t, ds, mosaicOf(t, traces[i]))
			clipped, dropped = clipped+c, dropped+d
			sameKpTargets(t, "mosaic", parseKpTargets(t, targets[i]), want)
		}
		if clipped == 0 || dropped == 0 {
			t.Errorf("n=%d: %d keypoints clipped, %d instances dropped: want some of each", n, clipped, dropped)
		}
	}
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 40, N: 4}}, ops.Op{Kind: transform.OpMixUp, P: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	_, traces, targets, errs := fillMosaic(t, ds, tr, 1, plan, 5, 2)
	mixed := 0
	for i, idx := range plan {
		if errs[i] != "" {
			t.Fatalf("mixup sample %d: %s", idx, errs[i])
		}
		var steps [][2]json.RawMessage
		if err := json.Unmarshal(traces[i], &steps); err != nil {
			t.Fatal(err)
		}
		var m mosaicTrace
		json.Unmarshal(steps[0][1], &m)
		want, _, _ := wantMosaicKpts(t, ds, m)
		if len(steps) > 1 {
			var mx struct {
				Mosaic mosaicTrace `json:"mosaic"`
			}
			if err := json.Unmarshal(steps[1][1], &mx); err != nil {
				t.Fatal(err)
			}
			two, _, _ := wantMosaicKpts(t, ds, mx.Mosaic)
			want.boxes, want.labels, want.kpts = append(want.boxes, two.boxes...), append(want.labels, two.labels...), append(want.kpts, two.kpts...)
			mixed++
		}
		sameKpTargets(t, "mixup", parseKpTargets(t, targets[i]), want)
	}
	if mixed == 0 {
		t.Error("MixUp(0.5) mixed none")
	}
}

// TestMosaicKeypointsSmall: one hand-worked case of the moves, through
// the kernels the decode uses: an instance whose tile is shifted left
// off the canvas by 5 px and down by 2 keeps its box (clipped) and its
// keypoints, the one now left of the canvas invisible and at x = 0;
// another, wholly off the canvas, is dropped with its keypoints; the
// visibilities travel as the wire's bytes.
func TestMosaicKeypointsSmall(t *testing.T) {
	a := cv.Instances{Boxes: [][4]float32{{3, 4, 9, 8}}, Cls: []int64{1},
		Keypoints: [][][3]float32{{{3, 4, 2}, {8.5, 7.25, 1}}}}
	b := cv.Instances{Boxes: [][4]float32{{1, 1, 4, 4}}, Cls: []int64{2},
		Keypoints: [][][3]float32{{{2, 2, 2}, {3, 3, 2}}}}
	tiles := []cv.Tile{{PadW: -5, PadH: 2}, {PadW: 25, PadH: 0}}
	got := cv.MosaicInstances([]cv.Instances{a, b}, tiles, 10) // a 20 x 20 canvas
	var tg targets.Targets
	tg.P = 2
	if err := transform.AddInstances(&tg.Instances, &got); err != nil {
		t.Fatal(err)
	}
	if len(tg.Boxes) != 1 || tg.Boxes[0] != [4]float32{0, 6, 4, 10} || tg.Labels[0] != 1 {
		t.Fatalf("boxes %v labels %v, want [[0 6 4 10]] [1]", tg.Boxes, tg.Labels)
	}
	if want := [][2]float32{{0, 6}, {3.5, 9.25}}; len(tg.Points) != 2 || tg.Points[0] != want[0] || tg.Points[1] != want[1] {
		t.Fatalf("keypoints %v, want %v", tg.Points, want)
	}
	if !bytes.Equal(tg.Vis, []byte{0, 1}) {
		t.Fatalf("visibilities %v, want [0 1]", tg.Vis)
	}
	tg.W, tg.H = 20, 20
	w := parseKpTargets(t, targets.AppendTargets(nil, &tg))
	if w.kpts[0][0] != [3]float32{0, 6, 0} || w.kpts[0][1] != [3]float32{3.5, 9.25, 1} {
		t.Fatalf("on the wire: %v", w.kpts)
	}
}

// segMem is yoloMem whose even samples are segment images (each box's
// rectangle as its polygon, as ultralytics' Instances would hold it) and
// odd ones box lines alone, when mixed; else all segment images.
type segMem struct {
	yoloMem
	mixed bool
}

func (d segMem) UltralyticsTargets(i, w, h int, t *transform.Instances) error {
	if err := d.SourceTargets(i, w, h, t); err != nil {
		return err
	}
	if d.mixed && i%2 == 1 {
		return nil
	}
	for _, b := range t.Boxes {
		t.Segments = append(t.Segments, [][2]float32{{b[0], b[1]}, {b[2], b[1]}, {b[2], b[3]}, {b[0], b[3]}})
	}
	return nil
}

// TestMosaicSegments: a mosaic of segment images carries every segment
// and makes the same boxes (a rectangle's segment within the canvas is
// its box; the Mosaic alone takes no box from segments); one that mixes
// segment images with box-line images is refused, naming them
// (ultralytics' Instances.concatenate would pair segments and boxes
// wrongly).
func TestMosaicSegments(t *testing.T) {
	files := mosaicPNGs(t, 11)
	plan := []int64{3, 9, 0, 7, 1, 10, 5, 2, 8, 6, 4}
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}})
	if err != nil {
		t.Fatal(err)
	}
	ds := segMem{yoloMem: yoloMem{memDataset{files}, -1}}
	_, traces, targets, errs := fillMosaic(t, ds, tr, 2, plan, 4, 2)
	for i, idx := range plan {
		if errs[i] != "" {
			t.Fatalf("sample %d: %s", idx, errs[i])
		}
		want, _, _ := wantMosaicKpts(t, kptMem{ds.yoloMem}, mosaicOf(t, traces[i]))
		got := parseKpTargets(t, targets[i])
		if len(got.boxes) != len(want.boxes) {
			t.Fatalf("sample %d: %d instances, want %d", idx, len(got.boxes), len(want.boxes))
		}
		for q := range got.boxes {
			if got.boxes[q] != want.boxes[q] {
				t.Fatalf("sample %d instance %d: box %v, want %v", idx, q, got.boxes[q], want.boxes[q])
			}
		}
	}
	ds.mixed = true
	ex := NewExecutor(2)
	defer ex.Close()
	fs, err := dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 1<<20, "mosaic")
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{Trace: true, FieldSet: fs}
	err = ex.Fill(context.Background(), ds, tr, 5, 2, plan, PadFromBatch, &b)
	refused := 0
	for _, se := range b.Errors {
		if !strings.Contains(se.Reason, "mixes label files of polygons with label files of boxes alone") {
			t.Fatalf("sample %d: %s", se.Index, se.Reason)
		}
		refused++
	}
	if err != nil && !strings.Contains(err.Error(), "mixes label files of polygons") {
		t.Fatal(err)
	}
	if err != nil {
		refused++
	}
	if refused == 0 {
		t.Error("no mosaic of mixed images was refused")
	}
}

// TestMosaicCopyPaste: YOLOCopyPaste(p=1) after a Mosaic of segment
// images pastes the mirrored copies that overlap no instance (the trace's
// copy_paste their count): the image is the Mosaic's with each copy's
// rectangle filled from the mirrored mosaic, the targets the mosaic's
// instances then the copies, each the mirror (x: 2*imgsz - x) of one of
// them. A dataset of boxes alone is refused, sample by sample; so are a
// CopyPaste anywhere but right after the Mosaic, of a mode but flip, or
// after a Mosaic of p < 1; a stop_epoch switches it off with the Mosaic.
func TestMosaicCopyPaste(t *testing.T) {
	files := mosaicPNGs(t, 11)
	plan := []int64{3, 9, 0, 7, 1, 10, 5, 2}
	mo, cpOp := ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}}, ops.Op{Kind: transform.OpCopyPaste, P: 1, Args: &transform.CopyPasteArgs{Mode: "flip"}}
	plain, err := transform.NewTransform(transform.CHW, mo)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := transform.NewTransform(transform.CHW, mo, cpOp)
	if err != nil {
		t.Fatal(err)
	}
	if s := transform.NeedsTargets(cp); s != "YOLOCopyPaste (op 1)" {
		t.Errorf("NeedsTargets: %q", s)
	}
	ds := segMem{yoloMem: yoloMem{memDataset{files}, -1}}
	data0, _, tg0, errs0 := fillMosaic(t, ds, plain, 2, plan, 4, 1)
	data, traces, tg, errs := fillMosaic(t, ds, cp, 2, plan, 4, 2)
	const s = 96
	pasted := 0
	for i, idx := range plan {
		if errs[i] != "" || errs0[i] != "" {
			t.Fatalf("sample %d: %s%s", idx, errs[i], errs0[i])
		}
		var steps [][]json.RawMessage
		var m struct {
			CopyPaste *int `json:"copy_paste"`
		}
		if err := json.Unmarshal(traces[i], &steps); err != nil || json.Unmarshal(steps[0][1], &m) != nil || m.CopyPaste == nil {
			t.Fatalf("sample %d: trace %s has no copy_paste", idx, traces[i])
		}
		got, base := parseKpTargets(t, tg[i]), parseKpTargets(t, tg0[i])
		n := *m.CopyPaste
		if len(got.boxes) != len(base.boxes)+n || n > len(base.boxes) {
			t.Fatalf("sample %d: %d instances, the mosaic's %d and %d pasted", idx, len(got.boxes), len(base.boxes), n)
		}
		mask := make([]byte, s*s)
		for q, b := range got.boxes {
			if q < len(base.boxes) {
				if b != base.boxes[q] || got.labels[q] != base.labels[q] {
					t.Fatalf("sample %d instance %d: %v, the mosaic's %v", idx, q, b, base.boxes[q])
				}
				continue
			}
			mirror := false
			for k, o := range base.boxes {
				mirror = mirror || [4]float32{s - o[2], o[1], s - o[0], o[3]} == b && base.labels[k] == got.labels[q]
			}
			if !mirror {
				t.Fatalf("sample %d copy %d: %v mirrors no instance of %v", idx, q, b, base.boxes)
			}
			cv.FillPoly(mask, s, s, [][2]int32{{int32(b[0]), int32(b[1])}, {int32(b[2]), int32(b[1])}, {int32(b[2]), int32(b[3])}, {int32(b[0]), int32(b[3])}})
		}
		want := append([]byte{}, data0[i]...)
		cv.CopyPasteImage(kernels.Planes{Pix: want, W: s, H: s}, mask)
		if !bytes.Equal(data[i], want) {
			t.Fatalf("sample %d: the pasted pixels are not the mirrored mosaic's in the copies", idx)
		}
		pasted += n
	}
	if pasted == 0 {
		t.Fatal("nothing pasted")
	}
	// Boxes alone: refused.
	boxes := yoloMem{memDataset{files}, -1}
	ex := NewExecutor(1)
	defer ex.Close()
	fs, err := dataset.NewFieldSet(boxes, []string{transform.FieldTargets}, 1<<20, "mosaic")
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{FieldSet: fs}
	err = ex.Fill(context.Background(), boxes, cp, 5, 2, plan[:4], PadFromBatch, &b)
	refused := len(b.Errors)
	for _, se := range b.Errors {
		if !strings.Contains(se.Reason, "boxes without polygons") {
			t.Fatalf("sample %d: %s", se.Index, se.Reason)
		}
	}
	if err != nil && !strings.Contains(err.Error(), "boxes without polygons") {
		t.Fatal(err)
	}
	if refused == 0 && err == nil {
		t.Error("a CopyPaste of boxes alone was not refused")
	}
	persp := ops.Op{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Scale: 0.5, Translate: 0.1, Size: [2]int{48, 48}}}
	for _, ops := range [][]ops.Op{{cpOp}, {mo, persp, cpOp}, {mo, {Kind: transform.OpCopyPaste, P: 1, Args: &transform.CopyPasteArgs{Mode: "mixup"}}},
		{{Kind: transform.OpMosaic, P: 0.5, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}}, cpOp, persp}} {
		if _, err := transform.NewTransform(transform.CHW, ops...); err == nil || !strings.Contains(err.Error(), "YOLOCopyPaste") {
			t.Errorf("%v: %v, want YOLOCopyPaste refused", ops, err)
		}
	}
	full, err := transform.NewTransform(transform.CHW, mo, cpOp, persp, ops.Op{Kind: transform.OpMixUp, P: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, kinds := range [][]ops.OpKind{nil, {transform.OpCopyPaste}} {
		st, err := full.WithStopEpoch(3, kinds)
		if err != nil {
			t.Fatal(err)
		}
		before, _ := st.AtEpoch(2).MultiRoom()
		after, mosaic := st.AtEpoch(3).MultiRoom()
		if !before.CopyPaste || after.CopyPaste || !mosaic != (kinds == nil) {
			t.Errorf("stop_epoch %v: CopyPaste not switched off at epoch 3 alone", kinds)
		}
	}
}
