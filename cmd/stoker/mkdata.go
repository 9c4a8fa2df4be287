package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/internal/progress"
)

// runMkdata writes a synthetic ImageFolder: photo-sized JPEGs whose class is
// visible (each class has its own palette and pattern) so the demo has data
// to train on without downloading any.
func runMkdata(args []string) error {
	fs := flag.NewFlagSet("mkdata", flag.ExitOnError)
	out := fs.String("out", "", "directory to create (required)")
	n := fs.Int("n", 2000, "number of images")
	classes := fs.Int("classes", 10, "number of classes")
	fs.Usage = helptext.Usage(fs, "")
	seed := fs.Uint64("seed", 1, "seed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || *n <= 0 || *classes <= 0 || fs.NArg() > 0 {
		return usageError{errors.New("usage: stoker mkdata --out DIR [--n 2000] [--classes 10]")}
	}
	// Progress on stderr (a line rewritten on a terminal): 2000 images
	// take a while on a small machine.
	pr := progress.New(os.Stderr, "stoker mkdata")
	if err := bench.WriteSyntheticSetProgress(cmdContext(), *out, *n, *classes, *seed, pr); err != nil {
		return err
	}
	fmt.Printf("wrote %s in %s to %s\n", count(*n, "image"), count(*classes, "class"), *out)
	return nil
}
