package main

import (
	"flag"
	"log/slog"

	"github.com/stoker-dev/stoker/bench/making"
	"github.com/stoker-dev/stoker/internal/gpu"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/server"
)

// benchOpts are stoker serve's flags for benchmarks only: a worker of
// fixed capacity (bench/making) and a simulated GPU's idle share. They
// set server.Config's Making and GPU; the server knows nothing of
// benchmarks.
type benchOpts struct {
	replay      bool
	rate        float64
	gpuIdleFile string
}

func (b *benchOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&b.replay, "bench-replay", false, "benchmarks of delivery only: every batch carries its job's first batch's pixels (a copy instead of a decode; indices and labels are the real ones); never for training")
	fs.Float64Var(&b.rate, "bench-rate", 0, "benchmarks only: the executor makes at most this many batches per second, one after another, for all jobs and peers' leases (a part of a batch, leased by cache affinity, takes its share of a batch's time) (with --bench-replay, a worker of known capacity on any machine); 0: no limit; never for training")
	fs.StringVar(&b.gpuIdleFile, "bench-gpu-idle-file", "", "benchmarks only: read the GPU's idle share (a number in 0..1) from this file, which a simulated trainer rewrites, instead of NVML (--gpus is then ignored)")
}

func (b *benchOpts) validate() error {
	_, err := making.New(b.replay, b.rate)
	return err
}

// apply sets cfg's hooks for the flags given, and warns of each: they are
// never for training.
func (b *benchOpts) apply(cfg *server.Config, log *slog.Logger) {
	if m, _ := making.New(b.replay, b.rate); m != nil && cfg.Workers > 0 {
		cfg.Making = func(ds dataset.Dataset, batchSize int, make server.MakeFunc) server.MakeFunc {
			return server.MakeFunc(m.Wrap(ds, batchSize, making.MakeFunc(make)))
		}
		if b.replay {
			log.Warn("--bench-replay: every batch carries its job's first batch's pixels; for delivery benchmarks only")
		}
		if b.rate > 0 {
			log.Warn("--bench-rate: the executor makes at most this many batches per second, one after another; for benchmarks only", "rate", b.rate)
		}
	}
	if b.gpuIdleFile != "" {
		cfg.GPU = gpu.NewFileMonitor(b.gpuIdleFile, 0)
		log.Warn("--bench-gpu-idle-file: the GPU's idle share is read from a file a simulator writes, not from NVML; for benchmarks only",
			"file", b.gpuIdleFile)
	}
}
