package bench

import (
	"context"
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
	"github.com/stoker-dev/stoker/pipeline"
)

func runBench(args []string) error {
	if len(args) == 0 || args[0] != "pipeline" {
		return errors.New("usage: stoker bench pipeline --data DIR [--threads N] [--transform NAME] [--seconds S] [--json]")
	}
	fs := flag.NewFlagSet("bench pipeline", flag.ExitOnError)
	data := fs.String("data", "", "ImageFolder or WebDataset directory (required)")
	threads := fs.Int("threads", 1, "decode goroutines (GOMAXPROCS is threads+1: the spare P only schedules; CPU time is reported)")
	transform := fs.String("transform", "imagenet-train", "transform preset")
	seconds := fs.Float64("seconds", 10, "how long to measure, after one warm-up batch")
	batch := fs.Int("batch", 64, "samples per batch")
	reference := fs.Bool("reference", false, "force the pure-Go reference path")
	scaling := fs.String("dct-scaling", "pow2", "fast path DCT scaling: pow2, any or off")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results")
	fs.Parse(args[1:])
	if *data == "" {
		return errors.New("bench pipeline: --data is required")
	}
	sc, ok := map[string]pipeline.DCTScaling{"pow2": pipeline.ScalePow2, "any": pipeline.ScaleAny, "off": pipeline.ScaleOff}[*scaling]
	if !ok {
		return fmt.Errorf("bench pipeline: --dct-scaling %q: want pow2, any or off", *scaling)
	}
	runtime.GOMAXPROCS(max(*threads, 1))
	cpu.SpareP(*threads)
	ds, err := pipeline.Open(*data)
	if err != nil {
		return err
	}
	defer ds.Close()
	t, err := pipeline.ParseTransform(*transform, pipeline.CHW)
	if err != nil {
		return err
	}
	ex := pipeline.NewExecutor(*threads, pipeline.WithReference(*reference), pipeline.WithDCTScaling(sc))
	defer ex.Close()

	r := benchPipeline(ex, ds, t, *batch, time.Duration(*seconds*float64(time.Second)))
	r.Threads, r.Transform, r.Fast = *threads, *transform, pipeline.Fast() && !*reference
	r.Dataset = *data

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "stoker bench pipeline\t%s\n", *data)
	fmt.Fprintf(tw, "transform\t%s (fast path: %v)\n", t, r.Fast)
	fmt.Fprintf(tw, "threads\t%d\n", r.Threads)
	fmt.Fprintf(tw, "images\t%d in %.2fs (%d sample errors)\n", r.Images, r.Seconds, r.Errors)
	fmt.Fprintf(tw, "images/s\t%.1f (%.1f per thread)\n", r.ImagesPerSec, r.ImagesPerSec/float64(r.Threads))
	fmt.Fprintf(tw, "CPU\t%.2fs = %.2f cores; %.1f images per CPU-second\n", r.CPUSeconds, r.CPUSeconds/r.Seconds, r.ImagesPerCPUSec)
	tw.Flush()
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	return nil
}

type benchResult struct {
	Impl         string  `json:"impl"`
	Dataset      string  `json:"dataset"`
	Transform    string  `json:"transform"`
	Fast         bool    `json:"fast_path"`
	Threads      int     `json:"threads"`
	Images       int64   `json:"images"`
	Errors       int64   `json:"errors"`
	Seconds      float64 `json:"seconds"`
	ImagesPerSec float64 `json:"images_per_sec"`
	// CPU time of the whole process over the measured interval.
	CPUSeconds      float64 `json:"cpu_seconds"`
	ImagesPerCPUSec float64 `json:"images_per_cpu_sec"`
}

// benchPipeline makes batches over ds, two in flight so the pool never
// idles between batches, for d after one warm-up batch.
func benchPipeline(ex *pipeline.Executor, ds pipeline.Dataset, t *pipeline.Transform, batch int, d time.Duration) benchResult {
	n := ds.Len()
	var next atomic.Int64
	indices := func(k int64) []int64 {
		idx := make([]int64, batch)
		for i := range idx {
			idx[i] = (k*int64(batch) + int64(i)) % int64(n)
		}
		return idx
	}
	var warm pipeline.Batch
	ex.Fill(context.Background(), ds, t, 0, 0, indices(next.Add(1)-1), pipeline.PadFromBatch, &warm)

	var images, errs atomic.Int64
	start, cpu0 := time.Now(), cpu.ProcessTime()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b pipeline.Batch
			for time.Now().Before(deadline) {
				k := next.Add(1) - 1
				ex.Fill(context.Background(), ds, t, 0, uint64(k*int64(batch)/int64(n)), indices(k), pipeline.PadFromBatch, &b)
				images.Add(int64(len(b.Indices)))
				errs.Add(int64(len(b.Errors)))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	r := benchResult{Impl: "stoker", Images: images.Load(), Errors: errs.Load(), Seconds: el}
	r.CPUSeconds = (cpu.ProcessTime() - cpu0).Seconds()
	r.ImagesPerSec = float64(r.Images) / el
	r.ImagesPerCPUSec = float64(r.Images) / r.CPUSeconds
	return r
}
