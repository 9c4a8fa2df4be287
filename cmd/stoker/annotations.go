package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/dataset"
)

// runAnnotations is `stoker annotations check|masks FILE`: what stoker
// reads of a COCO annotations file, without a server: check says what is
// malformed, sample by sample; masks prints every annotation's mask as
// pycocotools would make it (what the parity tests compare).
func runAnnotations(args []string) error {
	fs := flag.NewFlagSet("annotations", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: stoker annotations check|masks ARGS

Reads annotations files as stoker serve --annotations does: checks them, or writes their masks.

       stoker annotations check FILE.json
       stoker annotations check data.yaml IMAGES_DIR
       stoker annotations masks FILE.json > masks.jsonl

check reads a COCO annotations file (instances or keypoints) as stoker serve
--annotations does and prints what it holds: images, annotations, categories,
the memory they take, and each sample whose annotations are malformed, with
the file, the annotation and the field. It exits 1 when the file is not COCO
or a sample is malformed. With a YOLO dataset YAML and the images' directory,
it reads every image's label file as serve --annotations NAME=data.yaml does.

masks prints, a line per annotation with a segmentation, in the order of the
samples (images by id) and of the file within each,
  {"id": ID, "image_id": ID, "size": [H, W], "counts": "<compressed RLE>",
   "area": A, "bbox": [x, y, w, h]}
the mask as pycocotools' annToRLE makes it (polygons rasterized and merged,
run-length masks as given), its area and box as pycocotools' area and toBbox;
or {"image_id": ID, "error": "..."} for a malformed sample.
`)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fs.Usage()
		if len(args) == 0 {
			return usageError{errors.New("annotations: want the subcommand check or masks")}
		}
		return flag.ErrHelp
	}
	if len(args) == 3 && args[0] == "check" && (strings.HasSuffix(args[1], ".yaml") || strings.HasSuffix(args[1], ".yml")) {
		return checkYOLO(args[1], args[2])
	}
	if len(args) != 2 || (args[0] != "check" && args[0] != "masks") {
		fs.Usage()
		return usageError{fmt.Errorf("annotations: want check FILE or masks FILE")}
	}
	c, err := annot.OpenCOCO(args[1])
	if err != nil {
		return err
	}
	if args[0] == "masks" {
		return annotationMasks(c)
	}
	bad := 0
	for i := range c.Len() {
		if _, err := c.Sample(i); err != nil {
			bad++
			fmt.Println(err)
		}
	}
	fmt.Printf("%s: %s, %s, %s; %d bytes in memory; %s malformed\n", args[1], count(c.Len(), "image"),
		count(c.Annotations(), "annotation"), categories(len(c.Categories())), c.Bytes(), count(bad, "sample"))
	if bad > 0 {
		return fmt.Errorf("%s malformed", count(bad, "sample"))
	}
	return nil
}

func annotationMasks(c *annot.COCO) error {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	type line struct {
		ID      int64      `json:"id"`
		ImageID int64      `json:"image_id"`
		Size    [2]int     `json:"size"`
		Counts  string     `json:"counts"`
		Area    uint32     `json:"area"`
		BBox    [4]float64 `json:"bbox"`
	}
	for i := range c.Len() {
		s, err := c.Sample(i)
		if err == nil {
			for j := range s.Instances {
				in := &s.Instances[j]
				r, ok, merr := c.Mask(&s, in)
				if merr != nil {
					err = merr
					break
				}
				if !ok {
					continue
				}
				if e := enc.Encode(line{ID: in.ID, ImageID: s.Image.ID, Size: [2]int{r.H, r.W}, Counts: r.String(), Area: r.Area(), BBox: r.BBox()}); e != nil {
					return e
				}
			}
		}
		if err != nil {
			if e := enc.Encode(map[string]any{"image_id": s.Image.ID, "error": err.Error()}); e != nil {
				return e
			}
		}
	}
	return nil
}

func categories(n int) string {
	if n == 1 {
		return "1 category"
	}
	return fmt.Sprintf("%d categories", n)
}

// checkYOLO is `stoker annotations check data.yaml DIR`.
func checkYOLO(yaml, dir string) error {
	d, err := dataset.OpenYOLO(dir, yaml)
	if err != nil {
		return err
	}
	defer d.Close()
	bad, labels := 0, 0
	for i := range d.Len() {
		ins, err := d.Labels(i)
		if err != nil {
			bad++
			fmt.Println(err)
		}
		labels += len(ins)
	}
	fmt.Printf("%s: %s, %s, %d classes; %d bytes in memory; %s malformed\n", yaml, count(d.Len(), "image"),
		count(labels, "label"), len(d.Config().Names), d.AnnotationBytes(), count(bad, "sample"))
	if bad > 0 {
		return fmt.Errorf("%s malformed", count(bad, "sample"))
	}
	return nil
}
