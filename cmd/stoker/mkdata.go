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
	n := fs.Int("n", 2000, "number of images (with --coco: 200 unless given)")
	classes := fs.Int("classes", 10, "number of classes")
	fs.Usage = helptext.Usage(fs, helptext.Head("mkdata", "--out DIR [flags]", "Writes a synthetic dataset: an ImageFolder of generated JPEGs, or with --coco a detection set of shapes pasted on backgrounds with their COCO (and --yolo, YOLO) annotations."))
	seed := fs.Uint64("seed", 1, "seed")
	coco := fs.Bool("coco", false, "write a detection set instead: shapes pasted on backgrounds, with exact polygons, boxes and keypoints (stars' tips) and a crowd every fifth image, as DIR/images/train/*.jpg and a COCO instances file DIR/annotations/instances.json")
	yolo := fs.Bool("yolo", false, "with --coco: the YOLO layout too (DIR/labels/train/*.txt, a polygon a line, and DIR/data.yaml)")
	backgrounds := fs.String("backgrounds", "", "with --coco: crop backgrounds from the JPEGs under this directory (testdata/photos, say); default: generated ones")
	maxSide := fs.Int("max-side", 0, "with --coco: each image's longer side in pixels, the shorter 0.6-0.9 of it, a quarter of the images portrait (640: COCO's sizes; backgrounds scaled up to cover); 0: 320-480 a side")
	instances := fs.Int("instances", 0, "with --coco: the mean number of shapes an image, 1 to 2N-1 (7: COCO's density), most of them small (radii log-uniform from 8 px to half the shorter side); 0: 1 to 6 of 12 px and more")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *coco {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "n" })
		if !given {
			*n = 200 // a detection image costs more to make: seconds, not minutes
		}
		if *out == "" || *n <= 0 || fs.NArg() > 0 {
			return usageError{errors.New("usage: stoker mkdata --coco --out DIR [--n 2000] [--yolo] [--backgrounds DIR] [--max-side 640] [--instances 7]")}
		}
		set, err := bench.WriteDetectionSetSized(cmdContext(), *out, *n, *seed, *yolo, *backgrounds, bench.DetectionSize{MaxSide: *maxSide, Instances: *instances})
		if err != nil {
			return err
		}
		fmt.Printf("wrote %s with %s to %s; serve it with --dataset NAME=%s --annotations NAME=%s\n", count(set.NumImages, "image"),
			count(set.NumAnns, "annotation"), *out, set.Images, set.Annotations)
		return nil
	}
	if *yolo || *backgrounds != "" || *maxSide != 0 || *instances != 0 {
		return usageError{errors.New("--yolo, --backgrounds, --max-side and --instances go with --coco")}
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
