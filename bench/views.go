package bench

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"

	"github.com/stoker-dev/stoker/internal/cpu"
	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	transformpkg "github.com/stoker-dev/stoker/pipeline/transform"
	"github.com/stoker-dev/stoker/server"
)

// runViews is `stoker bench views`: the CPU a sample of several views costs
// made once (every view from one decode) against its views made as
// separate one-view jobs (each decoding the image again), in interleaved
// rounds on the same executor settings, so the machine's noise lands on
// both alike.
func runViews(args []string) error {
	fs := flag.NewFlagSet("bench views", flag.ExitOnError)
	fs.Usage = helptext.Usage(fs, helptext.Head("bench views", "[flags]", "Measures the CPU a sample of several views costs made once (every view from one decode) against its views made as separate one-view jobs, in interleaved rounds."))
	data := fs.String("data", "", "ImageFolder or WebDataset directory (required)")
	transform := fs.String("transform", "dinov2", "a preset of several views (simclr, dino, dinov2)")
	threads := fs.Int("threads", 1, "decode goroutines")
	rounds := fs.Int("rounds", 3, "rounds, each the views job then each separate job; medians are reported")
	epochs := fs.Int("epochs", 2, "epochs of each job in each round; the figures are the epochs after the first")
	batch := fs.Int("batch", 64, "samples per batch")
	coefBudget := fs.Int64("coef-budget", 0, "memory for the coefficient cache (as stoker serve's --coef-budget); 0: serve's default here; -1: none (every decode entropy-decodes: a dataset larger than the cache)")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results")
	fs.Parse(args)
	if *data == "" {
		return errors.New("bench views: --data is required")
	}
	if *epochs < 2 {
		return errors.New("bench views: --epochs must be at least 2 (the first warms the caches)")
	}
	runtime.GOMAXPROCS(max(*threads, 1))
	cpu.SpareP(*threads)
	ds, err := dataset.Open(*data)
	if err != nil {
		return err
	}
	defer ds.Close()
	t, err := transformpkg.ParseTransform(*transform, transformpkg.CHW)
	if err != nil {
		return err
	}
	if t.Views() < 2 {
		return fmt.Errorf("bench views: --transform %s makes one view", *transform)
	}
	// The separate jobs: each distinct view transform once, weighed by how
	// many views it makes (a group's views cost alike: only their keys
	// differ).
	var parts []*transformpkg.Transform
	var counts []int
	for v := range t.Views() {
		if i := slices.Index(parts, t.View(v)); i >= 0 {
			counts[i]++
			continue
		}
		parts, counts = append(parts, t.View(v)), append(counts, 1)
	}
	run := func(tr *transformpkg.Transform) float64 {
		opts := []pipeline.Option{pipeline.WithIndex(index.New(1 << 30))}
		var cc *codec.CoefCache
		if *coefBudget >= 0 {
			if *coefBudget == 0 {
				*coefBudget = server.DefaultCoefBudget(*threads)
			}
			cc = codec.NewCoefCache(*coefBudget)
			defer cc.Close()
			opts = append(opts, pipeline.WithCoefCache(cc))
		}
		ex := pipeline.NewExecutor(*threads, opts...)
		defer ex.Close()
		r := benchPipeline(ex, nil, cc, ds, nil, tr, *batch, *epochs, 0)
		return r.Later.CPUSeconds / float64(r.Later.Images) // CPU seconds per sample
	}
	var res viewsResult
	res.Transform, res.Views, res.Threads, res.Dataset = *transform, t.Views(), *threads, *data
	res.CoefCache = *coefBudget >= 0
	var together, separate []float64
	for range *rounds {
		together = append(together, run(t))
		sum := 0.0
		for i, p := range parts {
			sum += float64(counts[i]) * run(p)
		}
		separate = append(separate, sum)
	}
	res.TogetherMs, res.SeparateMs = 1e3*median(together), 1e3*median(separate)
	res.Ratio = res.TogetherMs / res.SeparateMs
	res.PerViewRatio = res.TogetherMs / (res.SeparateMs / float64(t.Views()))
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "stoker bench views\t%s (%d samples), %d threads, %d rounds, epochs >= 2, coefficient cache %v\n", *data, ds.Len(), *threads, *rounds, res.CoefCache)
	fmt.Fprintf(tw, "transform\t%s\n", t)
	fmt.Fprintf(tw, "one job of %d views\t%.2f ms CPU per sample\n", t.Views(), res.TogetherMs)
	fmt.Fprintf(tw, "%d one-view jobs\t%.2f ms CPU per sample (all views)\n", t.Views(), res.SeparateMs)
	fmt.Fprintf(tw, "ratio\t%.2fx the separate jobs; %.2fx one view's job\n", res.Ratio, res.PerViewRatio)
	tw.Flush()
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	return nil
}

// viewsResult is `stoker bench views --json`'s line.
type viewsResult struct {
	Dataset    string  `json:"dataset"`
	Transform  string  `json:"transform"`
	Views      int     `json:"views"`
	Threads    int     `json:"threads"`
	CoefCache  bool    `json:"coef_cache"`
	TogetherMs float64 `json:"together_ms_per_sample"`
	SeparateMs float64 `json:"separate_ms_per_sample"`
	// Ratio is together over separate; PerViewRatio together over one
	// view's job (separate / views).
	Ratio        float64 `json:"ratio"`
	PerViewRatio float64 `json:"per_view_ratio"`
}
