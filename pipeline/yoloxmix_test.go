package pipeline

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestYOLOXMixScratchInBound: the buffers a decoder keeps after making
// samples through a YOLOX MixUp (its partner loaded whole, resized twice,
// its canvas and the canvas jittered, up to mixup_scale's max) stay
// within the scratch bound the job is admitted by, for the largest of
// the images, with and without a partner cache.
func TestYOLOXMixScratchInBound(t *testing.T) {
	files := mosaicPNGs(t, 11)
	w, h, px := 0, 0, int64(0)
	for _, f := range files {
		hd, err := parseHeader(f)
		if err != nil {
			t.Fatal(err)
		}
		w, h, px = max(w, hd.w), max(h, hd.h), max(px, int64(hd.w)*int64(hd.h))
	}
	tr := mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 48, N: 4}},
		ops.Op{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Scale: 0.5, Translate: 0.1, Size: [2]int{40, 56}}},
		ops.Op{Kind: transform.OpYOLOXMixUp, P: 1, Args: &transform.YOLOXMixUpArgs{Scale: [2]float64{0.5, 2}}})
	reads := 0
	ds := countMem{segMem{yoloMem: yoloMem{memDataset{files}, -1}}, &reads, true}
	fs, err := dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 1<<20, "mosaic")
	if err != nil {
		t.Fatal(err)
	}
	for _, cached := range []bool{false, true} {
		var opts []Option
		if cached {
			opts = append(opts, WithPartnerCache(cv.NewPartnerCache(1<<20)))
		}
		d := NewDecoder(opts...)
		out := make([]byte, tr.SampleBytes())
		bound := scratchBound(tr.AtEpoch(0), true, cached, !haveFast, w, h, px, fs)
		mixed := 0
		for i := range files {
			k := det.Key{Seed: 7, Index: uint64(i)}
			idx := tr.PartnersOf(k, len(files))
			pdata := make([][]byte, len(idx))
			for j, p := range idx {
				pdata[j] = files[p]
			}
			if err := d.DecodeSample(Sample{Data: files[i], Targets: ds, Index: i, Fields: fs, Partners: idx, PartnerFiles: pdata}, tr, k, out); err != nil {
				t.Fatalf("sample %d: %v", i, err)
			}
			mixed += len(idx) - 3
			kept := d.scratchBytes()
			if kept.imgs > bound.imgs || kept.full > bound.full || kept.canvas > bound.canvas || kept.others > bound.others {
				t.Fatalf("cached %v, sample %d: kept images %d, whole %d, canvas %d, partners %d; bound %d, %d, %d, %d",
					cached, i, kept.imgs, kept.full, kept.canvas, kept.others, bound.imgs, bound.full, bound.canvas, bound.others)
			}
		}
		if mixed != len(files) {
			t.Fatalf("p=1 drew %d YOLOX partners for %d samples", mixed, len(files))
		}
		d.Close()
	}
}
