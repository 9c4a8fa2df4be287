package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

// The synthetic detection set of `stoker mkdata --coco`: shapes pasted on
// backgrounds, each with its exact polygon (the mask is what
// pycocotools rasterizes of it, and exactly the pixels painted), its box
// (the polygon's extent, as COCO's), its area (the mask's pixels) and, for
// stars, keypoints at the tips. Shapes never overlap, so each mask is the
// shape's visible pixels. Every fifth image also has a crowd: a cluster of
// small discs as one run-length mask (iscrowd 1).

// detCategories have ids with gaps, as COCO's, so that the mapping to
// contiguous labels matters.
var detCategories = []annot.Category{
	{ID: 1, Name: "disc", Supercategory: "shape"},
	{ID: 2, Name: "triangle", Supercategory: "shape"},
	{ID: 4, Name: "square", Supercategory: "shape"},
	{ID: 7, Name: "star", Supercategory: "shape", Keypoints: []string{"tip1", "tip2", "tip3", "tip4", "tip5"}, Skeleton: [][]int{{1, 3}, {3, 5}, {5, 2}, {2, 4}, {4, 1}}},
	{ID: 9, Name: "hexagon", Supercategory: "shape"},
}

type detAnn struct {
	ID           int64      `json:"id"`
	ImageID      int64      `json:"image_id"`
	CategoryID   int64      `json:"category_id"`
	BBox         [4]float64 `json:"bbox"`
	Area         float64    `json:"area"`
	IsCrowd      int        `json:"iscrowd"`
	Segmentation any        `json:"segmentation"`
	Keypoints    []float64  `json:"keypoints,omitempty"`
	NumKeypoints *int       `json:"num_keypoints,omitempty"`
	yolo         []float64  // the polygon, for the YOLO labels
	label        int        // the contiguous label
}

// DetectionSet says where WriteDetectionSet writes.
type DetectionSet struct {
	Images      string // DIR/images/train: the JPEGs
	Annotations string // DIR/annotations/instances.json
	YAML        string // DIR/data.yaml, with YOLO labels in DIR/labels/train ("" without)
	NumImages   int
	NumAnns     int
}

// WriteDetectionSet writes n images with their annotations under dir:
// images/train/NNNNNN.jpg, annotations/instances.json (COCO) and, with
// yolo, labels/train/NNNNNN.txt and data.yaml (the YOLO layout, polygons
// as segment lines). Backgrounds are generated, or crops of the JPEGs
// found under backgrounds (a directory; "" for none).
func WriteDetectionSet(ctx context.Context, dir string, n int, seed uint64, yolo bool, backgrounds string) (*DetectionSet, error) {
	return WriteDetectionSetSized(ctx, dir, n, seed, yolo, backgrounds, DetectionSize{})
}

// DetectionSize is the images' size and instance density of a detection
// set; the zero value is mkdata --coco's default (320 to 480 a side, 1 to 6
// shapes an image, 3.5 on average).
type DetectionSize struct {
	// MaxSide is each image's longer side (0: the default sizes); the
	// shorter is 0.6 to 0.9 of it, a quarter of the images portrait, as
	// COCO's (640 a side: 640x480 and 640x427 the most common).
	MaxSide int
	// Instances is the mean number of shapes an image (0: the default),
	// drawn uniformly from 1 to 2*Instances-1 (as many as fit without
	// overlapping), their radii log-uniform from 8 px to half the
	// shorter side, so that most are small, as COCO's (7.3 an image, 41%
	// under 32x32 px and 24% over 96x96; these: about 46% and 15%).
	Instances int
}

// WriteDetectionSetSized is WriteDetectionSet at size sz.
func WriteDetectionSetSized(ctx context.Context, dir string, n int, seed uint64, yolo bool, backgrounds string, sz DetectionSize) (*DetectionSet, error) {
	if sz.MaxSide < 0 || sz.MaxSide > 8192 || sz.Instances < 0 || sz.Instances > 100 {
		return nil, fmt.Errorf("detection set: max side %d (want 0..8192), instances %d (want 0..100)", sz.MaxSide, sz.Instances)
	}
	if sz.MaxSide > 0 && sz.MaxSide < 64 {
		return nil, fmt.Errorf("detection set: max side %d: want at least 64", sz.MaxSide)
	}
	var bgs []image.Image
	if backgrounds != "" {
		err := filepath.WalkDir(backgrounds, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(strings.ToLower(p), ".jpg") {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			im, err := jpeg.Decode(f)
			if err != nil {
				return fmt.Errorf("background %s: %v", p, err)
			}
			bgs = append(bgs, im)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(bgs) == 0 {
			return nil, fmt.Errorf("no .jpg under %s for backgrounds", backgrounds)
		}
	}
	set := &DetectionSet{Images: filepath.Join(dir, "images", "train"), Annotations: filepath.Join(dir, "annotations", "instances.json")}
	dirs := []string{set.Images, filepath.Dir(set.Annotations)}
	if yolo {
		set.YAML = filepath.Join(dir, "data.yaml")
		dirs = append(dirs, filepath.Join(dir, "labels", "train"))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	images := make([]annot.Image, n)
	anns := make([][]detAnn, n)
	jobs := make(chan int)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				im, a, err := writeDetectionImage(set, i, seed, bgs, yolo, sz)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					continue
				}
				images[i], anns[i] = im, a
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil || failed.Load() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if p := failed.Load(); p != nil {
		return nil, *p
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var all []detAnn
	for i := range anns {
		for j := range anns[i] {
			anns[i][j].ID = int64(len(all) + 1)
			all = append(all, anns[i][j])
		}
	}
	doc := map[string]any{
		"info":        map[string]any{"description": fmt.Sprintf("stoker mkdata --coco, seed %d", seed)},
		"images":      images,
		"annotations": all,
		"categories":  detCategories,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(set.Annotations, b, 0o644); err != nil {
		return nil, err
	}
	if yolo {
		var y strings.Builder
		fmt.Fprintf(&y, "# stoker mkdata --coco --yolo, seed %d\npath: .\ntrain: images/train\nval: images/train\nnames:\n", seed)
		for i, c := range detCategories {
			fmt.Fprintf(&y, "  %d: %s\n", i, c.Name)
		}
		if err := os.WriteFile(set.YAML, []byte(y.String()), 0o644); err != nil {
			return nil, err
		}
	}
	set.NumImages, set.NumAnns = n, len(all)
	return set, nil
}

// shapePolygon is the outline of a shape of category id, centred at
// (cx, cy) of radius r turned by rot; for a star, its tips too.
func shapePolygon(id int64, cx, cy, r, rot float64) (poly, tips []float64) {
	ring := func(k int, radius func(j int) float64) {
		for j := range k {
			a := rot + 2*math.Pi*float64(j)/float64(k)
			x, y := cx+radius(j)*math.Cos(a), cy+radius(j)*math.Sin(a)
			// Two decimals, as COCO's files have.
			poly = append(poly, math.Round(x*100)/100, math.Round(y*100)/100)
		}
	}
	full := func(int) float64 { return r }
	switch id {
	case 1:
		ring(24, full)
	case 2:
		ring(3, full)
	case 4:
		ring(4, full)
	case 9:
		ring(6, full)
	case 7:
		ring(10, func(j int) float64 {
			if j%2 == 0 {
				return r
			}
			return 0.45 * r
		})
		for j := 0; j < 10; j += 2 {
			tips = append(tips, poly[2*j], poly[2*j+1])
		}
	}
	return poly, tips
}

func writeDetectionImage(set *DetectionSet, i int, seed uint64, bgs []image.Image, yolo bool, sz DetectionSize) (annot.Image, []detAnn, error) {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	var w, h int
	if sz.MaxSide > 0 {
		w, h = sz.MaxSide, int(float64(sz.MaxSide)*(0.6+0.3*r.Float64()))
		if r.IntN(4) == 0 {
			w, h = h, w
		}
	} else {
		w, h = 320+r.IntN(161), 320+r.IntN(161)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	if len(bgs) > 0 && sz.MaxSide > 0 {
		scaledBackground(img, bgs[r.IntN(len(bgs))], r)
	} else if len(bgs) > 0 {
		bg := bgs[r.IntN(len(bgs))]
		b := bg.Bounds()
		ox, oy := 0, 0
		if b.Dx() > w {
			ox = r.IntN(b.Dx() - w + 1)
		}
		if b.Dy() > h {
			oy = r.IntN(b.Dy() - h + 1)
		}
		for y := range h {
			for x := range w {
				c := color.RGBAModel.Convert(bg.At(b.Min.X+(ox+x)%b.Dx(), b.Min.Y+(oy+y)%b.Dy())).(color.RGBA)
				img.SetRGBA(x, y, c)
			}
		}
	} else {
		hue := r.Float64()
		for y := range h {
			for x := range w {
				t := float64(x+y) / float64(w+h)
				cr, cg, cb := hsv(hue+0.2*t, 0.25, 0.45+0.3*t)
				noise := float64(int(r.Uint64()%13) - 6)
				img.SetRGBA(x, y, color.RGBA{clamp8(cr*255 + noise), clamp8(cg*255 + noise), clamp8(cb*255 + noise), 255})
			}
		}
	}
	im := annot.Image{ID: int64(i + 1), FileName: fmt.Sprintf("%06d.jpg", i), Width: w, Height: h}
	taken := image.NewGray(image.Rect(0, 0, w, h)) // pixels of shapes so far
	var anns []detAnn
	paint := func(m []byte, c color.RGBA, r *rand.Rand) {
		for p, v := range m {
			if v != 0 {
				noise := int(r.Uint64()%11) - 5
				img.SetRGBA(p%w, p/w, color.RGBA{clamp8(float64(int(c.R) + noise)), clamp8(float64(int(c.G) + noise)), clamp8(float64(int(c.B) + noise)), 255})
				taken.Pix[p] = 1
			}
		}
	}
	free := func(m []byte) bool {
		for p, v := range m {
			if v != 0 && taken.Pix[p] != 0 {
				return false
			}
		}
		return true
	}
	objects := 1 + r.IntN(6)
	if sz.Instances > 0 {
		objects = 1 + r.IntN(2*sz.Instances-1)
	}
	for range objects * 4 { // tries
		if len(anns) >= objects {
			break
		}
		ci := r.IntN(len(detCategories))
		cat := detCategories[ci]
		rad := 12 + r.Float64()*float64(min(w, h))/5
		if sz.Instances > 0 {
			rad = 8 * math.Pow(float64(min(w, h))/16, r.Float64())
		}
		cx := rad + 1 + r.Float64()*(float64(w)-2*rad-2)
		cy := rad + 1 + r.Float64()*(float64(h)-2*rad-2)
		poly, tips := shapePolygon(cat.ID, cx, cy, rad, r.Float64()*2*math.Pi)
		rle, err := annot.FromPolygon(poly, h, w)
		if err != nil {
			return im, nil, err
		}
		m, err := rle.Mask()
		if err != nil {
			return im, nil, err
		}
		if rle.Area() == 0 || !free(m) {
			continue
		}
		cr, cg, cb := hsv(float64(ci)/float64(len(detCategories)), 0.8, 0.9)
		paint(m, color.RGBA{clamp8(cr * 255), clamp8(cg * 255), clamp8(cb * 255), 255}, r)
		x0, y0, x1, y1 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
		for j := 0; j < len(poly); j += 2 {
			x0, x1 = min(x0, poly[j]), max(x1, poly[j])
			y0, y1 = min(y0, poly[j+1]), max(y1, poly[j+1])
		}
		a := detAnn{ImageID: im.ID, CategoryID: cat.ID, BBox: [4]float64{x0, y0, round2(x1 - x0), round2(y1 - y0)}, Area: float64(rle.Area()),
			Segmentation: [][]float64{poly}, yolo: poly, label: ci}
		if len(cat.Keypoints) > 0 {
			nk := len(tips) / 2
			a.NumKeypoints = &nk
			for j := 0; j < len(tips); j += 2 {
				a.Keypoints = append(a.Keypoints, tips[j], tips[j+1], 2)
			}
		}
		anns = append(anns, a)
	}
	if i%5 == 4 { // a crowd of small discs, as one run-length mask
		crowd := make([]byte, w*h)
		cx, cy := float64(w)*(0.2+0.6*r.Float64()), float64(h)*(0.2+0.6*r.Float64())
		for range 12 {
			poly, _ := shapePolygon(1, cx+r.NormFloat64()*25, cy+r.NormFloat64()*25, 3+4*r.Float64(), 0)
			rle, err := annot.FromPolygon(poly, h, w)
			if err != nil {
				return im, nil, err
			}
			m, _ := rle.Mask()
			for p, v := range m {
				if v != 0 && taken.Pix[p] == 0 {
					crowd[p] = 1
				}
			}
		}
		rle, err := annot.Encode(crowd, h, w)
		if err != nil {
			return im, nil, err
		}
		if rle.Area() > 0 {
			m, _ := rle.Mask()
			paint(m, color.RGBA{240, 240, 240, 255}, r)
			anns = append(anns, detAnn{ImageID: im.ID, CategoryID: 1, BBox: rle.BBox(), Area: float64(rle.Area()), IsCrowd: 1,
				Segmentation: map[string]any{"size": []int{h, w}, "counts": rle.Counts}, label: 0})
		}
	}
	f, err := os.Create(filepath.Join(set.Images, im.FileName))
	if err != nil {
		return im, nil, err
	}
	if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 90}); err != nil {
		f.Close()
		return im, nil, err
	}
	if err := f.Close(); err != nil {
		return im, nil, err
	}
	if yolo {
		var b strings.Builder
		for _, a := range anns {
			if a.IsCrowd != 0 {
				continue // ultralytics' COCO conversion leaves crowds out
			}
			fmt.Fprintf(&b, "%d", a.label)
			for j := 0; j < len(a.yolo); j += 2 {
				fmt.Fprintf(&b, " %.6f %.6f", a.yolo[j]/float64(w), a.yolo[j+1]/float64(h))
			}
			b.WriteByte('\n')
		}
		lp := annot.LabelPath(filepath.Join(set.Images, im.FileName))
		if err := os.WriteFile(lp, []byte(b.String()), 0o644); err != nil {
			return im, nil, err
		}
	}
	return im, anns, nil
}

// scaledBackground fills img with a crop of bg, scaled up (bilinear) where
// bg is smaller than img, at a random place, with sensor-like noise, so
// that the bytes per pixel are a photo's and no seam shows.
func scaledBackground(img *image.RGBA, bg image.Image, r *rand.Rand) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	b := bg.Bounds()
	s := max(1, float64(w)/float64(b.Dx()), float64(h)/float64(b.Dy()))
	sw, sh := float64(b.Dx())*s, float64(b.Dy())*s
	ox, oy := r.Float64()*(sw-float64(w)), r.Float64()*(sh-float64(h))
	at := func(x, y int) color.RGBA {
		return color.RGBAModel.Convert(bg.At(b.Min.X+min(max(x, 0), b.Dx()-1), b.Min.Y+min(max(y, 0), b.Dy()-1))).(color.RGBA)
	}
	for y := range h {
		fy := (oy+float64(y)+0.5)/s - 0.5
		y0 := int(math.Floor(fy))
		ty := fy - float64(y0)
		for x := range w {
			fx := (ox+float64(x)+0.5)/s - 0.5
			x0 := int(math.Floor(fx))
			tx := fx - float64(x0)
			c00, c10, c01, c11 := at(x0, y0), at(x0+1, y0), at(x0, y0+1), at(x0+1, y0+1)
			mix := func(a, b, c, d uint8) float64 {
				top := float64(a) + tx*(float64(b)-float64(a))
				bot := float64(c) + tx*(float64(d)-float64(c))
				return top + ty*(bot-top)
			}
			noise := float64(int(r.Uint64()%13) - 6)
			img.SetRGBA(x, y, color.RGBA{clamp8(mix(c00.R, c10.R, c01.R, c11.R) + noise), clamp8(mix(c00.G, c10.G, c01.G, c11.G) + noise),
				clamp8(mix(c00.B, c10.B, c01.B, c11.B) + noise), 255})
		}
	}
}
