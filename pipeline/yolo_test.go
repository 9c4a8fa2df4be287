package pipeline

import (
	"bytes"
	"image"
	_ "image/jpeg"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
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
	tf, err := NewTransform(CHW, Op{Kind: OpYOLOLoadImage, ImgSz: max(w, h)}, Op{Kind: OpYOLOLetterBox, Size: [2]int{h, w}, Stride: 32, ScaleUp: true, LetterCenter: true})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, tf.SampleBytes())
	if err := NewDecoder().Decode(data, tf, Key{Seed: 1}, out); err != nil {
		t.Fatal(err)
	}
	return kernels.Planes{Pix: out, W: w, H: h}
}

// TestYOLOPipelineIsItsKernels: a sample of the yolo-letterbox recipe is
// its trace's kernels (pipeline/kernels/cv) run on the whole image, in
// CHW and HWC, and its trace reads back as the same steps.
func TestYOLOPipelineIsItsKernels(t *testing.T) {
	ops := letterboxRecipe(t)
	tf, err := NewTransform(CHW, ops...)
	if err != nil {
		t.Fatal(err)
	}
	hwc, err := NewTransform(HWC, ops...)
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
		k := Key{Seed: 7, Index: uint64(i)}
		out := make([]byte, tf.SampleBytes())
		if err := dec.Decode(data, tf, k, out); err != nil {
			t.Fatal(err)
		}
		steps, err := ParseTrace(dec.AppendTrace(nil, tf))
		if err != nil {
			t.Fatal(err)
		}
		// The kernels by hand, from the trace.
		lw, lh := cv.LoadSize(src.W, src.H, 640)
		if steps[0].Fn != FnYOLOLoad || steps[0].I[5] != lw || steps[0].I[4] != lh {
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
		if st := steps[1]; st.Fn != FnYOLOLetterBox || st.I != [6]int{g.Top, g.Left, g.UnpadH, g.UnpadW, 640, 640} {
			t.Fatalf("sample %d: step 1 %+v, want the letterbox %+v", i, st, g)
		}
		st := steps[2]
		if st.Fn != FnYOLOPerspective || st.I[0] != 0 {
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
			case FnYOLOHSV:
				hsvs++
			case FnYOLOFlipLR:
				flips++
			default:
				t.Fatalf("sample %d: step %s after the geometry", i, st.Fn)
			}
		}
		if err := ApplyTrace(want.Pix, 640, 640, steps[3:]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, want.Pix) {
			t.Fatalf("sample %d: the decode's bytes are not its trace's kernels'", i)
		}
		h := make([]byte, hwc.SampleBytes())
		if err := dec.Decode(data, hwc, k, h); err != nil {
			t.Fatal(err)
		}
		chwToHWC(want.Pix, out)
		if !bytes.Equal(out, h) {
			t.Fatalf("sample %d: HWC is not CHW packed", i)
		}
	}
	if hsvs != 6 || flips == 0 || flips == 6 {
		t.Fatalf("%d HSV steps, %d flips in 6 samples: want 6 and some", hsvs, flips)
	}
}

// TestYOLOTargets: the targets through the recipe's trace are the cv
// kernels' moves of the source boxes (load's scale, LetterBoxInstances,
// PerspectiveInstances, the flip), labels and keypoints with them.
func TestYOLOTargets(t *testing.T) {
	ops := letterboxRecipe(t)
	ops[4].FlipIdx = []int{1, 0}
	tf, err := NewTransform(CHW, ops...)
	if err != nil {
		t.Fatal(err)
	}
	const W, H = 800, 533
	for i := range 40 {
		k := Key{Seed: 3, Index: uint64(i)}
		var tg Targets
		tg.P = 2
		for j := range 5 {
			x, y := float32(37*j+5*i), float32(29*j+3)
			tg.Add([4]float32{x, y, x + 150, y + 90}, int64(j), j == 2)
			tg.Points = append(tg.Points, [2]float32{x + 10, y + 20}, [2]float32{x + 140, y + 1})
			tg.Vis = append(tg.Vis, 2, 1)
		}
		trace, err := tf.Trace(W, H, k)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := ParseTrace(trace)
		if err != nil {
			t.Fatal(err)
		}
		in := fn.CVInstances(&tg)
		lw, lh := cv.LoadSize(W, H, 640)
		in.Scale(float32(float64(lw)/W), float32(float64(lh)/H), false)
		g := cv.LetterBoxParams(cv.LetterBoxArgs{H: 640, W: 640, Center: true, Stride: 32}, lw, lh)
		cv.LetterBoxInstances(&in, g)
		pp := fn.PerspectiveOf(&steps[2])
		out := cv.PerspectiveInstances(in, cv.PerspectiveMatrix(pp, 640, 640, 640, 640), pp.Scale, false, 640, 640)
		flipped := steps[len(steps)-1].Fn == FnYOLOFlipLR
		if flipped {
			cv.FlipInstances(&out, 640)
			for _, kp := range out.Keypoints {
				kp[0], kp[1] = kp[1], kp[0]
			}
		}
		w, h, err := MoveTargets(&tg, W, H, steps)
		if err != nil {
			t.Fatal(err)
		}
		if w != 640 || h != 640 || len(tg.Boxes) != len(out.Boxes) {
			t.Fatalf("sample %d: %dx%d with %d boxes, want 640x640 with %d", i, w, h, len(tg.Boxes), len(out.Boxes))
		}
		for n, idx := range out.Cls {
			if tg.Boxes[n] != out.Boxes[n] || tg.Labels[n] != idx || (tg.Crowd[n] == 1) != (idx == 2) {
				t.Fatalf("sample %d: instance %d: %v label %d, want %v label %d", i, n, tg.Boxes[n], tg.Labels[n], out.Boxes[n], idx)
			}
			for j, p := range out.Keypoints[n] {
				if tg.Points[2*n+j] != [2]float32{p[0], p[1]} || tg.Vis[2*n+j] != uint8(p[2]) {
					t.Fatalf("sample %d: instance %d point %d: %v %d, want %v", i, n, j, tg.Points[2*n+j], tg.Vis[2*n+j], p)
				}
			}
		}
	}
}
