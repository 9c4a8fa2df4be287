package bench

// Synthetic data sets for the benchmarks (scale, load, backpressure) and
// stoker mkdata.

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stoker-dev/stoker/internal/progress"
)

// benchData is the data bench NAME reads: *data when set, else a synthetic
// set of n images written into a new temporary folder, which *data then
// names and the returned function removes.
func benchData(ctx context.Context, name string, data *string, n int) (synthetic bool, remove func(), err error) {
	if *data != "" {
		return false, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "stoker-"+name+"-data-")
	if err != nil {
		return false, nil, err
	}
	fmt.Fprintf(os.Stderr, "bench %s: writing %d synthetic images to %s\n", name, n, dir)
	if err := WriteSyntheticSetProgress(ctx, dir, n, 10, 1, progress.New(os.Stderr, "bench "+name)); err != nil {
		os.RemoveAll(dir)
		return false, nil, err
	}
	*data = dir
	return true, func() { os.RemoveAll(dir) }, nil
}

// WriteSyntheticSet writes n images as stoker mkdata does, on every core.
func WriteSyntheticSet(ctx context.Context, dir string, n, classes int, seed uint64) error {
	return WriteSyntheticSetProgress(ctx, dir, n, classes, seed, nil)
}

// WriteSyntheticSetProgress is WriteSyntheticSet reporting the images
// written to pr (nil: nowhere).
func WriteSyntheticSetProgress(ctx context.Context, dir string, n, classes int, seed uint64, pr *progress.Reporter) error {
	var written atomic.Int64
	if pr != nil {
		report := func() {
			pr.Report(progress.Update{Phase: "writing images", Unit: "images", Done: written.Load(), Total: int64(n)})
		}
		report()
		stop, ticking := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(ticking)
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					report()
				}
			}
		}()
		// The ticker stops before the last figures, so none comes after.
		defer func() { close(stop); <-ticking; report(); pr.Done() }()
	}
	jobs := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch synthScratch
			for i := range jobs {
				if err := writeSynthetic(dir, i, i%classes, seed, &scratch); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
				written.Add(1)
			}
		}()
	}
	var err error
	for i := range n {
		if err = ctx.Err(); err != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err = <-errs:
	default:
	}
	return err
}

// signalContext is cancelled by SIGINT or SIGTERM: a benchmark stops its
// servers and exits cleanly.
func signalContext() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return ctx
}
