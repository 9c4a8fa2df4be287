package main

// Synthetic data sets for the benchmarks (scale, load, backpressure) and
// stoker mkdata.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
)

// syntheticData writes n images for bench NAME into a new temporary folder
// (the caller removes it).
func syntheticData(ctx context.Context, name string, n int) (string, error) {
	dir, err := os.MkdirTemp("", "stoker-"+name+"-data-")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "bench %s: writing %d synthetic images to %s\n", name, n, dir)
	if err := writeSyntheticSet(ctx, dir, n, 10, 1); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// writeSyntheticSet writes n images as stoker mkdata does, on every core.
func writeSyntheticSet(ctx context.Context, dir string, n, classes int, seed uint64) error {
	jobs := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := writeSynthetic(dir, i, i%classes, seed); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
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
