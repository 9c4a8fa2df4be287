package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/stoker-dev/stoker/internal/cpu"
	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	transformpkg "github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
	"google.golang.org/protobuf/encoding/protojson"
)

func runBench(args []string) error {
	if len(args) == 0 || args[0] != "pipeline" {
		return errors.New("usage: stoker bench pipeline --data DIR [--threads N] [--transform NAME | --spec JSON] [--epochs N] [--seconds S] [--decode exact|fast] [--index-budget BYTES] [--coef-budget BYTES] [--partner-budget BYTES] [--annotations FILE] [--json]")
	}
	fs := flag.NewFlagSet("bench pipeline", flag.ExitOnError)
	fs.Usage = helptext.Usage(fs, helptext.Head("bench pipeline", "--data DIR [flags]", "Measures the pipeline's images per CPU-second on one thread: the first epoch, then epochs >= 2."))
	data := fs.String("data", "", "ImageFolder or WebDataset directory (required)")
	threads := fs.Int("threads", 1, "decode goroutines (GOMAXPROCS is threads+1: the spare P only schedules; CPU time is reported)")
	transform := fs.String("transform", "imagenet-train", "transform preset")
	spec := fs.String("spec", "", "a TransformSpec as JSON (as stoker ops draw --spec) instead of --transform: an op list and its max_size; without one, a COCO dataset's annotations bound the sizes where the geometry needs a bound, as a job's do")
	epochs := fs.Int("epochs", 0, "epochs to run, each every sample once in a shuffled order; 0: the first, then as many as fill --seconds (at least one more)")
	seconds := fs.Float64("seconds", 10, "with --epochs 0, how long to measure the epochs after the first")
	batch := fs.Int("batch", 64, "samples per batch")
	reference := fs.Bool("reference", false, "force the pure-Go reference path")
	decode := fs.String("decode", "exact", "how JPEGs are decoded (as stoker serve's --decode): exact (full scale, torchvision's pixels) or fast (a DCT scale where the crop allows, as --dct-scaling says)")
	scaling := fs.String("dct-scaling", "pow2", "with --decode fast, the DCT scales the fast path may use: pow2, any or off")
	indexBudget := fs.Int64("index-budget", 1<<30, "memory for the decoder index (as stoker serve's --index-budget); -1: no index")
	coefBudget := fs.Int64("coef-budget", 0, "memory for the coefficient cache (as stoker serve's --coef-budget); 0: serve's default here, a quarter of its default --memory-budget; -1: none")
	partnerBudget := fs.Int64("partner-budget", 0, "memory for the partner cache (as stoker serve's --partner-budget: the multi-image ops' load_image'd images); 0: serve's default here, a sixteenth of its default --memory-budget; -1: none")
	annotations := fs.String("annotations", "", "a COCO annotations file for --data's images (as stoker serve's --annotations): every batch asks for its targets (boxes and labels moved with the pixels), as a job with targets does; needed by the detection presets (detr, lsj)")
	overlap := fs.Bool("overlap-mask", false, "with --annotations of a YOLO segment dataset (its data.yaml) and a YOLO transform, every sample's targets carry ultralytics' overlap mask too, as a job asking for targets \"overlap_mask\" does")
	maskRatio := fs.Int("mask-ratio", 4, "with --overlap-mask, its Format's mask_ratio (as a job's mask_ratio)")
	maskOverlap := fs.Bool("mask-overlap", true, "with --overlap-mask, its Format's mask_overlap: false makes one mask an instance (as a job's mask_overlap=False)")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results")
	fs.Parse(args[1:])
	if *data == "" {
		return errors.New("bench pipeline: --data is required")
	}
	sc, ok := map[string]pipeline.DCTScaling{"pow2": pipeline.ScalePow2, "any": pipeline.ScaleAny, "off": pipeline.ScaleOff}[*scaling]
	if !ok {
		return fmt.Errorf("bench pipeline: --dct-scaling %q: want pow2, any or off", *scaling)
	}
	mode, err := transformpkg.ParseDecodeMode(*decode)
	if err != nil {
		return fmt.Errorf("bench pipeline: --decode %q: want exact or fast", *decode)
	}
	runtime.GOMAXPROCS(max(*threads, 1))
	cpu.SpareP(*threads)
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
	var fset *dataset.FieldSet
	if *annotations != "" {
		if fset, err = dataset.NewFieldSet(ds, []string{transformpkg.FieldTargets}, 1<<20, "bench"); err != nil {
			return err
		}
	}
	t, err := benchTransform(*transform, *spec, ds)
	if err != nil {
		return err
	}
	if *spec != "" {
		*transform = "spec"
	}
	t = t.WithDecode(mode)
	if *overlap {
		if fset == nil {
			return errors.New("bench pipeline: --overlap-mask needs --annotations")
		}
		if err := transformpkg.CheckOverlapMask(t, ds); err != nil {
			return fmt.Errorf("bench pipeline: --overlap-mask: %w", err)
		}
		if *maskRatio < 1 {
			return fmt.Errorf("bench pipeline: --mask-ratio %d: want at least 1", *maskRatio)
		}
		fset.SetOverlapMask(1 << 20)
		fset.SetMaskFormat(*maskRatio, *maskOverlap)
	} else if *maskRatio != 4 || !*maskOverlap {
		return errors.New("bench pipeline: --mask-ratio and --mask-overlap need --overlap-mask")
	}
	opts := []pipeline.Option{pipeline.WithReference(*reference), pipeline.WithDCTScaling(sc)}
	var ix *index.Index
	if *indexBudget >= 0 {
		ix = index.New(*indexBudget)
		opts = append(opts, pipeline.WithIndex(ix))
	}
	if *coefBudget == 0 {
		*coefBudget = server.DefaultCoefBudget(*threads)
	}
	var cc *codec.CoefCache
	if *coefBudget > 0 {
		cc = codec.NewCoefCache(*coefBudget)
		defer cc.Close()
		opts = append(opts, pipeline.WithCoefCache(cc))
	}
	if *partnerBudget == 0 {
		*partnerBudget = server.DefaultPartnerBudget(*threads)
	}
	var pc *cv.PartnerCache
	if *partnerBudget > 0 {
		pc = cv.NewPartnerCache(*partnerBudget)
		opts = append(opts, pipeline.WithPartnerCache(pc))
	}
	ex := pipeline.NewExecutor(*threads, opts...)
	defer ex.Close()

	r := benchPipeline(ex, ix, cc, ds, fset, t, *batch, *epochs, time.Duration(*seconds*float64(time.Second)))
	r.Threads, r.Transform, r.Fast, r.Decode = *threads, *transform, pipeline.Fast() && !*reference, mode.String()
	r.Dataset = *data

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "stoker bench pipeline\t%s (%d samples)\n", *data, ds.Len())
	fmt.Fprintf(tw, "transform\t%s (fast path: %v)\n", t, r.Fast)
	fmt.Fprintf(tw, "decode\t%s\n", mode)
	fmt.Fprintf(tw, "threads\t%d\n", r.Threads)
	if ix == nil {
		fmt.Fprintf(tw, "decoder index\toff\n")
	} else {
		fmt.Fprintf(tw, "decoder index\t%d files, %.0f bytes per file (budget %d)\n", r.Index.Files, r.Index.BytesPerFile, *indexBudget)
	}
	if cc == nil {
		fmt.Fprintf(tw, "coefficient cache\toff\n")
	} else {
		fmt.Fprintf(tw, "coefficient cache\t%d files, %.0f bytes per file (budget %d)\n", r.Coefs.Files, r.Coefs.BytesPerFile, *coefBudget)
		fmt.Fprintf(tw, "progressive transcodes\t%d files, %d bytes, %d decodes from them, %d decoded as progressive\n", r.Transcodes.Files, r.Transcodes.Bytes, r.Transcodes.Hits, r.Transcodes.Fallbacks)
	}
	if pc == nil {
		fmt.Fprintf(tw, "partner cache\toff\n")
	} else {
		st := pc.Stats()
		r.Partners = &st
		fmt.Fprintf(tw, "partner cache\t%d images, %d bytes (budget %d); %d hits, %d misses, %d evicted\n", st.Entries, st.Bytes, st.Budget, st.Hits, st.Misses, st.Evicted)
	}
	fmt.Fprintf(tw, "\nepoch\timages\tseconds\timages/s\tper CPU-s\tindex hits\tMCUs decoded\tMCUs from the coefficient cache\n")
	for _, e := range r.Epochs {
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.1f\t%.1f\t%.0f%%\t%.0f%%\t%.0f%%\n", e.Epoch, e.Images, e.Seconds, e.ImagesPerSec, e.ImagesPerCPUSec, 100*e.HitRate, 100*e.MCUsDecoded, 100*e.CoefHitRate)
	}
	fmt.Fprintf(tw, "\nepoch 1\t%.1f images/s, %.1f per CPU-second (%d sample errors)\n", r.Epoch1.ImagesPerSec, r.Epoch1.ImagesPerCPUSec, r.Epoch1.Errors)
	fmt.Fprintf(tw, "epochs >= 2\t%.1f images/s, %.1f per CPU-second (%d sample errors)\n", r.Later.ImagesPerSec, r.Later.ImagesPerCPUSec, r.Later.Errors)
	if tg := r.Targets; tg != nil {
		fmt.Fprintf(tw, "targets\t%.1f instances and %.0f bytes a sample, %.0f bytes of pixels: %.4f%% of a batch's bytes\n",
			tg.InstancesPerSample, tg.BytesPerSample, tg.ImageBytesPerSample, 100*tg.Share)
	}
	tw.Flush()
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	return nil
}

// benchResult is `stoker bench pipeline --json`'s line. images_per_sec and
// images_per_cpu_sec are the epochs after the first (the steady state a
// training run sees); epoch1 and later say each part.
type benchResult struct {
	Impl         string  `json:"impl"`
	Dataset      string  `json:"dataset"`
	Transform    string  `json:"transform"`
	Fast         bool    `json:"fast_path"`
	Decode       string  `json:"decode"`
	Threads      int     `json:"threads"`
	Images       int64   `json:"images"`
	Errors       int64   `json:"errors"`
	Seconds      float64 `json:"seconds"`
	ImagesPerSec float64 `json:"images_per_sec"`
	// CPU time of the whole process over the measured interval.
	CPUSeconds      float64      `json:"cpu_seconds"`
	ImagesPerCPUSec float64      `json:"images_per_cpu_sec"`
	Epoch1          benchPart    `json:"epoch1"`
	Later           benchPart    `json:"later"`
	Epochs          []benchEpoch `json:"epochs"`
	Index           benchIndex   `json:"index"`
	Coefs           benchIndex   `json:"coefs"` // the coefficient cache (evicted: 0)
	// Transcodes is the coefficient cache's progressive files held as
	// their sequential transcode, and those decoded as progressive.
	Transcodes benchTranscodes `json:"transcodes"`
	// Targets is the batches' targets, with --annotations (else absent).
	Targets *benchTargets `json:"targets,omitempty"`
	// Partners is the partner cache's, when on (the multi-image ops' images).
	Partners *cv.PartnerStats `json:"partners,omitempty"`
}

// benchTargets is what the targets of all the batches measured took: their
// bytes (targets.AppendTargets' encoding, as the wire carries it) and the
// pixels' a sample, and the targets' share of a batch's bytes (targets
// over targets and pixels).
type benchTargets struct {
	Samples             int64   `json:"samples"`
	InstancesPerSample  float64 `json:"instances_per_sample"`
	BytesPerSample      float64 `json:"bytes_per_sample"`
	ImageBytesPerSample float64 `json:"image_bytes_per_sample"`
	Share               float64 `json:"share_of_batch_bytes"`
}

// benchPart sums some epochs.
type benchPart struct {
	Images          int64   `json:"images"`
	Errors          int64   `json:"errors"`
	Seconds         float64 `json:"seconds"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	ImagesPerSec    float64 `json:"images_per_sec"`
	ImagesPerCPUSec float64 `json:"images_per_cpu_sec"`
}

// benchEpoch is one epoch.
type benchEpoch struct {
	Epoch int `json:"epoch"` // 1-based
	benchPart
	// HitRate is the share of the epoch's index lookups that found the
	// file's index; MCUsDecoded the share of its scans' MCUs entropy-
	// decoded (0 without an index).
	HitRate     float64 `json:"index_hit_rate"`
	MCUsDecoded float64 `json:"mcus_decoded"`
	// CoefHitRate is the share of the MCUs inverse-transformed whose
	// coefficients came from the coefficient cache.
	CoefHitRate float64 `json:"coef_hit_rate"`
}

// benchTranscodes is the coefficient cache's transcodes at the end.
type benchTranscodes struct {
	Files     int   `json:"files"`
	Bytes     int64 `json:"bytes"`
	Hits      int64 `json:"hits"`
	Fallbacks int64 `json:"fallbacks"`
}

// benchIndex is the decoder index at the end.
type benchIndex struct {
	Files        int     `json:"files"`
	Bytes        int64   `json:"bytes"`
	BytesPerFile float64 `json:"bytes_per_file"`
	Evicted      int64   `json:"evicted"`
}

func (p *benchPart) add(q benchPart) {
	p.Images += q.Images
	p.Errors += q.Errors
	p.Seconds += q.Seconds
	p.CPUSeconds += q.CPUSeconds
	p.ImagesPerSec = float64(p.Images) / p.Seconds
	p.ImagesPerCPUSec = float64(p.Images) / p.CPUSeconds
}

// benchPipeline runs epochs over ds: each makes every sample once, in a
// shuffled order, with its own crops (the key's epoch), in batches, two in
// flight so the pool never idles between them. With epochs 0 it runs the
// first epoch, then more until d has been spent in them (at least one).
// The files are read once before the first epoch, so that it does not pay
// for the page cache, and two warm-up batches are made (with another
// seed) into the batches the epochs reuse; the decoder index (ix, nil for
// none) and the coefficient cache then start empty.
func benchPipeline(ex *pipeline.Executor, ix *index.Index, cc *codec.CoefCache, ds dataset.Dataset, fset *dataset.FieldSet, t *transformpkg.Transform, batch, epochs int, d time.Duration) benchResult {
	n := ds.Len()
	var buf []byte
	for i := range n {
		buf, _ = ds.Read(i, buf)
	}
	// Warm-up batches (decoder scratch, code paged in), as before epochs
	// were told apart; their index entries are dropped.
	warm := make([]int64, min(batch, n))
	for i := range warm {
		warm[i] = int64(i)
	}
	// The two batches in flight are made here and reused by every epoch,
	// as the server fills its ring of batch slots again and again: their
	// memory is touched once, here, not in the first epoch measured (a
	// fresh batch's pages fault in on first write, about 2% of a first
	// epoch's CPU on small photos). Each takes one warm-up batch.
	var bufs [2]pipeline.Batch
	for i := range bufs {
		if fset != nil {
			bufs[i].FieldSet = fset
		}
		ex.Fill(context.Background(), ds, t, 1, 0, warm, pipeline.PadFromBatch, &bufs[i])
	}
	if ix != nil {
		ix.Clear()
	}
	if cc != nil {
		cc.Clear()
	}
	var r benchResult
	r.Impl = "stoker"
	var tc targetCount
	for e := 1; epochs == 0 && (e <= 2 || r.Later.Seconds < d.Seconds()) || e <= epochs; e++ {
		ep := benchOneEpoch(ex, ix, cc, ds, fset, &tc, t, batch, e, &bufs)
		r.Epochs = append(r.Epochs, ep)
		if e == 1 {
			r.Epoch1.add(ep.benchPart)
		} else {
			r.Later.add(ep.benchPart)
		}
	}
	all := r.Epoch1
	if len(r.Epochs) > 1 {
		all = r.Later
	}
	r.Images, r.Errors, r.Seconds, r.CPUSeconds = all.Images, all.Errors, all.Seconds, all.CPUSeconds
	r.ImagesPerSec, r.ImagesPerCPUSec = all.ImagesPerSec, all.ImagesPerCPUSec
	if fset != nil && tc.samples > 0 {
		n := float64(tc.samples)
		r.Targets = &benchTargets{Samples: tc.samples, InstancesPerSample: float64(tc.instances) / n, BytesPerSample: float64(tc.bytes) / n,
			ImageBytesPerSample: float64(tc.pixels) / n, Share: float64(tc.bytes) / float64(tc.bytes+tc.pixels)}
	}
	if ix != nil {
		s := ix.Stats()
		r.Index = benchIndex{Files: s.Entries, Bytes: s.Bytes, Evicted: s.Evicted}
		if s.Entries > 0 {
			r.Index.BytesPerFile = float64(s.Bytes) / float64(s.Entries)
		}
	}
	if cc != nil {
		s := cc.Stats()
		r.Coefs = benchIndex{Files: s.Entries, Bytes: s.Bytes}
		r.Transcodes = benchTranscodes{Files: s.TranscodedFiles, Bytes: s.TranscodedBytes, Hits: s.TranscodeHits, Fallbacks: s.TranscodeFallbacks}
		if s.Entries > 0 {
			r.Coefs.BytesPerFile = float64(s.Bytes) / float64(s.Entries)
		}
	}
	return r
}

// benchOneEpoch runs epoch e (1-based) of benchPipeline.
func benchOneEpoch(ex *pipeline.Executor, ix *index.Index, cc *codec.CoefCache, ds dataset.Dataset, fset *dataset.FieldSet, tc *targetCount, t *transformpkg.Transform, batch, e int, bufs *[2]pipeline.Batch) benchEpoch {
	n := ds.Len()
	// The server's order of the epoch (the global shuffle's, seed 0): a
	// multi-image op's partners are drawn from windows of it.
	perm := det.EpochPermutation(uint64(n), 0, uint64(e-1))
	order := make([]int, n)
	for i := range order {
		order[i] = int(perm.At(uint64(i)))
	}
	nb := (n + batch - 1) / batch
	var s0 index.Stats
	if ix != nil {
		s0 = ix.Stats()
	}
	var c0 codec.CoefStats
	if cc != nil {
		c0 = cc.Stats()
	}
	var next atomic.Int64
	var images, errs atomic.Int64
	start, cpu0 := time.Now(), cpu.ProcessTime()
	var wg sync.WaitGroup
	for g := range bufs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := &bufs[g]
			for {
				k := int(next.Add(1) - 1)
				if k >= nb {
					return
				}
				idx := make([]int64, 0, batch)
				for _, i := range order[k*batch : min((k+1)*batch, n)] {
					idx = append(idx, int64(i))
				}
				ex.Fill(context.Background(), ds, t, 0, uint64(e-1), idx, pipeline.PadFromBatch, b)
				images.Add(int64(len(b.Indices)))
				errs.Add(int64(len(b.Errors)))
				if fset != nil {
					tc.add(b)
				}
			}
		}()
	}
	wg.Wait()
	ep := benchEpoch{Epoch: e}
	ep.add(benchPart{Images: images.Load(), Errors: errs.Load(), Seconds: time.Since(start).Seconds(), CPUSeconds: (cpu.ProcessTime() - cpu0).Seconds()})
	if ix != nil {
		s := ix.Stats()
		if l := (s.Hits - s0.Hits) + (s.Misses - s0.Misses); l > 0 {
			ep.HitRate = float64(s.Hits-s0.Hits) / float64(l)
		}
		if m := s.MCUsTotal - s0.MCUsTotal; m > 0 {
			ep.MCUsDecoded = float64(s.MCUsDecoded-s0.MCUsDecoded) / float64(m)
		}
	}
	if cc != nil {
		s := cc.Stats()
		if m := s.MCUsWanted - c0.MCUsWanted; m > 0 {
			ep.CoefHitRate = float64(s.MCUsHit-c0.MCUsHit) / float64(m)
		}
	}
	return ep
}

// targetCount sums the targets of the batches measured (benchTargets).
type targetCount struct {
	mu                                sync.Mutex
	samples, instances, bytes, pixels int64
}

// add counts b's samples that have their targets: the targets' bytes and
// instances (the encoding's K, at byte 16) and the pixels' bytes.
func (c *targetCount) add(b *pipeline.Batch) {
	var samples, instances, bytes int64
	for _, f := range b.Fields {
		if !f.Has || len(f.Data) < 24 {
			continue
		}
		samples++
		bytes += int64(len(f.Data))
		instances += int64(binary.LittleEndian.Uint32(f.Data[16:]))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples += samples
	c.instances += instances
	c.bytes += bytes
	c.pixels += samples * int64(len(b.Data)/max(len(b.Indices), 1))
}

// benchTransform is the preset name, or spec (a TransformSpec as JSON)
// where given, bounded as a job on ds is (the annotations' largest image,
// where they list every one).
func benchTransform(name, spec string, ds dataset.Dataset) (*transformpkg.Transform, error) {
	if spec == "" {
		return transformpkg.ParseTransform(name, transformpkg.CHW)
	}
	var ts stokerv1.TransformSpec
	if err := protojson.Unmarshal([]byte(spec), &ts); err != nil {
		return nil, fmt.Errorf("bench pipeline --spec: %v", err)
	}
	var w, h int
	if b, ok := ds.(interface{ ImageBound() (int, int) }); ok {
		w, h = b.ImageBound()
	}
	return opspec.TransformData(&ts, transformpkg.CHW, w, h)
}
