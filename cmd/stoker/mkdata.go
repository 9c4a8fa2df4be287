package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/stoker-dev/stoker/bench"
)

// runMkdata writes a synthetic ImageFolder: photo-sized JPEGs whose class is
// visible (each class has its own palette and pattern) so the demo has data
// to train on without downloading any.
func runMkdata(args []string) error {
	fs := flag.NewFlagSet("mkdata", flag.ExitOnError)
	out := fs.String("out", "", "directory to create (required)")
	n := fs.Int("n", 2000, "number of images")
	classes := fs.Int("classes", 10, "number of classes")
	seed := fs.Uint64("seed", 1, "seed")
	fs.Parse(args)
	if *out == "" || *n <= 0 || *classes <= 0 {
		return errors.New("usage: stoker mkdata --out DIR [--n 2000] [--classes 10]")
	}
	if err := bench.WriteSyntheticSet(context.Background(), *out, *n, *classes, *seed); err != nil {
		return err
	}
	fmt.Printf("wrote %d images in %d classes to %s\n", *n, *classes, *out)
	return nil
}
