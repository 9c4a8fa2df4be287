package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"

	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/transform"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// runPreview writes a grid of augmented samples with their labels, so a user
// sees what the model will see.
func runPreview(args []string) error {
	fs := flag.NewFlagSet("preview", flag.ExitOnError)
	data := fs.String("data", "", "the dataset: an ImageFolder or WebDataset directory, or an s3://, gs:// or azblob:// prefix (required)")
	preset := fs.String("transform", "imagenet-train", "transform preset")
	seed := fs.Uint64("seed", 0, "seed of the per-sample RNG")
	epoch := fs.Uint64("epoch", 0, "epoch of the per-sample RNG")
	n := fs.Int("n", 16, "number of samples")
	out := fs.String("o", "preview.png", "output PNG")
	ann := fs.String("annotations", "", "a COCO annotations file or a YOLO data.yaml for --data's images (as serve's --annotations): each sample's boxes, masks and keypoints drawn on it")
	masks := fs.Bool("masks", true, "with --annotations: draw the instances' masks (COCO segmentations, YOLO polygons)")
	fs.Usage = helptext.Usage(fs, helptext.Head("preview", "--data PATH [--annotations FILE] [flags]", "Draws a grid of augmented samples as the model will see them, with their labels, or with --annotations their boxes, masks and keypoints."))
	fs.Parse(args)
	if *data == "" {
		return errors.New("preview: --data is required")
	}
	if *n < 1 {
		return fmt.Errorf("preview: -n %d: want at least 1 sample", *n)
	}
	var ds dataset.Dataset
	var err error
	if *ann != "" {
		ds, err = dataset.OpenAnnotatedSource(cmdContext(), *data, *ann)
	} else {
		ds, err = dataset.OpenSource(cmdContext(), *data)
	}
	if err != nil {
		if *ann == "" {
			err = fmt.Errorf("%w (a COCO or YOLO dataset: give --data its images' directory and --annotations its instances JSON or data.yaml)", err)
		}
		return err
	}
	defer ds.Close()
	t, err := transform.ParseTransform(*preset, transform.HWC)
	if err != nil {
		return err
	}
	var fset *dataset.FieldSet
	if *ann != "" {
		if fset, err = dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 64<<20, "preview"); err != nil {
			return err
		}
		if *masks {
			fset.SetMasks(64 << 20)
		}
	}
	*n = min(*n, ds.Len())
	// Spread the samples over the dataset so several classes show.
	idx := make([]int64, *n)
	for i := range idx {
		idx[i] = int64(i * ds.Len() / *n)
	}
	ex := pipeline.NewExecutor(4)
	defer ex.Close()
	var b pipeline.Batch
	b.FieldSet = fset
	if err := ex.Fill(cmdContext(), ds, t, *seed, *epoch, idx, pipeline.PadFromBatch, &b); err != nil {
		return err
	}
	if fset != nil && *masks && b.N == 0 && len(b.Errors) > 0 && strings.Contains(b.Errors[0].Reason, "masks") {
		// The ops cannot move masks (the YOLO family's carry ultralytics'
		// overlap mask instead): the boxes and keypoints alone.
		fmt.Fprintf(os.Stderr, "preview: drawing without masks: %s\n", b.Errors[0].Reason)
		if fset, err = dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 64<<20, "preview"); err != nil {
			return err
		}
		b = pipeline.Batch{FieldSet: fset}
		if err := ex.Fill(cmdContext(), ds, t, *seed, *epoch, idx, pipeline.PadFromBatch, &b); err != nil {
			return err
		}
	}
	for _, e := range b.Errors {
		fmt.Fprintf(os.Stderr, "preview: sample %d (%s): %s\n", e.Index, e.Name, e.Reason)
	}
	if b.N == 0 {
		return fmt.Errorf("preview: none of the %d samples could be made (each is named above): nothing to draw", len(idx))
	}
	// A cell per sample: its views side by side.
	l := t.ViewLayout()
	w, h := -2, 0
	for v := range t.Views() {
		vh, vw := t.View(v).Size()
		w, h = w+vw+2, max(h, vh)
	}
	const label = 16
	cols := int(math.Ceil(math.Sqrt(float64(b.N))))
	rows := (b.N + cols - 1) / cols
	grid := image.NewRGBA(image.Rect(0, 0, cols*(w+4), rows*(h+label+4)))
	draw.Draw(grid, grid.Bounds(), image.NewUniform(color.RGBA{32, 32, 32, 255}), image.Point{}, draw.Src)
	classes := ds.Classes()
	for i := 0; i < b.N; i++ {
		x0, y0 := (i%cols)*(w+4)+2, (i/cols)*(h+label+4)+2
		vx := x0
		for v := range t.Views() {
			vh, vw := t.View(v).Size()
			px := b.Data[l.Offset(b.N, v, i):][:l.Bytes(v)]
			stride, sh, sw := vw, vh, vw
			if t.View(v).Varies() { // its own size, at the top left of the bound (the slot's trailer)
				tr := px[len(px)-transform.SizeTrailer:]
				sh, sw = min(int(binary.LittleEndian.Uint32(tr)), vh), min(int(binary.LittleEndian.Uint32(tr[4:])), vw)
			}
			for y := 0; y < sh; y++ {
				for x := 0; x < sw; x++ {
					o := 3 * (y*stride + x)
					grid.SetRGBA(vx+x, y0+y, color.RGBA{px[o], px[o+1], px[o+2], 255})
				}
			}
			vx += vw + 2
		}
		name := fmt.Sprint(b.Labels[i])
		if b.Labels[i] >= 0 && int(b.Labels[i]) < len(classes) {
			name = fmt.Sprintf("%d %s", b.Labels[i], classes[b.Labels[i]])
		}
		if fset != nil {
			tg, err := parseTargets(b.SampleFields(i)[fset.TargetsAt()].Data)
			if err != nil {
				return err
			}
			drawTargets(grid, x0, y0, tg)
			name = fmt.Sprintf("%s: %d objects", ds.Name(int(b.Indices[i])), len(tg.boxes))
		}
		d := font.Drawer{Dst: grid, Src: image.White, Face: basicfont.Face7x13,
			Dot: fixed.P(x0+2, y0+h+label-4)}
		d.DrawString(name)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := png.Encode(f, grid); err != nil {
		f.Close()
		return err
	}
	fmt.Printf("wrote %s: %d samples of %s, %s, seed %d epoch %d\n", *out, b.N, *data, t, *seed, *epoch)
	return f.Close()
}
