package pipeline

import (
	"bytes"
	"image"
	_ "image/jpeg"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

func yoloPhotos(t *testing.T, n int) [][]byte {
	t.Helper()
	paths, _ := filepath.Glob("../testdata/photos/*/*.jpg")
	if len(paths) < n {
		t.Fatalf("%d photos under testdata/photos, want %d", len(paths), n)
	}
	var out [][]byte
	for _, p := range paths[:n] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// fullImage is the image decoded at its own size as the YOLO geometry
// decodes it (a load to its own long side, a letterbox to its own size:
// no resize, no padding), CHW.
func fullImage(t *testing.T, data []byte) kernels.Planes {
	t.Helper()
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	w, h := cfg.Width, cfg.Height
	tf, err := transform.NewTransform(transform.CHW, opspkg.Op{Kind: transform.OpYOLOLoadImage, Args: &transform.YOLOLoadImageArgs{ImgSz: max(w, h)}}, opspkg.Op{Kind: transform.OpYOLOLetterBox, Args: &transform.YOLOLetterBoxArgs{NewShape: [2]int{h, w}, Stride: 32, ScaleUp: true, Center: true}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, tf.SampleBytes())
	if err := NewDecoder().Decode(data, tf, det.Key{Seed: 1}, out); err != nil {
		t.Fatal(err)
	}
	return kernels.Planes{Pix: out, W: w, H: h}
}

// TestYOLOPipelineIsItsKernels: a sample of the yolo-letterbox recipe is
// its trace's kernels (pipeline/kernels/cv) run on the whole image, in
// CHW and HWC, and its trace reads back as the same steps.
func TestYOLOPipelineIsItsKernels(t *testing.T) {
	ops := letterboxRecipe(t)
	tf, err := transform.NewTransform(transform.CHW, ops...)
	if err != nil {
		t.Fatal(err)
	}
	hwc, err := transform.NewTransform(transform.HWC, ops...)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tf.Size(); h != 640 || w != 640 {
		t.Fatalf("size %dx%d, want 640x640", w, h)
	}
	dec := NewDecoder()
	defer dec.Close()
	flips, hsvs := 0, 0
	for i, data := range yoloPhotos(t, 6) {
		src := fullImage(t, data)
		k := det.Key{Seed: 7, Index: uint64(i)}
		out := make([]byte, tf.SampleBytes())
		if err := dec.Decode(data, tf, k, out); err != nil {
			t.Fatal(err)
		}
		steps, err := transform.ParseTrace(dec.AppendTrace(nil))
		if err != nil {
			t.Fatal(err)
		}
		// The kernels by hand, from the trace.
		lw, lh := cv.LoadSize(src.W, src.H, 640)
		if steps[0].Fn != fn.YOLOLoad || steps[0].I[5] != lw || steps[0].I[4] != lh {
			t.Fatalf("sample %d: step 0 %+v, want yolo_load_image to %dx%d", i, steps[0], lw, lh)
		}
		cur := src
		if lw != src.W || lh != src.H {
			cur = kernels.Planes{Pix: make([]byte, 3*lw*lh), W: lw, H: lh}
			cv.ResizeLinear(cur, src)
		}
		g := cv.LetterBoxParams(cv.LetterBoxArgs{H: 640, W: 640, Center: true, Stride: 32}, lw, lh)
		lb := kernels.Planes{Pix: make([]byte, 3*640*640), W: 640, H: 640}
		cv.LetterBoxImage(lb, cur, g, nil)
		if st := steps[1]; st.Fn != fn.YOLOLetterBox || st.I != [6]int{g.Top, g.Left, g.UnpadH, g.UnpadW, 640, 640} {
			t.Fatalf("sample %d: step 1 %+v, want the letterbox %+v", i, st, g)
		}
		st := steps[2]
		if st.Fn != fn.YOLOPerspective || st.I[0] != 0 {
			t.Fatalf("sample %d: step 2 %+v, want an affine yolo_random_perspective", i, st)
		}
		pp := fn.PerspectiveOf(&st)
		if !(pp.Scale >= 0.5 && pp.Scale < 1.5 && pp.TX >= 0.4 && pp.TX < 0.6 && pp.Angle >= -3 && pp.Angle < 3 && pp.PX == 0) {
			t.Fatalf("sample %d: drawn %+v outside the op's ranges", i, pp)
		}
		want := kernels.Planes{Pix: make([]byte, 3*640*640), W: 640, H: 640}
		cv.PerspectiveImage(want, lb, cv.PerspectiveMatrix(pp, 640, 640, 640, 640), false)
		for _, st := range steps[3:] {
			switch st.Fn {
			case fn.YOLOHSV:
				hsvs++
			case fn.YOLOFlipLR:
				flips++
			default:
				t.Fatalf("sample %d: step %s after the geometry", i, st.Fn)
			}
		}
		if err := opspkg.ApplyTrace(want.Pix, 640, 640, steps[3:]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, want.Pix) {
			t.Fatalf("sample %d: the decode's bytes are not its trace's kernels'", i)
		}
		h := make([]byte, hwc.SampleBytes())
		if err := dec.Decode(data, hwc, k, h); err != nil {
			t.Fatal(err)
		}
		kernels.CHWToHWC(want.Pix, out)
		if !bytes.Equal(out, h) {
			t.Fatalf("sample %d: HWC is not CHW packed", i)
		}
	}
	if hsvs != 6 || flips == 0 || flips == 6 {
		t.Fatalf("%d HSV steps, %d flips in 6 samples: want 6 and some", hsvs, flips)
	}
}
