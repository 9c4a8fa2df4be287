package targets

// The instances' masks through the geometry, as torchvision's *_mask
// kernels move a tv_tensors.Mask: not the masks themselves but maps of
// the canvas into the source image (maskMaps), sampled once when the
// targets are written (AppendMasks).

import (
	"math"
	"slices"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// maskMaps are a sample's masks' geometry so far: the canvas' rows (ys)
// and columns (xs) each as the source image's row (column) it comes from,
// or a fill's code (kernels.FillCode: its value and its step). Crops,
// pads, flips and nearest resizes are each such a map an axis, so any
// chain of them is one (kernels.AxisCrop).
type maskMaps struct {
	ys, xs, tmp []int32
	// base, after a rotate or an affine (not separable), is the canvas it
	// left (bw columns), an index a pixel into the source
	// (kernels.CanvasIndex): ys and xs then map into base. srcW and srcH
	// are the source's size.
	base, spare []int32
	bw          int
	srcW, srcH  int
	inst        kernels.MaskSource // an instance's source mask, at its extent
	tiles       kernels.MaskTiles  // after a turn, base's tiles (kernels.MaskRunsExtent)
	runs        []uint32           // an instance's runs on the canvas
	lens        []uint32           // the runs of each instance
	// gen counts the filling steps so far (each its own FillCode); filled:
	// one of them had a fill other than 0, so the canvas may have pixels
	// of it (fillRuns and fillVals, kernels.FillRuns).
	gen      int
	filled   bool
	fillRuns []uint32
	fillVals []byte
	fillRow  []byte
}

// StartMasks sets t's maps to the w x h source image's.
func (t *Targets) StartMasks(w, h int) {
	m := &t.mm
	m.ys, m.xs = kernels.AxisIdentity(m.ys, h), kernels.AxisIdentity(m.xs, w)
	m.base, m.bw, m.srcW, m.srcH = m.base[:0], 0, w, h // empty: no base
	m.gen, m.filled = 0, false
}

// fill is the code of the next filling step's fill v (kernels.FillCode).
func (m *maskMaps) fill(v uint8) int32 {
	m.gen++
	m.filled = m.filled || v != 0
	return kernels.FillCode(m.gen, v)
}

// RotateMasks moves the masks through a rotate step of angle about center
// (the canvas' unless hasCenter), growing the canvas with expand (nearest,
// fill where the canvas was not, as rotate_mask with the Mask's fill): the
// maps so far made into a canvas index (or read as one where the step
// samples through a grid: kernels.RotateMapsIndex), moved by the step as
// a plane, the base of identity maps.
func (t *Targets) RotateMasks(angle float64, center [2]float64, hasCenter, expand bool, fill uint8) {
	m := &t.mm
	w, h := len(m.xs), len(m.ys)
	ow, oh := w, h
	if expand {
		ow, oh = kernels.RotatedSize(w, h, angle, center, hasCenter)
	}
	m.canvasRoom(w*h, max(w*h, ow*oh))
	c := m.canvasMaps()
	var idx []int32
	idx, w, h, m.tmp = kernels.RotateMapsIndex(&c, m.spare, angle, center, hasCenter, expand, m.fill(fill), m.tmp)
	t.turned(idx, w, h)
}

// AffineMasks moves the masks through an affine step (nearest, with the
// Mask's fill, as affine_mask), as RotateMasks does.
func (t *Targets) AffineMasks(a *kernels.AffineParams, fill uint8) {
	m := &t.mm
	w, h := len(m.xs), len(m.ys)
	m.canvasRoom(w*h, w*h)
	c := m.canvasMaps()
	var idx []int32
	idx, m.tmp = kernels.AffineMapsIndex(&c, m.spare, a, m.fill(fill), m.tmp)
	t.turned(idx, w, h)
}

// PerspectiveMasks moves the masks through a perspective step (nearest,
// with the Mask's fill, as perspective_mask), coeffs the step's
// (kernels.PerspectiveCoeffs), as RotateMasks does.
func (t *Targets) PerspectiveMasks(coeffs *[8]float32, fill uint8) {
	m := &t.mm
	w, h := len(m.xs), len(m.ys)
	m.canvasRoom(w*h, w*h)
	idx := kernels.CanvasIndex(m.spare, m.base, m.bw, m.srcW, m.ys, m.xs)
	idx, m.tmp = kernels.PerspectiveIndex(idx, w, h, coeffs, m.fill(fill), m.tmp)
	t.turned(idx, w, h)
}

// canvasMaps are the maps the canvas index is made of: a turn reads it
// through them (kernels.RotateMapsIndex) where it does not make it.
func (m *maskMaps) canvasMaps() kernels.CanvasMaps {
	return kernels.CanvasMaps{Base: m.base, BW: m.bw, SrcW: m.srcW, Ys: m.ys, Xs: m.xs}
}

// canvasRoom gives the canvas indexes' scratch (spare, the canvas index
// made of the maps; tmp, the moved one) room for n and moved entries,
// allocated exactly when they grow (not by append's doubling), and, at a
// sample's first canvas, the three buffers let go when their largest two
// cannot serve: the memory budget bounds what a sample keeps by its
// canvas' pixels, so what is kept is at most what the last samples'
// bounds allowed or this one's.
func (m *maskMaps) canvasRoom(n, moved int) {
	if len(m.base) == 0 { // no canvas yet this sample: the largest two of the three serve, else two made exactly
		b := [3][]int32{m.spare, m.tmp, m.base}
		slices.SortFunc(b[:], func(x, y []int32) int { return cap(y) - cap(x) })
		if cap(b[0]) < max(n, moved) || cap(b[1]) < n {
			m.tmp, m.spare, m.base = make([]int32, 0, max(n, moved)), make([]int32, 0, n), nil
			return
		}
		m.tmp, m.spare, m.base = b[0], b[1], b[2][:0]
		return
	}
	if cap(m.spare) < n {
		m.spare = make([]int32, 0, n)
	}
	if cap(m.tmp) < max(n, moved) {
		m.tmp = make([]int32, 0, max(n, moved))
	}
}

// turned makes idx, the w x h canvas a rotate or affine left, the maps'
// base, under identity maps.
func (t *Targets) turned(idx []int32, w, h int) {
	m := &t.mm
	m.spare, m.base, m.bw = m.base, idx, w
	m.ys, m.xs = kernels.AxisIdentity(m.ys, h), kernels.AxisIdentity(m.xs, w)
}

// CropMasks crops the maps to the height x width canvas from (top,
// left), either of which may be negative (a pad's): what falls outside
// the canvas before is the fill, as torchvision's crop_mask (0) and
// pad_mask (the Mask's fill) make it.
func (t *Targets) CropMasks(top, left, height, width int, fill uint8) {
	m := &t.mm
	c := m.fill(fill)
	m.tmp = kernels.AxisCrop(m.tmp, m.ys, top, height, c)
	m.ys, m.tmp = m.tmp, m.ys
	m.tmp = kernels.AxisCrop(m.tmp, m.xs, left, width, c)
	m.xs, m.tmp = m.tmp, m.xs
}

// ResizeMasks is resize_mask (InterpolationMode.NEAREST) to height x width.
func (t *Targets) ResizeMasks(height, width int) {
	m := &t.mm
	m.tmp = kernels.AxisResize(m.tmp, m.ys, height)
	m.ys, m.tmp = m.tmp, m.ys
	m.tmp = kernels.AxisResize(m.tmp, m.xs, width)
	m.xs, m.tmp = m.tmp, m.xs
}

// CenterCropStart is where center_crop_mask's crop of c pixels starts on
// an axis of n (as center_crop_image, which pads first when c > n: the
// pad's (c - n) // 2 before; else its anchor round((n - c) / 2)).
func CenterCropStart(n, c int) int {
	if c > n {
		return -((c - n) / 2)
	}
	return int(math.RoundToEven(float64(n-c) / 2))
}

// FlipMasksX mirrors the masks left to right (horizontal_flip_mask).
func (t *Targets) FlipMasksX() { kernels.AxisFlip(t.mm.xs) }

// FlipMasksY mirrors the masks top to bottom (vertical_flip_mask).
func (t *Targets) FlipMasksY() { kernels.AxisFlip(t.mm.ys) }

// MaskCanvas is the masks' canvas so far: its width and height.
func (t *Targets) MaskCanvas() (w, h int) { return len(t.mm.xs), len(t.mm.ys) }

// ScratchBytes is what t holds of the masks' scratch, in bytes, in three
// parts: the source mask and its rows (src); the maps and, after a
// rotation or an affine, the canvas indexes (maps); the runs and the fill
// block's (runs). A worker's, counted in the server's memory budget (the
// pipeline's scratch.go).
func (t *Targets) ScratchBytes() (src, maps, runs int64) {
	m := &t.mm
	src = int64(cap(m.inst.Pix) + cap(m.inst.Rows))
	maps = 4*int64(cap(m.ys)+cap(m.xs)+cap(m.tmp)+cap(m.base)+cap(m.spare)) + m.tiles.Bytes()
	runs = 4*int64(cap(m.runs)+cap(m.lens)+cap(m.fillRuns)) + int64(cap(m.fillVals)+cap(m.fillRow))
	return src, maps, runs
}

// DropScratch lets the masks' scratch go (ScratchBytes is 0 after); the
// next StartMasks makes it again.
func (t *Targets) DropScratch() { t.mm = maskMaps{} }
