package fn

// The YOLO family's functional ops (ultralytics' load, letterbox,
// random_perspective, HSV and flips), their kernels' calls and targets
// (the classes are pipeline's op_yolo.go).

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

var (
	// YOLOLoad is load_image's resize: to size (h, w), cv2.INTER_LINEAR;
	// the labels times the ratio of the sizes, in float32.
	YOLOLoad = define(Def{name: "yolo_load_image", args: []arg{{"size", argInt, 4, 2}},
		Geometry: true, check: noKernel, Role: TargetsInstances,
		Instances: func(t *targets.Targets, w, h int, st *Step) (int, int, error) {
			nw, nh := st.I[5], st.I[4]
			scaleTargets(t, float32(float64(nw)/float64(w)), float32(float64(nh)/float64(h)), 0, 0)
			return nw, nh, nil
		}})
	// YOLOLetterBox is LetterBox's: the image resized to new_unpad (h,
	// w) and padded with 114 to size, its top-left at (left, top); the
	// labels times ratio (w, h), plus (left, top), in float32
	// (_update_labels).
	YOLOLetterBox = define(Def{name: "yolo_letterbox", args: []arg{{"new_unpad", argInt, 2, 2}, {"top", argInt, 0, 1}, {"left", argInt, 1, 1},
		{"size", argInt, 4, 2}, {"ratio", argFloat, 0, 2}},
		Geometry: true, check: noKernel, Role: TargetsInstances,
		Instances: func(t *targets.Targets, _, _ int, st *Step) (int, int, error) {
			scaleTargets(t, float32(st.F[0]), float32(st.F[1]), float32(st.I[1]), float32(st.I[0]))
			return st.I[5], st.I[4], nil
		}})
	// YOLOPerspective is RandomPerspective's: M from the drawn terms
	// (perspective [px, py], angle, scale, shear [x, y] in degrees,
	// translate [x, y] as fractions of the output), the image warped
	// into size (h, w) (cv2.warpPerspective with warp_perspective 1,
	// else cv2.warpAffine; border 114), the labels through M, clipped,
	// and those box_candidates drops dropped (apply_instances).
	YOLOPerspective = define(Def{name: "yolo_random_perspective", args: []arg{{"perspective", argPair, 0, 2}, {"angle", argFloat, 0, 1},
		{"scale", argFloat, 1, 1}, {"shear", argFloat, 2, 2}, {"translate", argFloat, 4, 2}, {"size", argInt, 4, 2}, {"warp_perspective", argInt, 0, 1}},
		Geometry: true, check: noKernel, Role: TargetsInstances,
		Instances: func(t *targets.Targets, w, h int, st *Step) (int, int, error) {
			ow, oh := st.I[5], st.I[4]
			pp := PerspectiveOf(st)
			m := cv.PerspectiveMatrix(pp, w, h, ow, oh)
			in := CVInstances(t)
			setCVInstances(t, cv.PerspectiveInstances(in, m, pp.Scale, st.I[0] != 0, ow, oh))
			return ow, oh, nil
		}})
	// YOLOHSV is RandomHSV's: the drawn gains r (uniform(-1, 1) times
	// hgain, sgain, vgain), through OpenCV's BGR2HSV, the LUTs, HSV2BGR.
	// Its price is the Go's (BenchmarkKernels: 9-22 ms a 640x640), or
	// the C's where cgo links it (cv.HaveC; pipeline/transform's
	// op_yolo.go: 3 ns a pixel).
	YOLOHSV = define(Def{name: "yolo_random_hsv", args: []arg{{"r", argFloat, 0, 3}}, Ns: yoloHSVNs[b2i(cv.HaveC)],
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { cv.RandomHSV(p, [3]float64(st.F[:3])) },
		Role:   TargetsPixels})
	// YOLOFlipLR and YOLOFlipUD are RandomFlip's (np.fliplr,
	// np.flipud): x becomes w - x (y: h - y) for boxes and keypoints, and
	// the keypoints reordered by flip_idx where it is given.
	YOLOFlipLR = define(Def{name: "yolo_fliplr", args: []arg{{"flip_idx", argFlipIdx, 1, 1}}, Ns: 0.062,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.HorizontalFlip(p) },
		Role:   TargetsInstances, check: checkFlipIdx,
		Instances: func(t *targets.Targets, w, h int, st *Step) (int, int, error) {
			return w, h, flipTargets(t, w, h, st, false)
		}})
	YOLOFlipUD = define(Def{name: "yolo_flipud", args: []arg{{"flip_idx", argFlipIdx, 1, 1}}, Ns: 0.069,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.VerticalFlip(p) },
		Role:   TargetsInstances, check: checkFlipIdx,
		Instances: func(t *targets.Targets, w, h int, st *Step) (int, int, error) {
			return w, h, flipTargets(t, w, h, st, true)
		}})
)

// PerspectiveOf is a yolo_random_perspective step's drawn terms.
func PerspectiveOf(st *Step) cv.PerspectiveParams {
	return cv.PerspectiveParams{PX: st.Center[0], PY: st.Center[1], Angle: st.F[0], Scale: st.F[1],
		ShearX: st.F[2], ShearY: st.F[3], TX: st.F[4], TY: st.F[5]}
}

// flip_idx tables: a step holds its table's number (from 1; 0 is None),
// the same for the same table in every process, since the trace writes
// the table itself, never its number.
var flipIdx struct {
	sync.Mutex
	tables [][]int
}

// maxFlipTables bounds the tables a process keeps (each op's, each parsed
// trace's different one).
const maxFlipTables = 4096

// InternFlipIdx is idx's number (0 for an empty one).
func InternFlipIdx(idx []int) int {
	if len(idx) == 0 {
		return 0
	}
	flipIdx.Lock()
	defer flipIdx.Unlock()
	for i, t := range flipIdx.tables {
		if slices.Equal(t, idx) {
			return i + 1
		}
	}
	if len(flipIdx.tables) >= maxFlipTables {
		return -1
	}
	flipIdx.tables = append(flipIdx.tables, append([]int(nil), idx...))
	return len(flipIdx.tables)
}

// flipTable is table n (nil for 0 or an unknown one).
func flipTable(n int) []int {
	flipIdx.Lock()
	defer flipIdx.Unlock()
	if n < 1 || n > len(flipIdx.tables) {
		return nil
	}
	return flipIdx.tables[n-1]
}

func checkFlipIdx(st *Step, _, _ int) error {
	if st.I[1] < 0 {
		return StepError(st, "more than %d flip_idx tables", maxFlipTables)
	}
	return nil
}

// appendYOLOArg appends the YOLO family's argument kinds: a pair of
// floats in Center, a flip_idx table.
func (st *Step) appendYOLOArg(b []byte, a arg) []byte {
	switch a.kind {
	case argPair:
		return appendList(b, 2, func(b []byte, k int) []byte { return AppendFloat(b, st.Center[k]) })
	case argFlipIdx:
		t := flipTable(st.I[a.at])
		if t == nil {
			return append(b, "null"...)
		}
		return AppendInts(b, t)
	}
	return append(b, "null"...)
}

// setYOLOArg reads them back (ParseTrace).
func (st *Step) setYOLOArg(a arg, raw json.RawMessage) error {
	if a.kind == argPair {
		var v [2]float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		st.Center = v
		return nil
	}
	var v []int
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	if len(v) > 1024 {
		return fmt.Errorf("flip_idx of %d keypoints: the limit is 1024", len(v))
	}
	for _, j := range v {
		if j < 0 || j >= len(v) {
			return fmt.Errorf("flip_idx %v: want indices below its length", v)
		}
	}
	st.I[a.at] = InternFlipIdx(v)
	return nil
}

// scaleTargets is Instances.scale(sx, sy) then add_padding(px, py) on
// t's boxes, keypoints and segments, in float32 (each product rounded
// before the sum).
func scaleTargets(t *targets.Targets, sx, sy, px, py float32) {
	for k := range t.Boxes {
		b := &t.Boxes[k]
		b[0], b[1], b[2], b[3] = float32(b[0]*sx)+px, float32(b[1]*sy)+py, float32(b[2]*sx)+px, float32(b[3]*sy)+py
	}
	for k := range t.Points {
		p := &t.Points[k]
		p[0], p[1] = float32(p[0]*sx)+px, float32(p[1]*sy)+py
	}
	for _, sg := range t.Segments {
		for j := range sg {
			p := &sg[j]
			p[0], p[1] = float32(p[0]*sx)+px, float32(p[1]*sy)+py
		}
	}
}

// flipTargets is RandomFlip.apply_instances on t, a w x h canvas: fliplr
// (x: w - x, a box's ends swapped; keypoints and segments likewise) or
// flipud, then the keypoints reordered by the step's flip_idx.
func flipTargets(t *targets.Targets, w, h int, st *Step, ud bool) error {
	fw, fh := float32(w), float32(h)
	for k := range t.Boxes {
		b := &t.Boxes[k]
		if ud {
			b[1], b[3] = fh-b[3], fh-b[1]
		} else {
			b[0], b[2] = fw-b[2], fw-b[0]
		}
	}
	for k := range t.Points {
		if ud {
			t.Points[k][1] = fh - t.Points[k][1]
		} else {
			t.Points[k][0] = fw - t.Points[k][0]
		}
	}
	for _, sg := range t.Segments {
		for j := range sg {
			if ud {
				sg[j][1] = fh - sg[j][1]
			} else {
				sg[j][0] = fw - sg[j][0]
			}
		}
	}
	idx := flipTable(st.I[1])
	if idx == nil || t.P == 0 {
		return nil
	}
	if len(idx) != t.P {
		return fmt.Errorf("%w: %s: flip_idx of %d keypoints, the dataset's instances have %d", errs.Unsupported, st.Fn, len(idx), t.P)
	}
	var pts [][2]float32
	var vis []uint8
	for k := 0; k < len(t.Points)/t.P; k++ {
		pts = append(pts[:0], t.Points[k*t.P:(k+1)*t.P]...)
		vis = append(vis[:0], t.Vis[k*t.P:(k+1)*t.P]...)
		for j, from := range idx {
			t.Points[k*t.P+j], t.Vis[k*t.P+j] = pts[from], vis[from]
		}
	}
	return nil
}

// CVInstances is t as ultralytics' Instances (cv.Instances): boxes XYXY,
// segments (t's own, which the kernels do not change in place), keypoints
// (x, y, visibility), each class the instance's index in t (so
// that setCVInstances knows which were kept).
func CVInstances(t *targets.Targets) cv.Instances {
	in := cv.Instances{Boxes: append([][4]float32(nil), t.Boxes...), Cls: make([]int64, len(t.Boxes))}
	for k := range in.Cls {
		in.Cls[k] = int64(k)
	}
	if len(t.Segments) == len(t.Boxes) && len(t.Segments) > 0 {
		in.Segments = t.Segments
	}
	if t.P > 0 {
		in.Keypoints = make([][][3]float32, len(t.Boxes))
		for k := range in.Keypoints {
			kp := make([][3]float32, t.P)
			for j := range kp {
				p := t.Points[k*t.P+j]
				kp[j] = [3]float32{p[0], p[1], float32(t.Vis[k*t.P+j])}
			}
			in.Keypoints[k] = kp
		}
	}
	return in
}

// setCVInstances sets t to out, CVInstances' instances moved (their
// classes the indices in t of those kept): the kept instances' labels,
// crowd flags and masks with their new boxes and keypoints.
func setCVInstances(t *targets.Targets, out cv.Instances) {
	for n, k := range out.Cls {
		t.Boxes[n], t.Labels[n], t.Crowd[n] = out.Boxes[n], t.Labels[k], t.Crowd[k]
		if len(t.Masks) > int(k) {
			t.Masks[n] = t.Masks[k]
		}
		if len(out.Segments) > n {
			t.Segments[n] = out.Segments[n]
		}
		if t.P > 0 {
			for j, p := range out.Keypoints[n] {
				t.Points[n*t.P+j], t.Vis[n*t.P+j] = [2]float32{p[0], p[1]}, uint8(p[2])
			}
		}
	}
	n := len(out.Cls)
	t.Boxes, t.Labels, t.Crowd = t.Boxes[:n], t.Labels[:n], t.Crowd[:n]
	t.Points, t.Vis = t.Points[:n*t.P], t.Vis[:n*t.P]
	if len(t.Masks) > n {
		t.Masks = t.Masks[:n]
	}
	if len(t.Segments) > n {
		t.Segments = t.Segments[:n]
	}
}

// yoloHSVNs is yolo_random_hsv's price a pixel: its Go's, its C's.
var yoloHSVNs = [2]float64{25, 3}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
