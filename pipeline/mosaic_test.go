package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// mosaicPNGs are n PNGs of sizes that vary (landscape, portrait, square,
// smaller and larger than the mosaics' imgsz), each a pattern of its own.
func mosaicPNGs(t *testing.T, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		w, h := 40+13*i%70, 30+29*i%80
		im := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				im.Set(x, y, color.NRGBA{uint8(x*7 + i*31), uint8(y*5 + i*17), uint8((x*y + i) % 251), 255})
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, im); err != nil {
			t.Fatal(err)
		}
		out[i] = b.Bytes()
	}
	return out
}

// yoloMem is memDataset with YOLO labels: two boxes an image, normalized,
// and sample bad's Read failing (bad < 0: none).
type yoloMem struct {
	memDataset
	bad int
}

func (d yoloMem) Read(i int, buf []byte) ([]byte, error) {
	if i == d.bad {
		return nil, fmt.Errorf("%w: mem/%d.jpg: the disk said no", errs.Corrupt, i)
	}
	return d.memDataset.Read(i, buf)
}

func (d yoloMem) Labels(i int) ([]annot.YOLOInstance, error) {
	f := float32(i%5) / 10
	return []annot.YOLOInstance{
		{Class: i % 3, Box: [4]float32{0.3 + f, 0.4, 0.2, 0.3}},
		{Class: 7, Box: [4]float32{0.5, 0.5 + float32(f/2), 0.9, 0.35}}, // the half rounded: never fused
	}, nil
}

func (d yoloMem) SourceTargets(i, w, h int, t *transform.Instances) error {
	ls, _ := d.Labels(i)
	for _, l := range ls {
		b := l.Box
		t.Add([4]float32{(b[0] - b[2]/2) * float32(w), (b[1] - b[3]/2) * float32(h), (b[0] + b[2]/2) * float32(w), (b[1] + b[3]/2) * float32(h)}, int64(l.Class), false)
	}
	return nil
}

type mosaicTrace struct {
	N       int      `json:"n"`
	ImgSz   int      `json:"imgsz"`
	Indexes []int    `json:"indexes"`
	Sizes   [][2]int `json:"sizes"`
	XC      int      `json:"xc"`
	YC      int      `json:"yc"`
}

// mosaicOf is the mosaic entry of a sample's trace.
func mosaicOf(t *testing.T, trace []byte) mosaicTrace {
	t.Helper()
	var steps []json.RawMessage
	if err := json.Unmarshal(trace, &steps); err != nil {
		t.Fatalf("trace %s: %v", trace, err)
	}
	var pair []json.RawMessage
	if err := json.Unmarshal(steps[0], &pair); err != nil || string(pair[0]) != `"yolo_mosaic"` {
		t.Fatalf("trace %s: its first entry is not the mosaic", trace)
	}
	var m mosaicTrace
	if err := json.Unmarshal(pair[1], &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// fillMosaic makes the samples indices of ds with tr (seed 5, epoch e) in
// batches of split on an executor of workers with opts, with traces and
// targets.
func fillMosaic(t *testing.T, ds dataset.Dataset, tr *transform.Transform, e uint64, indices []int64, split, workers int, opts ...Option) (data [][]byte, traces, targets [][]byte, errs []string) {
	t.Helper()
	ex := NewExecutor(workers, opts...)
	defer ex.Close()
	fs, err := dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 1<<20, "mosaic")
	if err != nil {
		t.Fatal(err)
	}
	size := tr.SampleBytes()
	for at := 0; at < len(indices); at += split {
		part := indices[at:min(at+split, len(indices))]
		b := Batch{Trace: true, FieldSet: fs}
		if err := ex.Fill(context.Background(), ds, tr, 5, e, part, PadFromBatch, &b); err != nil {
			t.Fatal(err)
		}
		failed := map[int64]string{}
		for _, se := range b.Errors {
			failed[se.Index] = se.Reason
		}
		for i, idx := range part {
			data = append(data, b.Data[i*size:(i+1)*size])
			traces = append(traces, append([]byte{}, b.Traces[i]...))
			targets = append(targets, append([]byte{}, b.Fields[i].Data...))
			errs = append(errs, failed[idx])
		}
	}
	return data, traces, targets, errs
}

// TestMosaicPartners: every index is the primary sample of its own slot
// exactly once an epoch (partners are read, not consumed), its partners
// are in the dataset and drawn anew each epoch, and a sample's bytes,
// trace and targets are the same whatever the batch split and the
// executor's workers; its pixels are the cv kernels' mosaic of the
// load_image'd images and its boxes their mosaic's.
func TestMosaicPartners(t *testing.T) {
	files := mosaicPNGs(t, 11)
	ds := yoloMem{memDataset{files}, -1}
	for _, n := range []int{4, 9} {
		tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 48, N: n}})
		if err != nil {
			t.Fatal(err)
		}
		if h, w := tr.Size(); h != 96 || w != 96 {
			t.Fatalf("Mosaic(48) is %dx%d", h, w)
		}
		plan := []int64{3, 9, 0, 7, 1, 10, 5, 2, 8, 6, 4}
		d1, tr1, tg1, e1 := fillMosaic(t, ds, tr, 2, plan, len(plan), 1)
		d2, tr2, tg2, _ := fillMosaic(t, ds, tr, 2, plan, 3, 3)
		_, tr3, _, _ := fillMosaic(t, ds, tr, 3, plan, 4, 2)
		partners := map[int]bool{}
		for i, idx := range plan {
			if e1[i] != "" {
				t.Fatalf("n=%d sample %d: %s", n, idx, e1[i])
			}
			if !bytes.Equal(d1[i], d2[i]) || !bytes.Equal(tr1[i], tr2[i]) || !bytes.Equal(tg1[i], tg2[i]) {
				t.Fatalf("n=%d sample %d: another batch split or worker count made other bytes", n, idx)
			}
			m := mosaicOf(t, tr1[i])
			if len(m.Indexes) != n || m.Indexes[0] != int(idx) || m.N != n || m.ImgSz != 48 {
				t.Fatalf("n=%d sample %d: trace %s", n, idx, tr1[i])
			}
			for _, p := range m.Indexes[1:] {
				if p < 0 || p >= len(files) {
					t.Fatalf("partner %d out of the dataset", p)
				}
				partners[p] = true
			}
			if m3 := mosaicOf(t, tr3[i]); fmt.Sprint(m3.Indexes) == fmt.Sprint(m.Indexes) {
				t.Errorf("n=%d sample %d: the same partners %v in epochs 2 and 3", n, idx, m.Indexes)
			}
			checkMosaicSample(t, files, ds, m, d1[i], tg1[i])
		}
		if len(partners) < 5 {
			t.Errorf("n=%d: partners %v: want them spread over the dataset", n, partners)
		}
	}
}

// kernelMosaic is the cv kernels' mosaic of m's images, decoded by Go's
// image/png, and its instances.
func kernelMosaic(t *testing.T, files [][]byte, ds yoloMem, m mosaicTrace) (kernels.Planes, cv.Instances) {
	t.Helper()
	var imgs []kernels.Planes
	var ins []cv.Instances
	for j, i := range m.Indexes {
		im, err := png.Decode(bytes.NewReader(files[i]))
		if err != nil {
			t.Fatal(err)
		}
		b := im.Bounds()
		src := kernels.Planes{Pix: make([]byte, 3*b.Dx()*b.Dy()), W: b.Dx(), H: b.Dy()}
		n := src.W * src.H
		for y := range src.H {
			for x := range src.W {
				c := color.NRGBAModel.Convert(im.At(x, y)).(color.NRGBA)
				src.Pix[y*src.W+x], src.Pix[n+y*src.W+x], src.Pix[2*n+y*src.W+x] = c.R, c.G, c.B
			}
		}
		w, h := cv.LoadSize(src.W, src.H, m.ImgSz)
		if [2]int{w, h} != m.Sizes[j] {
			t.Fatalf("image %d: load_image size %dx%d, traced %v", i, w, h, m.Sizes[j])
		}
		dst := kernels.Planes{Pix: make([]byte, 3*w*h), W: w, H: h}
		cv.ResizeLinear(dst, src)
		imgs = append(imgs, dst)
		ls, _ := ds.Labels(i)
		var xywh [][4]float32
		var cls []int64
		for _, l := range ls {
			xywh, cls = append(xywh, l.Box), append(cls, int64(l.Class))
		}
		ins = append(ins, cv.Instances{Boxes: cv.FromYOLO(xywh, w, h), Cls: cls})
	}
	tiles, err := cv.MosaicLayout(m.N, m.ImgSz, m.XC, m.YC, m.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	s := 2 * m.ImgSz
	out := kernels.Planes{Pix: make([]byte, 3*s*s), W: s, H: s}
	cv.MosaicImage(out, imgs, tiles)
	return out, cv.MosaicInstances(ins, tiles, m.ImgSz)
}

// checkMosaicSample holds one sample to the cv kernels run on the files
// decoded by Go's image/png: its pixels to MosaicImage's, its targets to
// MosaicInstances' (boxes within 1e-3 px).
func checkMosaicSample(t *testing.T, files [][]byte, ds yoloMem, m mosaicTrace, got, targets []byte) {
	t.Helper()
	want, wi := kernelMosaic(t, files, ds, m)
	if !bytes.Equal(want.Pix, got) {
		t.Fatalf("mosaic %v: pixels differ from the kernels'", m.Indexes)
	}
	checkTargets(t, targets, wi, 2*m.ImgSz)
}

// checkTargets holds a sample's targets (canvas s x s) to wi: the same
// labels, boxes within 1e-3 px.
func checkTargets(t *testing.T, targets []byte, wi cv.Instances, s int) {
	t.Helper()
	le := binary.LittleEndian
	if k := int(le.Uint32(targets[16:])); k != len(wi.Boxes) || le.Uint32(targets) != uint32(s) {
		t.Fatalf("%d boxes on %d, want %d on %d", k, le.Uint32(targets), len(wi.Boxes), s)
	}
	for q, b := range wi.Boxes {
		for c := range 4 {
			v := math.Float32frombits(le.Uint32(targets[24+16*q+4*c:]))
			if math.Abs(float64(v-b[c])) > 1e-3 {
				t.Fatalf("box %d: %v, want %v", q, v, b)
			}
		}
		if l := int64(le.Uint64(targets[24+16*len(wi.Boxes)+8*q:])); l != wi.Cls[q] {
			t.Fatalf("box %d label %d, want %d", q, l, wi.Cls[q])
		}
	}
}

// TestMosaicBadPartner: a partner that cannot be read, or is no image,
// fails the sample that drew it, the error naming the partner; the
// others are made.
func TestMosaicBadPartner(t *testing.T) {
	files := mosaicPNGs(t, 9)
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 32, N: 4}})
	if err != nil {
		t.Fatal(err)
	}
	plan := []int64{0, 1, 2, 3, 5, 6, 7, 8} // 4 is bad: never a primary here
	for _, how := range []string{"read", "corrupt"} {
		ds := yoloMem{memDataset{append([][]byte{}, files...)}, -1}
		if how == "read" {
			ds.bad = 4
		} else {
			ds.files[4] = []byte("\x89PNG\r\n\x1a\nnot a png at all")
		}
		_, _, _, errs := fillMosaic(t, ds, tr, 0, plan, 4, 2)
		failed := 0
		for i, idx := range plan {
			p := tr.PartnersOf(det.Key{Seed: 5, Epoch: 0, Index: uint64(idx)}, len(files))
			drew := false
			for _, q := range p {
				drew = drew || q == 4
			}
			switch {
			case drew && (!strings.Contains(errs[i], "mosaic partner") || !strings.Contains(errs[i], "(sample 4")):
				t.Errorf("%s: sample %d drew partners %v: error %q, want one naming partner 4", how, idx, p, errs[i])
			case !drew && errs[i] != "":
				t.Errorf("%s: sample %d (partners %v) failed: %s", how, idx, p, errs[i])
			}
			if drew {
				failed++
			}
		}
		if failed == 0 {
			t.Fatalf("no sample drew partner 4: pick another plan")
		}
	}
}
