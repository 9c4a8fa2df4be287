package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	_ "image/jpeg" // DecodeConfig of the photos
	_ "image/png"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	fnpkg "github.com/stoker-dev/stoker/pipeline/fn"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// runCost is `stoker bench cost`: the cost model's calibration and its
// check. On one thread locked to its OS thread, with the thread's CPU
// clock, it measures
//   - each kernel family's ns per pixel (ns per pixel per tap for the
//     blur) on a 224 px image: pipeline's fnNs table, printed as Go;
//   - the decode's ns per source pixel and the resampling's per output
//     pixel, fitted from a 224 px and a 448 px RandomResizedCrop of the
//     photos (decodeNs, resampleNs);
//   - every preset's (and torchvision's policies') CPU per sample on the
//     photos, beside what the model predicts (Transform.Cost's mean), and
//     the ratio: BENCHMARKS.md's table;
//   - with --annotations, the detection presets and ops, a YOLO segment
//     set's targets, or a COCO set's instance masks (CostWith's terms).
func runCost(args []string) error {
	fs := flag.NewFlagSet("bench cost", flag.ExitOnError)
	fs.Usage = helptext.Usage(fs, helptext.Head("bench cost", "[flags]", "Calibrates and checks the cost model: each kernel family's ns per pixel, the decode's and the resampling's, on one thread, against the model's prediction per preset."))
	data := fs.String("data", "", "ImageFolder or WebDataset directory of photos (required)")
	samples := fs.Int("samples", 300, "photos each transform makes (the first ones of the dataset), after one warm-up pass")
	reps := fs.Int("reps", 200, "kernel runs per family, on a 224x224 image")
	annotations := fs.String("annotations", "", "a COCO annotations file for --data's images (stoker mkdata --coco's): the presets that need targets (detr, lsj) are measured too, each sample's boxes given to the decoder, and the detection ops apart; of a COCO file, six geometries with their targets, without and with the instance masks")
	match := fs.String("match", "", "measure only the transforms whose names match this regular expression (the kernels and the fit are measured always)")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results")
	fs.Parse(args)
	only, err := regexp.Compile(*match)
	if err != nil {
		return fmt.Errorf("bench cost: --match: %w", err)
	}
	if *data == "" {
		return errors.New("bench cost: --data is required")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ds dataset.Dataset
	if *annotations != "" {
		ds, err = dataset.OpenAnnotated(*data, *annotations)
	} else {
		ds, err = dataset.Open(*data)
	}
	if err != nil {
		return err
	}
	defer ds.Close()
	boxes, _ := ds.(transform.Targeted) // nil without annotations
	n := min(*samples, ds.Len())
	if n == 0 {
		return fmt.Errorf("bench cost: %s has no samples", *data)
	}
	var res costResult
	res.Dataset, res.Samples = *data, n
	photos := make([][]byte, n)
	var srcPx float64
	for i := range photos {
		if photos[i], err = ds.Read(i, nil); err != nil {
			return fmt.Errorf("bench cost: sample %d: %w", i, err)
		}
		photos[i] = append([]byte(nil), photos[i]...)
		cfg, _, err := image.DecodeConfig(bytes.NewReader(photos[i]))
		if err != nil {
			return fmt.Errorf("bench cost: sample %d (%s): %w", i, ds.Name(i), err)
		}
		srcPx += float64(cfg.Width * cfg.Height)
	}
	res.MeanSourcePx = srcPx / float64(n)

	// The kernels.
	const w, h = 224, 224
	pix := make([]byte, 3*w*h)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range pix {
		pix[i] = byte(rng.IntN(256))
	}
	work := make([]byte, len(pix))
	kernel := func(steps []fnpkg.Step, units float64) float64 {
		run := func() {
			copy(work, pix)
			if err := opspkg.ApplyTrace(work, w, h, steps); err != nil {
				panic(err)
			}
		}
		run()
		c0 := pipeline.ThreadCPUClock()
		for range *reps {
			run()
		}
		return float64(pipeline.ThreadCPUClock()-c0) / float64(*reps) / units
	}
	const px = w * h
	fn := func(st fnpkg.Step) []fnpkg.Step { return []fnpkg.Step{st} }
	mix := func(chains int) []fnpkg.Step {
		s := []fnpkg.Step{{Fn: fnpkg.MixBegin, F: [6]float64{0.5}}}
		for range chains {
			s = append(s, fnpkg.Step{Fn: fnpkg.MixChain, F: [6]float64{0.5 / float64(chains)}})
		}
		return append(s, fnpkg.Step{Fn: fnpkg.MixEnd})
	}
	geo := func(f fnpkg.Fn) fnpkg.Step {
		return fnpkg.Step{Fn: f, Interp: transform.InterpBilinear, F: [6]float64{17, 3, 2, 1, 5, 0}, FillNone: true}
	}
	copyNs := kernel(nil, px)
	for _, k := range []struct {
		name  string
		steps []fnpkg.Step
		units float64
	}{
		{"FnHorizontalFlip", fn(fnpkg.Step{Fn: fnpkg.HorizontalFlip}), px},
		{"FnVerticalFlip", fn(fnpkg.Step{Fn: fnpkg.VerticalFlip}), px},
		{"FnAdjustBrightness", fn(fnpkg.Step{Fn: fnpkg.AdjustBrightness, F: [6]float64{1.3}}), px},
		{"FnAdjustContrast", fn(fnpkg.Step{Fn: fnpkg.AdjustContrast, F: [6]float64{1.3}}), px},
		{"FnAdjustSaturation", fn(fnpkg.Step{Fn: fnpkg.AdjustSaturation, F: [6]float64{1.3}}), px},
		{"FnAdjustHue", fn(fnpkg.Step{Fn: fnpkg.AdjustHue, F: [6]float64{0.1}}), px},
		{"FnAdjustSharpness", fn(fnpkg.Step{Fn: fnpkg.AdjustSharpness, F: [6]float64{1.5}}), px},
		{"FnRGBToGrayscale", fn(fnpkg.Step{Fn: fnpkg.RGBToGrayscale, I: [6]int{3}}), px},
		{"FnGaussianBlur", fn(fnpkg.Step{Fn: fnpkg.GaussianBlur, I: [6]int{23, 23}, F: [6]float64{1.5, 1.5}}), px * 46},
		{"FnSolarize", fn(fnpkg.Step{Fn: fnpkg.Solarize, F: [6]float64{128}}), px},
		{"FnPosterize", fn(fnpkg.Step{Fn: fnpkg.Posterize, I: [6]int{4}}), px},
		{"FnInvert", fn(fnpkg.Step{Fn: fnpkg.Invert}), px},
		{"FnEqualize", fn(fnpkg.Step{Fn: fnpkg.Equalize}), px},
		{"FnAutocontrast", fn(fnpkg.Step{Fn: fnpkg.Autocontrast}), px},
		{"FnRotate", fn(fnpkg.Step{Fn: fnpkg.Rotate, F: [6]float64{17}, Interp: transform.InterpBilinear, FillNone: true}), px},
		{"FnAffine", fn(geo(fnpkg.Affine)), px},
		{"FnRotate nearest", fn(fnpkg.Step{Fn: fnpkg.Rotate, F: [6]float64{17}, Interp: transform.InterpNearest, FillNone: true}), px},
		{"FnAffine bicubic", fn(fnpkg.Step{Fn: fnpkg.Affine, Interp: transform.InterpBicubic, F: [6]float64{17, 3, 2, 1, 5, 0}, Fill: [3]float64{124, 116, 104}}), px},
		{"FnErase", fn(fnpkg.Step{Fn: fnpkg.Erase, I: [6]int{0, 0, h, w}}), px},
		{"FnSolarizeAdd", fn(fnpkg.Step{Fn: fnpkg.SolarizeAdd, I: [6]int{30}, F: [6]float64{128}}), px},
		{"FnMixChain", nil, 0}, // from two mixes' difference, below
	} {
		var ns float64
		if k.steps != nil {
			ns = kernel(k.steps, k.units) - copyNs*px/k.units
		} else {
			two, one := kernel(mix(2), px), kernel(mix(1), px)
			ns = two - one
			res.Kernels = append(res.Kernels, costKernel{"FnMixBegin", max((one-ns-copyNs)/2, 0)})
			res.Kernels = append(res.Kernels, costKernel{"FnMixEnd", max((one-ns-copyNs)/2, 0)})
		}
		res.Kernels = append(res.Kernels, costKernel{k.name, max(ns, 0)})
	}

	// The geometry and the presets: thread CPU per sample, after a pass
	// that warms the caches.
	measureWith := func(t *transform.Transform, fset *dataset.FieldSet) float64 {
		d := pipeline.NewDecoder()
		defer d.Close()
		out := make([]byte, t.SampleBytes())
		targets := boxes != nil && (transform.NeedsTargets(t) != "" || fset != nil)
		var tb []byte
		var partners [][]byte
		pass := func(epoch uint64) {
			for i, p := range photos {
				s := pipeline.Sample{Data: p, Index: i, Fields: fset}
				if targets {
					s.Targets = boxes
				}
				k := det.Key{Seed: 1, Epoch: epoch, Index: uint64(i)}
				if idx := t.PartnersOf(k, len(photos)); idx != nil { // a multi-image op's (yolo): read, as the executor reads them
					partners = partners[:0]
					for _, j := range idx {
						partners = append(partners, photos[j])
					}
					s.Partners, s.PartnerFiles = idx, partners
				}
				if err := d.DecodeSample(s, t, k, out); err != nil {
					panic(fmt.Sprintf("sample %d: %v", i, err))
				}
				if fset != nil { // the targets too, as a job asking for them makes them
					var err error
					if tb, err = d.AppendTargets(tb[:0], t, fset); err != nil {
						panic(fmt.Sprintf("sample %d's targets: %v", i, err))
					}
				}
			}
		}
		pass(0)
		c0 := pipeline.ThreadCPUClock()
		pass(1)
		return float64(pipeline.ThreadCPUClock()-c0) / float64(len(photos))
	}
	measure := func(t *transform.Transform) float64 { return measureWith(t, nil) }
	rrc := func(s int) *transform.Transform {
		t, err := transform.NewTransform(transform.CHW, opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{s, s}})
		if err != nil {
			panic(err)
		}
		return t
	}
	c224, c448 := measure(rrc(224)), measure(rrc(448))
	res.ResampleNs = (c448 - c224) / (448*448 - 224*224)
	res.DecodeNs = (c224 - res.ResampleNs*224*224) / res.MeanSourcePx
	norm, err := transform.NewTransform(transform.CHW, opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}},
		opspkg.Op{Kind: opspkg.OpNormalize, Args: &opspkg.NormalizeArgs{Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}}})
	if err != nil {
		return err
	}
	res.NormalizeNs = (measure(norm) - c224) / (224 * 224)

	type named struct {
		name string
		t    *transform.Transform
	}
	var ts []named
	for _, p := range transform.PresetNames() {
		t, err := transform.ParseTransform(p, transform.CHW)
		if err != nil {
			return err
		}
		if transform.NeedsTargets(t) != "" && boxes == nil {
			continue // detr, lsj: their samples need their boxes (--annotations)
		}
		ts = append(ts, named{p, t})
	}
	for _, p := range costPolicies() {
		t, err := transform.NewTransform(transform.CHW, opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}},
			opspkg.Op{Kind: opspkg.OpRandomHorizontalFlip, P: 0.5}, p.op)
		if err != nil {
			return err
		}
		ts = append(ts, named{p.name, t})
	}
	if boxes != nil {
		// The detection ops apart: RandomIoUCrop and its Resize alone, after
		// a RandomZoomOut that always applies, after a flip, and the
		// photometric distortion (always applied) before them.
		resize := opspkg.Op{Kind: transform.OpResize, Size: [2]int{640, 640}}
		iou := opspkg.Op{Kind: transform.OpRandomIoUCrop, Args: &transform.IoUCropArgs{Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.5, 2}, Options: []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1}, Trials: 40}}
		zoom := opspkg.Op{Kind: transform.OpRandomZoomOut, P: 1, Args: &transform.ZoomOutArgs{SideRange: [2]float64{1, 4}}}
		flip := opspkg.Op{Kind: opspkg.OpRandomHorizontalFlip, P: 1}
		pd := opspkg.Op{Kind: opspkg.OpRandomPhotometricDistort, P: 1, Args: &opspkg.PhotometricDistortArgs{Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}}
		for _, x := range []struct {
			name string
			ops  []opspkg.Op
		}{
			{"IoUCrop + Resize(640)", []opspkg.Op{iou, resize}},
			{"ZoomOut(p=1) + IoUCrop + Resize(640)", []opspkg.Op{zoom, iou, resize}},
			{"IoUCrop + flip(p=1) + Resize(640)", []opspkg.Op{iou, flip, resize}},
			{"PhotometricDistort(p=1) + IoUCrop + Resize(640)", []opspkg.Op{pd, iou, resize}},
			{"ScaleJitter(640) + FixedSizeCrop(640)", []opspkg.Op{
				{Kind: transform.OpScaleJitter, Size: [2]int{640, 640}, Args: &transform.ScaleJitterArgs{Scale: [2]float64{0.1, 2}}},
				{Kind: transform.OpFixedSizeCrop, Size: [2]int{640, 640}, Args: &transform.FixedSizeCropArgs{Filling: opspkg.Filling{Fill: [3]float64{123, 117, 104}}}}}},
		} {
			t, err := transform.NewTransform(transform.CHW, x.ops...)
			if err != nil {
				return fmt.Errorf("bench cost: %s: %w", x.name, err)
			}
			ts = append(ts, named{x.name, t})
		}
	}
	// Larger outputs and kernels than any preset's, to check the model's
	// extrapolation (the blur's taps, the resampling's pixels).
	for _, x := range []struct {
		name   string
		side   int
		kernel int
		blurs  int
	}{{"RRC(1024) + GaussianBlur(255)", 1024, 255, 1}, {"RRC(512) + 4 x GaussianBlur(101)", 512, 101, 4}} {
		ops := []opspkg.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{x.side, x.side}}}
		for range x.blurs {
			ops = append(ops, opspkg.Op{Kind: opspkg.OpGaussianBlur, Args: &opspkg.BlurArgs{KernelSize: [2]int{x.kernel, x.kernel}, Sigma: [2]float64{50, 50}}})
		}
		t, err := transform.NewTransform(transform.CHW, ops...)
		if err != nil {
			return err
		}
		ts = append(ts, named{x.name, t})
	}
	for _, nt := range ts {
		if !only.MatchString(nt.name) {
			continue
		}
		c := nt.t.Cost()
		got := measure(nt.t)
		res.Transforms = append(res.Transforms, costRow{nt.name, float64(c.Mean) / 1e6, float64(c.Max) / 1e6, got / 1e6, float64(c.Mean) / got})
	}
	// On a YOLO segment dataset, the YOLO presets with their targets: the
	// polygons carried, and ultralytics' overlap mask (at ratio 4 and 1)
	// made of them, priced by CostWith.
	if tg, ok := boxes.(dataset.Dataset); ok && boxes != nil {
		for _, p := range []string{"yolo", "yolo-letterbox"} {
			t, err := transform.ParseTransform(p, transform.CHW)
			if err != nil {
				return err
			}
			for _, m := range []struct {
				name  string
				mask  bool
				ratio int
			}{{" + targets (polygons)", false, 0}, {" + targets + overlap mask", true, 4}, {" + targets + overlap mask (ratio 1)", true, 1}} {
				name := p + m.name
				fset, err := dataset.NewFieldSet(tg, []string{transform.FieldTargets}, 1<<20, "bench")
				if err != nil {
					return err
				}
				if m.mask {
					if transform.CheckOverlapMask(t, tg) != nil {
						continue
					}
					fset.SetOverlapMask(1 << 24)
					fset.SetMaskFormat(m.ratio, true)
				}
				tc := transform.TargetCostOf(t, tg, fset)
				if !tc.Segments || !only.MatchString(name) {
					continue
				}
				c := t.CostWith(tc)
				got := measureWith(t, fset)
				res.Transforms = append(res.Transforms, costRow{name, float64(c.Mean) / 1e6, float64(c.Max) / 1e6, got / 1e6, float64(c.Mean) / got})
			}
		}
	}

	// On a COCO set, torchvision's instance masks (targets "masks"): a few
	// geometries measured with their targets, without and with the masks,
	// and priced by CostWith (the masks' terms; the boxes are not priced).
	if tg, ok := boxes.(*dataset.COCODataset); ok {
		rot := opspkg.Op{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-30, 30}}}
		rot255 := rot
		rot255.Args = &transform.RotationArgs{Degrees: [2]float64{-30, 30}, Filling: opspkg.Filling{FillTyped: true, FillMask: 255}}
		resize := opspkg.Op{Kind: transform.OpResize, Size: [2]int{480, 480}}
		for _, x := range []struct {
			name string
			ops  []opspkg.Op
		}{
			{"RRC(224) + flip", []opspkg.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}}, {Kind: opspkg.OpRandomHorizontalFlip, P: 0.5}}},
			{"detr", nil}, {"lsj", nil}, {"segref", nil},
			{"Resize(480) + RandomRotation(30)", []opspkg.Op{resize, rot}},
			{"Resize(480) + RandomRotation(30, Mask fill 255)", []opspkg.Op{resize, rot255}},
		} {
			var t *transform.Transform
			if x.ops == nil {
				t, err = transform.ParseTransform(x.name, transform.CHW)
			} else {
				t, err = transform.NewTransform(transform.CHW, x.ops...)
			}
			if err != nil {
				return fmt.Errorf("bench cost: %s: %w", x.name, err)
			}
			if err := transform.CheckMasks(t); err != nil {
				return fmt.Errorf("bench cost: %s: %w", x.name, err)
			}
			for _, masks := range []bool{false, true} {
				name := x.name + " + targets"
				if masks {
					name += " + masks"
				}
				if !only.MatchString(name) {
					continue
				}
				fset, err := dataset.NewFieldSet(tg, []string{transform.FieldTargets}, 1<<20, "bench")
				if err != nil {
					return err
				}
				if masks {
					fset.SetMasks(1 << 28)
				}
				c := t.CostWith(transform.TargetCostOf(t, tg, fset))
				got := measureWith(t, fset)
				res.Transforms = append(res.Transforms, costRow{name, float64(c.Mean) / 1e6, float64(c.Max) / 1e6, got / 1e6, float64(c.Mean) / got})
			}
		}
	}

	fmt.Printf("stoker bench cost: %s, %d photos (%.0f px on average), one thread, %s\n", *data, n, res.MeanSourcePx, time.Now().UTC().Format("2006-01-02"))
	fmt.Println("// ns per pixel (the blur: per pixel per tap), over a copy of the image:")
	for _, k := range res.Kernels {
		fmt.Printf("\t%s: %.3g,\n", k.Fn, k.Ns)
	}
	fmt.Printf("\tFnNormalize: %.3g, // per output pixel, from a decode with and without it\n", res.NormalizeNs)
	fmt.Printf("\tdecodeNs = %.3g // per source pixel\n\tresampleNs = %.3g // per output pixel\n", res.DecodeNs, res.ResampleNs)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transform\tpredicted ms\tworst ms\tmeasured ms\tpredicted/measured\t")
	for _, r := range res.Transforms {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.Name, r.PredictedMs, r.WorstMs, r.MeasuredMs, r.Ratio)
	}
	tw.Flush()
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	return nil
}

// costPolicies are torchvision's policies at their defaults, and AugMix at
// its largest severity and a width and depth near the bounds (the issue's
// expensive recipe), each after a 224 px crop and a flip.
func costPolicies() []struct {
	name string
	op   opspkg.Op
} {
	return []struct {
		name string
		op   opspkg.Op
	}{
		{"tv AugMix()", opspkg.Op{Kind: opspkg.OpAugMix, Args: &opspkg.AugMixArgs{Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1}}},
		{"tv TrivialAugmentWide()", opspkg.Op{Kind: opspkg.OpTrivialAugmentWide, Args: &opspkg.TrivialAugmentWideArgs{Bins: 31, Resampling: opspkg.Resampling{Interp: transform.InterpNearest}}}},
		{"tv RandAugment()", opspkg.Op{Kind: opspkg.OpRandAugment, Args: &opspkg.RandAugmentArgs{NumOps: 2, Magnitude: 9, Bins: 31, Resampling: opspkg.Resampling{Interp: transform.InterpNearest}}}},
		{"tv AutoAugment()", opspkg.Op{Kind: opspkg.OpAutoAugment, Args: &opspkg.AutoAugmentArgs{Policy: "imagenet", Resampling: opspkg.Resampling{Interp: transform.InterpNearest}}}},
		{"AugMix(10, 16, 14)", opspkg.Op{Kind: opspkg.OpAugMix, Args: &opspkg.AugMixArgs{Severity: 10, MixtureWidth: 16, ChainDepth: 14, Alpha: 1}}},
	}
}

// costResult is `stoker bench cost --json`'s line.
type costResult struct {
	Dataset      string       `json:"dataset"`
	Samples      int          `json:"samples"`
	MeanSourcePx float64      `json:"mean_source_px"`
	Kernels      []costKernel `json:"kernels"`
	DecodeNs     float64      `json:"decode_ns_per_source_px"`
	ResampleNs   float64      `json:"resample_ns_per_output_px"`
	NormalizeNs  float64      `json:"normalize_ns_per_output_px"`
	Transforms   []costRow    `json:"transforms"`
}

type costKernel struct {
	Fn string  `json:"fn"`
	Ns float64 `json:"ns_per_px"`
}

type costRow struct {
	Name        string  `json:"name"`
	PredictedMs float64 `json:"predicted_ms"`
	WorstMs     float64 `json:"worst_ms"`
	MeasuredMs  float64 `json:"measured_ms"`
	Ratio       float64 `json:"predicted_over_measured"`
}
