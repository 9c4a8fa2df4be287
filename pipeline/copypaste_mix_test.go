package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestMosaicCopyPasteMixup: YOLOCopyPaste mode 'mixup' after the Mosaic's
// warp takes its copies from the partner its key draws (the trace's
// yolo_copy_paste names it: copyPasteMixPartner, among PartnersOf's), made
// by the Mosaic and warp with draws of its own: the targets are those of
// the same transform without it, then the partner's pasted instances; a
// MixUp's partner draws a CopyPaste of its own; bytes, traces and targets
// are the same over any batch split and workers. A CopyPaste in mixup
// mode before the warp, beside one in flip mode or after a Mosaic of p
// below 1 is refused; a stop_epoch switches it off with the Mosaic.
func TestMosaicCopyPasteMixup(t *testing.T) {
	files := mosaicPNGs(t, 11)
	plan := []int64{3, 9, 0, 7, 1, 10, 5, 2}
	mo := ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}}
	persp := ops.Op{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Scale: 0.5, Translate: 0.1, Size: [2]int{48, 48}}}
	cpm := ops.Op{Kind: transform.OpCopyPaste, P: 1, Args: &transform.CopyPasteArgs{Mode: "mixup"}}
	plain, err := transform.NewTransform(transform.CHW, mo, persp)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := transform.NewTransform(transform.CHW, mo, persp, cpm)
	if err != nil {
		t.Fatal(err)
	}
	ds := segMem{yoloMem: yoloMem{memDataset{files}, -1}}
	_, _, tg0, errs0 := fillMosaic(t, ds, plain, 2, plan, 4, 1)
	data, traces, tg, errs := fillMosaic(t, ds, cp, 2, plan, 4, 2)
	pasted := 0
	for i, idx := range plan {
		if errs[i] != "" || errs0[i] != "" {
			t.Fatalf("sample %d: %s%s", idx, errs[i], errs0[i])
		}
		var steps [][]json.RawMessage
		if err := json.Unmarshal(traces[i], &steps); err != nil {
			t.Fatal(err)
		}
		var c struct {
			Applied bool
			Pasted  int
			Mosaic  struct{ Indexes []int }
		}
		if len(steps) < 3 || string(steps[2][0]) != `"yolo_copy_paste"` || json.Unmarshal(steps[2][1], &c) != nil {
			t.Fatalf("sample %d: trace %s has no yolo_copy_paste third", idx, traces[i])
		}
		k := det.Key{Seed: 5, Epoch: 2, Index: uint64(idx)}
		j := transform.CopyPasteMixPartner(k, len(files))
		if len(c.Mosaic.Indexes) != 4 || c.Mosaic.Indexes[0] != j || !slices.Contains(cp.PartnersOf(k, len(files)), j) {
			t.Fatalf("sample %d: the partner's mosaic %v, its partner %d, PartnersOf %v", idx, c.Mosaic.Indexes, j, cp.PartnersOf(k, len(files)))
		}
		got, base := parseKpTargets(t, tg[i]), parseKpTargets(t, tg0[i])
		if !c.Applied && len(base.boxes) > 0 || len(got.boxes) != len(base.boxes)+c.Pasted || !slices.Equal(got.boxes[:len(base.boxes)], base.boxes) {
			t.Fatalf("sample %d: %d instances, %d without the CopyPaste and %d pasted (%+v)", idx, len(got.boxes), len(base.boxes), c.Pasted, c)
		}
		pasted += c.Pasted
	}
	if pasted == 0 {
		t.Fatal("nothing pasted")
	}
	data2, traces2, tg2, _ := fillMosaic(t, ds, cp, 2, plan, 3, 1)
	for i := range plan {
		if !bytes.Equal(data[i], data2[i]) || !bytes.Equal(traces[i], traces2[i]) || !bytes.Equal(tg[i], tg2[i]) {
			t.Fatalf("sample %d: another split and workers made other bytes", plan[i])
		}
	}
	// A MixUp's partner draws a CopyPaste of its own.
	mixed, err := transform.NewTransform(transform.CHW, mo, persp, cpm, ops.Op{Kind: transform.OpMixUp, P: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, traces, _, errs = fillMosaic(t, ds, mixed, 2, plan, 4, 2)
	own := 0
	for i := range plan {
		if errs[i] != "" {
			t.Fatalf("sample %d: %s", plan[i], errs[i])
		}
		own += strings.Count(string(traces[i]), `"copy_paste":{"mode":"mixup"`)
	}
	if own != len(plan) {
		t.Errorf("%d MixUp partners with a CopyPaste of their own, want %d", own, len(plan))
	}
	for _, ops := range [][]ops.Op{{mo, cpm, persp}, {mo, {Kind: transform.OpCopyPaste, P: 1, Args: &transform.CopyPasteArgs{Mode: "flip"}}, persp, cpm},
		{{Kind: transform.OpMosaic, P: 0.5, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}}, persp, cpm}, {mo, persp, {Kind: transform.OpCopyPaste, P: 1, Args: &transform.CopyPasteArgs{Mode: "both"}}}} {
		if _, err := transform.NewTransform(transform.CHW, ops...); err == nil || !strings.Contains(err.Error(), "YOLOCopyPaste") {
			t.Errorf("%v: %v, want YOLOCopyPaste refused", ops, err)
		}
	}
	st, err := cp.WithStopEpoch(1, []ops.OpKind{transform.OpMosaic, transform.OpCopyPaste})
	if err != nil {
		t.Fatal(err)
	}
	_, mosaic := st.AtEpoch(1).MultiRoom()
	if mr, _ := st.AtEpoch(0).MultiRoom(); mosaic || !mr.CopyPaste {
		t.Error("stop_epoch did not switch the CopyPaste off with the Mosaic")
	}
}

// pastedFlip matches a flip-mode CopyPaste that pasted, in a trace.
var pastedFlip = regexp.MustCompile(`"copy_paste":[1-9]`)

// countMem counts the label reads of a segMem.
type countMem struct {
	segMem
	reads *int
	boxes bool // boxes alone, no polygons (YOLOX's MixUp moves boxes alone)
}

func (d countMem) UltralyticsTargets(i, w, h int, t *transform.Instances) error {
	*d.reads++
	if d.boxes {
		return d.SourceTargets(i, w, h, t)
	}
	return d.segMem.UltralyticsTargets(i, w, h, t)
}

// TestMultiPlan: a mosaic sample whose CopyPaste, MixUp, CutMix or YOLOX
// MixUp draw against its labels is planned from its files' headers and
// its labels alone (transform.PlanMulti, no decode), and that plan is
// what its decode made: the same trace. Its images' labels are read once,
// for its plan and its targets together: once per image its mosaics read
// (the sample's, its partners', a YOLOX MixUp's partner's), never again
// after the decode. Without labels, a CopyPaste, a CutMix or a YOLOX
// MixUp is refused, named.
func TestMultiPlan(t *testing.T) {
	files := mosaicPNGs(t, 11)
	mo := ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}}
	persp := ops.Op{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Scale: 0.5, Translate: 0.1, Size: [2]int{48, 48}}}
	mix, cut := ops.Op{Kind: transform.OpMixUp, P: 1}, ops.Op{Kind: transform.OpCutMix, P: 1, Args: &transform.CutMixArgs{Beta: 1, Areas: 8}}
	yolox := ops.Op{Kind: transform.OpYOLOXMixUp, P: 1, Args: &transform.YOLOXMixUpArgs{Scale: [2]float64{0.5, 1.5}}}
	for name, list := range map[string][]ops.Op{
		"flip":  {mo, {Kind: transform.OpCopyPaste, P: 1, Args: &transform.CopyPasteArgs{Mode: "flip"}}, persp, mix, cut},
		"mixup": {mo, persp, {Kind: transform.OpCopyPaste, P: 1, Args: &transform.CopyPasteArgs{Mode: "mixup"}}, mix, cut},
		"yolox": {mo, persp, yolox},
	} {
		tr, err := transform.NewTransform(transform.CHW, list...)
		if err != nil {
			t.Fatal(err)
		}
		reads := 0
		ds := countMem{segMem{yoloMem: yoloMem{memDataset{files}, -1}}, &reads, name == "yolox"}
		fs, err := dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 1<<20, "mosaic")
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder()
		out := make([]byte, tr.SampleBytes())
		cuts, total, images := 0, 0, 0
		for i := range len(files) {
			k := det.Key{Seed: 5, Epoch: 2, Index: uint64(i)}
			idx := tr.PartnersOf(k, len(files))
			pdata := make([][]byte, len(idx))
			for j, p := range idx {
				pdata[j] = files[p]
			}
			reads = 0
			s := Sample{Data: files[i], Targets: ds, Index: i, Fields: fs, Partners: idx, PartnerFiles: pdata}
			if err := d.DecodeSample(s, tr, k, out); err != nil {
				t.Fatalf("%s: sample %d: %v", name, i, err)
			}
			drawn := reads
			var p transform.Plan
			if err := tr.PlanMulti(&p, k, transform.MultiSource{Data: files[i], Partners: idx, Files: pdata, Size: ImageSize, Labels: ds}); err != nil {
				t.Fatalf("%s: sample %d: %v", name, i, err)
			}
			if got, want := p.AppendTrace(nil), d.AppendTrace(nil); !bytes.Equal(got, want) {
				t.Fatalf("%s: sample %d: planned without a decode\n%s\nthe decode's\n%s", name, i, got, want)
			}
			reads = drawn
			if _, err := d.AppendTargets(nil, tr, fs); err != nil {
				t.Fatalf("%s: sample %d's targets: %v", name, i, err)
			}
			if drawn == 0 || reads != drawn || reads > 1+len(idx) {
				t.Errorf("%s: sample %d read labels %d times in its decode and %d in all, of %d images", name, i, drawn, reads, 1+len(idx))
			}
			total, images = total+reads, images+1+len(idx)
			trace := string(d.AppendTrace(nil))
			cuts += strings.Count(trace, `"applied":true`) + len(pastedFlip.FindAllString(trace, -1))
		}
		if cuts == 0 {
			t.Errorf("%s: no CutMix or CopyPaste applied", name)
		}
		t.Logf("%s: %d label reads for %d samples of %d images", name, total, len(files), images)
		d.Close()
	}
	// Planned without labels (a job without targets), an op that draws
	// against them is refused, named.
	for want, list := range map[string][]ops.Op{
		"YOLOCopyPaste": {mo, {Kind: transform.OpCopyPaste, P: 1, Args: &transform.CopyPasteArgs{Mode: "flip"}}, persp},
		"YOLOCutMix":    {mo, persp, cut},
		"YOLOXMixUp":    {mo, persp, yolox},
	} {
		tr, err := transform.NewTransform(transform.CHW, list...)
		if err != nil {
			t.Fatal(err)
		}
		k := det.Key{Seed: 5, Epoch: 2, Index: 3}
		idx := tr.PartnersOf(k, len(files))
		pdata := make([][]byte, len(idx))
		for j, p := range idx {
			pdata[j] = files[p]
		}
		var p transform.Plan
		err = tr.PlanMulti(&p, k, transform.MultiSource{Data: files[3], Partners: idx, Files: pdata, Size: ImageSize})
		if !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s planned without labels: %v", want, err)
		}
	}
}
