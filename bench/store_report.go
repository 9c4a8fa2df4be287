package bench

// `stoker bench store`: its report, and the stand-in for testing.T that
// lets it start internal/storetest's S3 server.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// storeReport is the benchmark's result.
type storeReport struct {
	Dataset   string        `json:"dataset"`
	Synthetic bool          `json:"synthetic"`
	Layout    string        `json:"layout"`
	Shuffle   string        `json:"shuffle"`
	Window    int           `json:"window,omitempty"`
	Transform string        `json:"transform"`
	BatchSize int           `json:"batch_size"`
	Workers   int           `json:"workers"`
	Epochs    int           `json:"epochs_per_run"`
	Rounds    int           `json:"rounds"`
	Latency   string        `json:"latency"`
	CPUs      int           `json:"cpus"`
	Pinned    string        `json:"pinned,omitempty"`
	Configs   []storeConfig `json:"configs"`
	Fields    []string      `json:"fields,omitempty"`
	Peers     int           `json:"peers,omitempty"`
	// Rows: per configuration and epoch, medians over the rounds.
	Rows []storeRow `json:"rows"`
	// Ratios: the targets, each from the medians.
	Ratios *storeRatios `json:"ratios,omitempty"`
	// FieldRatios: with --fields, the fields' targets instead.
	FieldRatios *fieldRatios `json:"field_ratios,omitempty"`
	Runs        []storeRun   `json:"runs"`
}

// storeRun is one configuration's run in one round.
type storeRun struct {
	Config string       `json:"config"`
	Round  int          `json:"round"`
	Epochs []storeEpoch `json:"epochs"`
}

// storeEpoch is one measured epoch: what the trainer got, and what the
// server spent on it (CPU seconds) and asked of the store.
type storeEpoch struct {
	Images       int64   `json:"images"`
	SampleErrors int64   `json:"sample_errors"`
	Seconds      float64 `json:"seconds"`
	CPU          float64 `json:"server_cpu_s"` // the server the trainer reads: with peers, their coordinator
	PeerCPU      float64 `json:"peer_cpu_s,omitempty"`
	// CPUTicks is CPU as /proc/PID/stat counts it, in 10 ms ticks (CPU
	// is the threads' nanoseconds): a check on CPU, which misses a thread
	// gone during the epoch.
	CPUTicks        float64 `json:"server_cpu_ticks_s"`
	GETs            float64 `json:"gets"`
	Bytes           float64 `json:"bytes"`
	ReadAheadWaited float64 `json:"read_ahead_waited"`
	ReadAheadMissed float64 `json:"read_ahead_missed"`
}

func (e storeEpoch) imagesPerSec() float64    { return float64(e.Images) / e.Seconds }
func (e storeEpoch) cpuPerImage() float64     { return e.CPU / float64(e.Images) }
func (e storeEpoch) getsPerImage() float64    { return e.GETs / float64(e.Images) }
func (e storeEpoch) peerCPUPerImage() float64 { return e.PeerCPU / float64(e.Images) }

// storeRow is one configuration's epoch, medians over the rounds.
type storeRow struct {
	Config        string  `json:"config"`
	Epoch         int     `json:"epoch"`
	ImagesPerSec  float64 `json:"images_per_sec"`
	CPUMsPerImage float64 `json:"server_cpu_ms_per_image"`
	GETsPerImage  float64 `json:"gets_per_image"`
	KBPerImage    float64 `json:"kb_read_per_image"`
	// ReadAheadMissed: reads that found nothing read ahead and went to
	// the store themselves (median count).
	ReadAheadMissed float64 `json:"read_ahead_missed"`
	// PeerCPUMsPerImage: with peers, theirs (summed) per image.
	PeerCPUMsPerImage float64 `json:"peer_cpu_ms_per_image,omitempty"`
}

// storeRatios are the figures the object-storage targets are stated in.
type storeRatios struct {
	// CPUBucketOverLocal: server CPU per image reading the bucket over
	// reading local disk, epoch 1 (target <= 1.10).
	CPUBucketOverLocal float64 `json:"cpu_bucket_over_local_epoch1"`
	// LatencyOverNone: images/s with the added latency over without, per
	// epoch (target >= 0.9).
	LatencyOverNone []float64 `json:"images_latency_over_none"`
	// GETsPerImageEpoch1: the bucket's requests per image in epoch 1
	// (target with the block shuffle <= 1/8).
	GETsPerImageEpoch1 float64 `json:"gets_per_image_epoch1"`
	// GETsLaterEpochs: the bucket's requests in epochs after the first
	// (target 0 for a dataset that fits the cache).
	GETsLaterEpochs float64 `json:"gets_later_epochs"`
}

// summarize fills Rows and Ratios from Runs.
func (r *storeReport) summarize() {
	cell := func(config string, epoch int, f func(storeEpoch) float64) float64 {
		var xs []float64
		for _, run := range r.Runs {
			if run.Config == config && epoch < len(run.Epochs) {
				xs = append(xs, f(run.Epochs[epoch]))
			}
		}
		return median(xs)
	}
	for _, c := range r.Configs {
		for e := range r.Epochs {
			r.Rows = append(r.Rows, storeRow{
				Config: c.Name, Epoch: e + 1,
				ImagesPerSec:      cell(c.Name, e, storeEpoch.imagesPerSec),
				CPUMsPerImage:     cell(c.Name, e, storeEpoch.cpuPerImage) * 1e3,
				GETsPerImage:      cell(c.Name, e, storeEpoch.getsPerImage),
				KBPerImage:        cell(c.Name, e, func(x storeEpoch) float64 { return x.Bytes / float64(x.Images) / 1e3 }),
				ReadAheadMissed:   cell(c.Name, e, func(x storeEpoch) float64 { return x.ReadAheadMissed }),
				PeerCPUMsPerImage: cell(c.Name, e, storeEpoch.peerCPUPerImage) * 1e3,
			})
		}
	}
	if r.Fields != nil {
		r.FieldRatios = r.fieldRatios(cell)
		return
	}
	r.Ratios = &storeRatios{}
	local, bucket, slow := r.Configs[0].Name, r.Configs[1].Name, r.Configs[2].Name
	r.Ratios.CPUBucketOverLocal = cell(bucket, 0, storeEpoch.cpuPerImage) / cell(local, 0, storeEpoch.cpuPerImage)
	for e := range r.Epochs {
		r.Ratios.LatencyOverNone = append(r.Ratios.LatencyOverNone,
			cell(slow, e, storeEpoch.imagesPerSec)/cell(bucket, e, storeEpoch.imagesPerSec))
	}
	r.Ratios.GETsPerImageEpoch1 = cell(bucket, 0, storeEpoch.getsPerImage)
	for e := 1; e < r.Epochs; e++ {
		r.Ratios.GETsLaterEpochs += cell(bucket, e, func(x storeEpoch) float64 { return x.GETs })
	}
}

func (r *storeReport) print(w io.Writer) {
	fmt.Fprintf(w, "bench store: %s (%s, shuffle %s), batch %d, %d decode goroutines, %d rounds (medians), %d CPUs\n",
		r.Dataset, r.Layout, r.Shuffle, r.BatchSize, r.Workers, r.Rounds, r.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tepoch\timages/s\tserver CPU ms/image\tpeers' CPU ms/image\tGETs/image\tKB read/image\treads not read ahead\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.3f\t%.3f\t%.3f\t%.1f\t%.0f\t\n", row.Config, row.Epoch, row.ImagesPerSec,
			row.CPUMsPerImage, row.PeerCPUMsPerImage, row.GETsPerImage, row.KBPerImage, row.ReadAheadMissed)
	}
	tw.Flush()
	if r.FieldRatios != nil {
		r.FieldRatios.print(w, r)
		return
	}
	x := r.Ratios
	fmt.Fprintf(w, "server CPU per image, bucket over local disk, epoch 1: %.2fx (target <= 1.10)\n", x.CPUBucketOverLocal)
	for e, v := range x.LatencyOverNone {
		fmt.Fprintf(w, "images/s with +%s over without, epoch %d: %.2f (target >= 0.9)\n", r.Latency, e+1, v)
	}
	fmt.Fprintf(w, "GETs per image from the bucket, epoch 1: %.3f (1 per %.1f images)\n", x.GETsPerImageEpoch1, 1/x.GETsPerImageEpoch1)
	if r.Epochs > 1 {
		fmt.Fprintf(w, "GETs from the bucket in epochs 2..%d: %.0f (0 when the dataset fits the cache)\n", r.Epochs, x.GETsLaterEpochs)
	}
}

// benchT is what internal/storetest asks of its caller, outside a test: a
// Fatal ends the benchmark with its message (close recovers it), and the
// cleanups run at the end, last first.
type benchT struct {
	ctx      context.Context
	cleanups []func()
	failed   bool
}

// benchFatal is a Fatal's message on its way to close.
type benchFatal struct{ msg string }

func newBenchT(ctx context.Context) *benchT { return &benchT{ctx: ctx} }

func (t *benchT) Helper()                           {}
func (t *benchT) Fatal(args ...any)                 { panic(benchFatal{fmt.Sprint(args...)}) }
func (t *benchT) Fatalf(format string, args ...any) { panic(benchFatal{fmt.Sprintf(format, args...)}) }
func (t *benchT) Error(args ...any)                 { t.failed = true; fmt.Fprintln(os.Stderr, args...) }
func (t *benchT) Errorf(format string, args ...any) {
	t.failed = true
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
func (t *benchT) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (t *benchT) Cleanup(f func())                { t.cleanups = append(t.cleanups, f) }
func (t *benchT) Failed() bool                    { return t.failed }
func (t *benchT) Context() context.Context        { return t.ctx }

// close runs the cleanups and turns a Fatal into *err. Defer it directly
// (it recovers).
func (t *benchT) close(err *error) {
	r := recover()
	t.failed = t.failed || r != nil || *err != nil
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	if f, ok := r.(benchFatal); ok {
		*err = errors.New(f.msg)
	} else if r != nil {
		panic(r)
	}
}
