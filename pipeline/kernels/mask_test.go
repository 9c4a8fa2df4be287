package kernels

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// plane is a row-major mask, materialized: the reference the axis maps
// are checked against, an op at a time as torchvision applies them.
type plane struct {
	h, w int
	px   []byte
}

func (p plane) at(y, x int) byte {
	if y < 0 || x < 0 || y >= p.h || x >= p.w {
		return 0 // crop_mask past the mask: zeros
	}
	return p.px[y*p.w+x]
}

// crop is crop_mask, or pad_mask with fill (the pixels past the mask).
func (p plane) crop(top, left, h, w int, fill byte) plane {
	out := plane{h, w, make([]byte, h*w)}
	for y := range h {
		for x := range w {
			v := fill
			if y+top >= 0 && x+left >= 0 && y+top < p.h && x+left < p.w {
				v = p.px[(y+top)*p.w+x+left]
			}
			out.px[y*w+x] = v
		}
	}
	return out
}

// maskOf is the mask the maps (through base, bw columns) make of the
// source rm (srcW columns, rows its rows with a pixel set): MaskRuns'
// runs decoded, the fill's values set over them (FillRuns, ApplyFill);
// and whether FillRuns said nothing.
func maskOf(t *testing.T, rm []byte, srcW int, rows []bool, base []int32, bw int, ys, xs []int32) ([]byte, bool) {
	t.Helper()
	runs := MaskRuns(nil, rm, srcW, rows, base, bw, ys, xs)
	if ext := extentRuns(t, rm, srcW, base, bw, ys, xs); !slices.Equal(ext, runs) {
		t.Fatalf("the extent's runs %v, the canvas' %v", ext, runs)
	}
	got, ok := MaskFromRuns(nil, runs, len(ys)*len(xs))
	if !ok {
		t.Fatalf("runs %v do not cover %dx%d", runs, len(xs), len(ys))
	}
	fr, fv, _ := FillRuns(nil, nil, nil, base, bw, ys, xs)
	if len(fr) > 0 && !ApplyFill(got, fr, fv) {
		t.Fatalf("fill runs %v (values %v) do not cover %dx%d", fr, fv, len(xs), len(ys))
	}
	return got, len(fr) == 0
}

// randomFill is a Mask fill: 0 (the common case), 1, 255 or another byte.
func randomFill(r *rand.Rand) byte {
	return []byte{0, 0, 1, 255, byte(r.IntN(256))}[r.IntN(5)]
}

func (p plane) flip(horizontal bool) plane {
	out := plane{p.h, p.w, make([]byte, len(p.px))}
	for y := range p.h {
		for x := range p.w {
			if horizontal {
				out.px[y*p.w+x] = p.at(y, p.w-1-x)
			} else {
				out.px[y*p.w+x] = p.at(p.h-1-y, x)
			}
		}
	}
	return out
}

func (p plane) resize(h, w int) plane {
	out := plane{h, w, make([]byte, h*w)}
	for y := range h {
		for x := range w {
			out.px[y*w+x] = p.at(NearestIndex(y, p.h, h), NearestIndex(x, p.w, w))
		}
	}
	return out
}

// TestMaskMapsMatchOpByOp moves random masks through random chains of
// crops (inside and past the mask), pads, flips and nearest resizes, once
// an op at a time on the pixels and once as two axis maps sampled by
// MaskRuns: the same bytes, and the runs decode back to them.
func TestMaskMapsMatchOpByOp(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 46))
	for trial := range 300 {
		h, w := 1+r.IntN(40), 1+r.IntN(40)
		src := plane{h, w, make([]byte, h*w)}
		for i := range src.px {
			if r.IntN(3) == 0 {
				src.px[i] = 1
			}
		}
		// COCO's runs of it (column-major), decoded back by RowMajor.
		var counts []uint32
		var cur byte
		var run uint32
		for x := range w {
			for y := range h {
				if v := src.px[y*w+x]; v != cur {
					counts, cur, run = append(counts, run), v, 0
				}
				run++
			}
		}
		counts = append(counts, run)
		rm, rows, ok := RowMajor(nil, nil, counts, h, w)
		if !ok || !bytes.Equal(rm, src.px) {
			t.Fatalf("trial %d: RowMajor of %v is not the mask", trial, counts)
		}
		for y := range h {
			if set := bytes.IndexByte(src.px[y*w:(y+1)*w], 1) >= 0; rows[y] != set {
				t.Fatalf("trial %d: row %d has a pixel set: %v, RowMajor says %v", trial, y, set, rows[y])
			}
		}
		ref := src
		ys, xs := AxisIdentity(nil, h), AxisIdentity(nil, w)
		var tmp []int32
		filled := false
		for gen := range 1 + r.IntN(5) {
			switch op := r.IntN(5); op {
			case 0, 1: // a crop (fill 0), or a pad (a crop from a negative offset, of a fill)
				top, left := r.IntN(ref.h+10)-5, r.IntN(ref.w+10)-5
				ch, cw := 1+r.IntN(ref.h+8), 1+r.IntN(ref.w+8)
				fill := byte(0)
				if op == 1 {
					l, tp, rt, b := r.IntN(6), r.IntN(6), r.IntN(6), r.IntN(6)
					top, left, ch, cw, fill = -tp, -l, ref.h+tp+b, ref.w+l+rt, randomFill(r)
				}
				ref = ref.crop(top, left, ch, cw, fill)
				filled = filled || fill != 0
				tmp = AxisCrop(tmp, ys, top, ch, FillCode(gen, fill))
				ys, tmp = tmp, ys
				tmp = AxisCrop(tmp, xs, left, cw, FillCode(gen, fill))
				xs, tmp = tmp, xs
			case 2:
				ref = ref.flip(true)
				AxisFlip(xs)
			case 3:
				ref = ref.flip(false)
				AxisFlip(ys)
			case 4:
				nh, nw := 1+r.IntN(60), 1+r.IntN(60)
				ref = ref.resize(nh, nw)
				tmp = AxisResize(tmp, ys, nh)
				ys, tmp = tmp, ys
				tmp = AxisResize(tmp, xs, nw)
				xs, tmp = tmp, xs
			}
		}
		if len(ys) != ref.h || len(xs) != ref.w {
			t.Fatalf("trial %d: maps of %dx%d, the mask is %dx%d", trial, len(xs), len(ys), ref.w, ref.h)
		}
		got, none := maskOf(t, rm, w, rows, nil, 0, ys, xs)
		if !bytes.Equal(got, ref.px) {
			t.Fatalf("trial %d: the maps' mask differs from the op-by-op one", trial)
		}
		if !filled && !none {
			t.Fatalf("trial %d: fill runs where every fill was 0", trial)
		}
	}
}

// TestNearestIndexSpecialCases: ATen's nearest_idx copies when the size
// is the same and halves the index when it doubles; the float32 formula
// gives the same, and never passes the last pixel.
func TestNearestIndexSpecialCases(t *testing.T) {
	for in := 1; in < 300; in++ {
		for i := range in {
			if got := NearestIndex(i, in, in); got != i {
				t.Fatalf("same size %d: index %d -> %d", in, i, got)
			}
		}
		for i := range 2 * in {
			if got := NearestIndex(i, in, 2*in); got != i>>1 {
				t.Fatalf("%d to %d: index %d -> %d, want %d", in, 2*in, i, got, i>>1)
			}
		}
		for _, out := range []int{1, 3, 7, in + 1, 3*in + 1} {
			for i := range out {
				if got := NearestIndex(i, in, out); got < 0 || got >= in {
					t.Fatalf("%d to %d: index %d -> %d, outside the input", in, out, i, got)
				}
			}
		}
	}
}

// TestMaskFromRunsRefusesBadRuns: runs that do not cover the mask.
func TestMaskFromRunsRefusesBadRuns(t *testing.T) {
	if _, ok := MaskFromRuns(nil, []uint32{2, 3}, 4); ok {
		t.Fatal("runs of 5 pixels decoded into 4")
	}
	if _, ok := MaskFromRuns(nil, []uint32{1, 1}, 4); ok {
		t.Fatal("runs of 2 pixels decoded into 4")
	}
	if _, _, ok := RowMajor(nil, nil, []uint32{3, 2}, 2, 2); ok {
		t.Fatal("runs of 5 pixels decoded into 2x2")
	}
	if _, _, ok := RowMajor(nil, nil, []uint32{1, 2}, 2, 2); ok {
		t.Fatal("runs of 3 pixels decoded into 2x2")
	}
}

// TestTurnIndexIsNearestTurn: RotateIndex and AffineIndex move a canvas
// of indices as Rotate and Affine with NEAREST and a fill move the
// pixels (fast paths included): each output pixel is the input pixel its
// index names, or the fill where it is the fill's code.
func TestTurnIndexIsNearestTurn(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 7))
	var s Scratch
	for trial := range 120 {
		w, h := 1+r.IntN(30), 1+r.IntN(30)
		if trial%4 == 0 {
			h = w // square: the 90 and 270 degree fast paths
		}
		p := Planes{Pix: make([]byte, 3*w*h), W: w, H: h}
		for i := range p.Pix {
			p.Pix[i] = byte(1 + r.IntN(255)) // no 0: the fill stands out
		}
		in := Planes{Pix: append([]byte(nil), p.Pix...), W: w, H: h}
		idx := make([]int32, w*h)
		for i := range idx {
			idx[i] = int32(i)
		}
		center, hasCenter := [2]float64{r.Float64() * float64(w), r.Float64() * float64(h)}, trial%3 == 0
		fill := randomFill(r)
		fv := float64(fill)
		if trial%2 == 0 {
			angle := []float64{0, 90, 180, 270, -90, 33.3, -147}[r.IntN(7)]
			Rotate(p, angle, Nearest, center, hasCenter, [3]float64{fv, fv, fv}, false, &s)
			idx, _ = RotateIndex(idx, w, h, angle, center, hasCenter, FillCode(3, fill), nil)
		} else {
			a := AffineParams{Angle: r.Float64()*60 - 30, TX: r.Float64()*6 - 3, TY: r.Float64()*6 - 3, Scale: 0.7 + r.Float64()*0.6,
				ShearX: r.Float64()*20 - 10, ShearY: r.Float64()*10 - 5, Interp: Nearest, Fill: [3]float64{fv, fv, fv}, Center: center, HasCenter: hasCenter}
			Affine(p, &a, &s)
			idx, _ = AffineIndex(idx, w, h, &a, FillCode(3, fill), nil)
		}
		if len(idx) != w*h {
			t.Fatalf("trial %d: %d indices for %dx%d", trial, len(idx), w, h)
		}
		for c := range 3 {
			got, src := p.Plane(c), in.Plane(c)
			for o, i := range idx {
				want := fill
				if i >= 0 {
					want = src[i]
				} else if i != FillCode(3, fill) {
					t.Fatalf("trial %d: pixel %d's code %d, want the fill's %d", trial, o, i, FillCode(3, fill))
				}
				if got[o] != want {
					t.Fatalf("trial %d (%dx%d): plane %d pixel %d is %d, the index says %d (%d)", trial, w, h, c, o, got[o], i, want)
				}
			}
		}
	}
}

// BenchmarkMaskRuns: one instance's mask (a disc on a 640x480 source)
// resized to 1024x1024 and flipped (LSJ's canvas), decoded from its COCO
// runs and sampled into runs, side by side: the whole canvas' path
// (RowMajor, MaskRuns: the reference) and the extent's (MaskSource,
// MaskRunsExtent); then the same through a 17 degree rotation (an index,
// made once a sample: "index"), and a sample of 500 small instances on a
// 640x640 canvas (the issue's ~1.7 s a sample).
func BenchmarkMaskRuns(b *testing.B) {
	const w, h, out = 640, 480, 1024
	src := make([]byte, w*h)
	for x := range w {
		for y := range h {
			if dx, dy := x-300, y-200; dx*dx+dy*dy < 150*150 {
				src[y*w+x] = 1
			}
		}
	}
	counts := colRuns(src, w)
	ys := AxisResize(nil, AxisIdentity(nil, h), out)
	xs := AxisResize(nil, AxisIdentity(nil, w), out)
	AxisFlip(xs)
	b.Run("maps/canvas", func(b *testing.B) {
		var runs []uint32
		var rm []byte
		var rows []bool
		b.SetBytes(out * out)
		for b.Loop() {
			rm, rows, _ = RowMajor(rm, rows, counts, h, w)
			runs = MaskRuns(runs[:0], rm, w, rows, nil, 0, ys, xs)
		}
	})
	b.Run("maps/extent", func(b *testing.B) {
		var runs []uint32
		var s MaskSource
		b.SetBytes(out * out)
		for b.Loop() {
			s.Decode(counts, h, w)
			runs, _ = MaskRunsExtent(runs[:0], &s, w, nil, 0, nil, ys, xs)
		}
	})
	// The same canvas rotated by 17 degrees: the index made (once a
	// sample, whatever its instances), and an instance's runs through it:
	// the cost model's maskIndexNs and maskTurnRunNs.
	var base []int32
	b.Run("index", func(b *testing.B) {
		var idx, tmp []int32
		b.SetBytes(out * out)
		for b.Loop() {
			idx = CanvasIndex(idx, nil, 0, w, ys, xs)
			base, tmp = RotateIndex(idx, out, out, 17, [2]float64{}, false, FillCode(1, 0), tmp)
			idx = base
		}
	})
	// The same turn read through the maps, the canvas index not made
	// (RotateMapsIndex: what RotateMasks runs).
	b.Run("index-maps", func(b *testing.B) {
		var spare, moved, tmp []int32
		c := CanvasMaps{SrcW: w, Ys: ys, Xs: xs}
		want, _ := RotateIndex(CanvasIndex(nil, nil, 0, w, ys, xs), out, out, 17, [2]float64{}, false, FillCode(1, 0), nil)
		b.SetBytes(out * out)
		for b.Loop() {
			moved, _, _, spare = RotateMapsIndex(&c, spare, 17, [2]float64{}, false, false, FillCode(1, 0), tmp)
			tmp = moved
		}
		if !slices.Equal(moved, want) {
			b.Fatal("the maps' turned index is not the canvas index turned")
		}
	})
	by, bx := AxisIdentity(nil, out), AxisIdentity(nil, out)
	b.Run("turned/canvas", func(b *testing.B) {
		var runs []uint32
		var rm []byte
		var rows []bool
		b.SetBytes(out * out)
		for b.Loop() {
			rm, rows, _ = RowMajor(rm, rows, counts, h, w)
			runs = MaskRuns(runs[:0], rm, w, rows, base, out, by, bx)
		}
	})
	// The tiles are made once a sample; an instance's runs read them.
	var tiles MaskTiles
	b.Run("tiles", func(b *testing.B) {
		b.SetBytes(out * out)
		for b.Loop() {
			tiles.Build(base, out, w, by, bx)
		}
	})
	b.Run("turned/extent", func(b *testing.B) {
		var runs []uint32
		var s MaskSource
		b.SetBytes(out * out)
		for b.Loop() {
			s.Decode(counts, h, w)
			runs, _ = MaskRunsExtent(runs[:0], &s, w, base, out, &tiles, by, bx)
		}
	})
	// 500 instances, 40x40 squares spread over a 640x640 source, through
	// the identity: a sample's masks.
	const n, side = 500, 640
	var insts [][]uint32
	for k := range n {
		m := make([]byte, side*side)
		x0, y0 := (k*37)%(side-40), (k*53)%(side-40)
		for y := y0; y < y0+40; y++ {
			for x := x0; x < x0+40; x++ {
				m[y*side+x] = 1
			}
		}
		insts = append(insts, colRuns(m, side))
	}
	id := AxisIdentity(nil, side)
	b.Run("sample500/canvas", func(b *testing.B) {
		var runs []uint32
		var rm []byte
		var rows []bool
		for b.Loop() {
			runs = runs[:0]
			for _, c := range insts {
				rm, rows, _ = RowMajor(rm, rows, c, side, side)
				runs = MaskRuns(runs, rm, side, rows, nil, 0, id, id)
			}
		}
	})
	b.Run("sample500/extent", func(b *testing.B) {
		var runs []uint32
		var s MaskSource
		for b.Loop() {
			runs = runs[:0]
			for _, c := range insts {
				s.Decode(c, side, side)
				runs, _ = MaskRunsExtent(runs, &s, side, nil, 0, nil, id, id)
			}
		}
	})
}

// BenchmarkFillRuns: the fill block of a 1024x1024 canvas: a 640x480
// source resized up and padded with 255 on every side (separable maps),
// and the same rotated by 17 degrees with a fill of 255 (through a base).
func BenchmarkFillRuns(b *testing.B) {
	const w, h, out = 640, 480, 1024
	ys := AxisCrop(nil, AxisResize(nil, AxisIdentity(nil, h), 900), -62, out, FillCode(1, 255))
	xs := AxisCrop(nil, AxisResize(nil, AxisIdentity(nil, w), 900), -62, out, FillCode(1, 255))
	for _, c := range []struct {
		name string
		turn bool
	}{{"pad", false}, {"pad+rotate", true}} {
		b.Run(c.name, func(b *testing.B) {
			var base []int32
			bw := 0
			by, bx := ys, xs
			if c.turn {
				idx := CanvasIndex(nil, nil, 0, w, ys, xs)
				base, _ = RotateIndex(idx, out, out, 17, [2]float64{}, false, FillCode(2, 255), nil)
				bw, by, bx = out, AxisIdentity(nil, out), AxisIdentity(nil, out)
			}
			var runs []uint32
			var vals, row []byte
			b.SetBytes(out * out)
			for b.Loop() {
				runs, vals, row = FillRuns(runs[:0], vals[:0], row, base, bw, by, bx)
			}
			b.ReportMetric(float64(4+4*len(runs)+len(vals)), "block-bytes")
		})
	}
}

// canvasIndexRef is CanvasIndex a pixel at a time, as it was first
// written: the reference its row-wise version is checked against.
func canvasIndexRef(dst, base []int32, bw, srcW int, ys, xs []int32) []int32 {
	dst = dst[:0]
	for _, y := range ys {
		for _, x := range xs {
			var i int32
			switch {
			case y < 0 || x < 0:
				i = min(y, x)
			case len(base) > 0:
				i = base[int(y)*bw+int(x)]
			default:
				i = y*int32(srcW) + x
			}
			dst = append(dst, i)
		}
	}
	return dst
}

// affineIndexToRef is affineIndexTo a pixel at a time (the grid's point,
// the bounds test, the rounding), as it was first written: the reference
// its spans are checked against.
func affineIndexToRef(idx []int32, w, h int, g affineGrid, ow, oh int, fill int32, tmp []int32) []int32 {
	fw, fh := float32(w)-0.5, float32(h)-0.5
	for y := 0; y < oh; y++ {
		r := g.row(y)
		for x := 0; x < ow; x++ {
			ix, iy := g.at(x, r)
			v := fill
			if ix >= -0.5 && ix <= fw && iy >= -0.5 && iy <= fh { // NaN is outside
				if xi, yi := int(roundEven32(ix)), int(roundEven32(iy)); xi < w && yi < h {
					v = idx[yi*w+xi]
				}
			}
			tmp = append(tmp, v)
		}
	}
	return tmp
}

// TestIndexSpansMatchPixels: CanvasIndex and the turned index (rotate,
// expand or not, and affine, through affineIndexTo's spans) give the
// per-pixel references' every entry, over random angles, centres,
// scales, shears and sizes, and the degenerate ones: multiples of 90
// degrees with and without a centre, 1-pixel canvases, a zero scale, huge
// and NaN matrices (the per-pixel path), and grids both below and above
// torchBLASPoints (the unfused and fused orders).
func TestIndexSpansMatchPixels(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 11))
	sizes := func() (int, int) {
		if r.IntN(60) == 0 { // large: the grid's errors grow with the size
			return 300 + r.IntN(500), 300 + r.IntN(500)
		}
		switch r.IntN(6) {
		case 0:
			return 1, 1 + r.IntN(40)
		case 1:
			return 1 + r.IntN(40), 1
		case 2:
			return 1 + r.IntN(8), 1 + r.IntN(8) // unfused grids among them
		case 3:
			n := 1 + r.IntN(120)
			return n, n
		default:
			return 1 + r.IntN(150), 1 + r.IntN(150)
		}
	}

	angles := []float64{0, 90, 180, 270, -90, 360, 450, -180, 45, 17, 33.3, -147, 1e-7, 89.9999999, math.NaN(), math.Inf(1), 1e30}
	for trial := range 3000 {
		w, h := sizes()
		// The canvas index through random maps (fills of two steps, a
		// base or none), against the per-pixel reference.
		srcW, srcH := 1+r.IntN(20), 1+r.IntN(20)
		ys, xs := make([]int32, h), make([]int32, w)
		for i := range ys {
			ys[i] = int32(r.IntN(srcH))
			if r.IntN(5) == 0 {
				ys[i] = FillCode(r.IntN(2), byte(r.IntN(256)))
			}
		}
		for i := range xs {
			xs[i] = int32(r.IntN(srcW))
			if r.IntN(5) == 0 {
				xs[i] = FillCode(r.IntN(2), byte(r.IntN(256)))
			}
		}
		var base []int32
		bw := 0
		if trial%3 == 0 {
			bw = srcW
			base = make([]int32, srcW*srcH)
			for i := range base {
				base[i] = int32(r.IntN(1000)) - 100
			}
		}
		want := canvasIndexRef(nil, base, bw, srcW, ys, xs)
		got := CanvasIndex(make([]int32, r.IntN(3)), base, bw, srcW, ys, xs)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: CanvasIndex of %dx%d differs from the per-pixel one", trial, w, h)
		}
		idx := make([]int32, w*h)
		for i := range idx {
			idx[i] = int32(i)
		}
		fill := FillCode(3, byte(r.IntN(256)))
		center := [2]float64{r.Float64()*float64(w+4) - 2, r.Float64()*float64(h+4) - 2}
		hasCenter := r.IntN(2) == 0
		var m [6]float64
		switch trial % 3 {
		case 0:
			angle := angles[r.IntN(len(angles))]
			if r.IntN(2) == 0 {
				angle = r.Float64()*720 - 360
			}
			m = inverseAffine(w, h, center, hasCenter, -pyMod(angle, 360), [2]float64{}, 1, [2]float64{})
		case 1:
			scale := 0.05 + r.Float64()*3
			if r.IntN(10) == 0 {
				scale = []float64{0, 1e-30, 1e30, math.Inf(1), math.NaN()}[r.IntN(5)]
			}
			m = inverseAffine(w, h, center, hasCenter, r.Float64()*360-180, [2]float64{r.Float64()*40 - 20, r.Float64()*40 - 20}, scale,
				[2]float64{r.Float64()*90 - 45, r.Float64()*90 - 45})
		default: // any matrix, huge and NaN entries among them
			for i := range m {
				m[i] = r.Float64()*4 - 2
				switch r.IntN(12) {
				case 0:
					m[i] = 0
				case 1:
					m[i] = math.Ldexp(r.Float64()-0.5, 90+r.IntN(60))
				case 2:
					m[i] = []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat32, -math.MaxFloat32}[r.IntN(5)]
				case 3:
					m[i] *= float64(r.IntN(2000))
				}
			}
		}
		ow, oh := w, h
		if r.IntN(3) == 0 { // an expand's output of another size
			ow, oh = 1+r.IntN(2*w+3), 1+r.IntN(2*h+3)
		}
		g := newAffineGridTo(&m, w, h, ow, oh)
		prefix := []int32{-7, -8}
		wantT := affineIndexToRef(idx, w, h, g, ow, oh, fill, slices.Clone(prefix))
		gotT := affineIndexTo(idx, nil, w, h, g, ow, oh, fill, slices.Clone(prefix))
		if !slices.Equal(gotT, wantT) {
			for i := range wantT {
				if gotT[i] != wantT[i] {
					t.Fatalf("trial %d: %dx%d -> %dx%d by %v: entry %d (row %d) is %d, the per-pixel one %d",
						trial, w, h, ow, oh, m, i-2, (i-2)/ow, gotT[i], wantT[i])
				}
			}
			t.Fatalf("trial %d: %d entries, want %d", trial, len(gotT), len(wantT))
		}
	}
}

// TestFmaRowIsFma32: fmaRow's shortcut gives fma32's bits, over random
// float32s of every size and over ones of few significant bits, whose
// float64 sums land on a float32's midpoint (the case the shortcut leaves
// to fma32's steps) and next to one.
func TestFmaRowIsFma32(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 13))
	f := func() float32 {
		var v float64
		if r.IntN(2) == 0 { // few bits: exact sums, midpoints
			v = math.Ldexp(float64(r.IntN(1<<12)), r.IntN(40)-30)
		} else {
			v = math.Ldexp(r.Float64(), r.IntN(80)-40)
		}
		if r.IntN(2) == 0 {
			v = -v
		}
		return float32(v)
	}
	mids := 0
	for range 2_000_000 {
		a, b, c := f(), f(), f()
		if r.IntN(4) == 0 { // c a float32 next to a*b's midpoints
			c = float32(-float64(a) * float64(b) * (1 + math.Ldexp(float64(r.IntN(3)-1), -24)))
		}
		p := float64(float64(a) * float64(b))
		s := p + float64(c)
		if math.Float64bits(s)&(1<<29-1) == 1<<28 {
			mids++
		}
		if got, want := fmaRow(p, c), fma32(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fmaRow(%g*%g, %g) = %g, fma32 %g", a, b, c, got, want)
		}
	}
	if mids < 100 {
		t.Fatalf("only %d sums on a float32's midpoint: the shortcut's other side is barely tried", mids)
	}
}

// TestMapsIndexIsCanvasIndexMoved: RotateMapsIndex and AffineMapsIndex,
// which read the canvas index through its maps, give CanvasIndex's index
// moved by RotateIndex, RotateExpandIndex and AffineIndex, over random
// maps (fills of two steps, a base or none) and turns, multiples of 90
// degrees with and without a centre among them.
func TestMapsIndexIsCanvasIndexMoved(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 17))
	angles := []float64{0, 90, 180, 270, -90, 360, 450, 45, 17, -147, 1e-7, math.NaN()}
	for trial := range 1500 {
		w, h := 1+r.IntN(70), 1+r.IntN(70)
		if trial%4 == 0 {
			h = w
		}
		srcW, srcH := 1+r.IntN(30), 1+r.IntN(30)
		c := CanvasMaps{SrcW: srcW, Ys: make([]int32, h), Xs: make([]int32, w)}
		for i := range c.Ys {
			c.Ys[i] = int32(r.IntN(srcH))
			if r.IntN(5) == 0 {
				c.Ys[i] = FillCode(r.IntN(2), byte(r.IntN(256)))
			}
		}
		for i := range c.Xs {
			c.Xs[i] = int32(r.IntN(srcW))
			if r.IntN(5) == 0 {
				c.Xs[i] = FillCode(r.IntN(2), byte(r.IntN(256)))
			}
		}
		if trial%3 == 0 {
			c.BW = srcW
			c.Base = make([]int32, srcW*srcH)
			for i := range c.Base {
				c.Base[i] = int32(r.IntN(1000)) - 100
			}
		}
		canvas := CanvasIndex(nil, c.Base, c.BW, c.SrcW, c.Ys, c.Xs)
		fill := FillCode(3, byte(r.IntN(256)))
		center := [2]float64{r.Float64() * float64(w), r.Float64() * float64(h)}
		hasCenter := r.IntN(3) == 0
		var want, got []int32
		var ww, wh, gw, gh int
		switch trial % 3 {
		case 0, 1:
			angle := angles[r.IntN(len(angles))]
			if r.IntN(3) == 0 {
				angle = r.Float64()*720 - 360
			}
			expand := trial%3 == 1
			if expand {
				want, ww, wh, _ = RotateExpandIndex(canvas, w, h, angle, center, hasCenter, fill, nil)
			} else {
				want, _ = RotateIndex(canvas, w, h, angle, center, hasCenter, fill, nil)
				ww, wh = w, h
			}
			got, gw, gh, _ = RotateMapsIndex(&c, nil, angle, center, hasCenter, expand, fill, nil)
		default:
			a := AffineParams{Angle: r.Float64()*360 - 180, TX: r.Float64()*10 - 5, TY: r.Float64()*10 - 5, Scale: 0.2 + r.Float64()*2,
				ShearX: r.Float64()*60 - 30, ShearY: r.Float64()*60 - 30, Center: center, HasCenter: hasCenter}
			want, _ = AffineIndex(canvas, w, h, &a, fill, nil)
			got, _ = AffineMapsIndex(&c, nil, &a, fill, nil)
			ww, wh, gw, gh = w, h, w, h
		}
		if gw != ww || gh != wh || !slices.Equal(got, want) {
			t.Fatalf("trial %d: %dx%d through the maps (%dx%d) differs from the canvas index moved (%dx%d)", trial, w, h, gw, gh, ww, wh)
		}
	}
}
