package targets

// The targets' encoding on the wire (docs/detection.md gives the layout);
// their sources are pipeline/dataset's (COCO's annotations, YOLO's label
// files: Instances).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// targetsMasks is the bit of the targets' header word (its format and P)
// that says the masks follow: set only for a job that asks for them.
const targetsMasks = 1 << 31

// targetsOverlap is the bit of the header word that says the overlap mask
// follows (AppendOverlap): set only for a job that asks for it.
const targetsOverlap = 1 << 30

// OverlapRatio is the overlap mask's downsample: ultralytics' Format's
// mask_ratio default (4).
const OverlapRatio = 4

// AppendTargets appends t's encoding, little-endian: u32 H, u32 W (the
// canvas), i64 image id, u32 K, u32 the boxes' format (its low byte) and
// P, the keypoints an instance (the bits above: P << 8); then K x 4
// float32 boxes, K int64 labels, K x P x 2 float32 keypoints (x, y), K
// uint8 crowd flags, K x P uint8 visibilities. The header is 24 bytes, so
// the boxes, labels and keypoints are aligned within it. A sample of a
// dataset without keypoints (P = 0) is 24 + 25K bytes, as before them.
func AppendTargets(b []byte, t *Targets) []byte {
	le := binary.LittleEndian
	k := len(t.Boxes)
	b = le.AppendUint32(b, uint32(t.H))
	b = le.AppendUint32(b, uint32(t.W))
	b = le.AppendUint64(b, uint64(t.ImageID))
	b = le.AppendUint32(b, uint32(k))
	word := uint32(t.Format) | uint32(t.P)<<8
	if t.WantMasks {
		word |= targetsMasks
	}
	if t.WantOverlap {
		word |= targetsOverlap
	}
	b = le.AppendUint32(b, word)
	for _, bx := range t.Boxes {
		for _, v := range bx {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	for _, l := range t.Labels {
		b = le.AppendUint64(b, uint64(l))
	}
	if t.P > 0 {
		for _, p := range t.Points {
			b = le.AppendUint32(b, math.Float32bits(p[0]))
			b = le.AppendUint32(b, math.Float32bits(p[1]))
		}
	}
	b = append(b, t.Crowd...)
	if t.P > 0 {
		b = append(b, t.Vis...)
	}
	return b
}

// AppendMasks appends t's masks on its W x H canvas: each instance's
// source mask sampled through the maps (kernels.MaskRunsExtent), after the
// targets' other bytes padded with zeros to a multiple of 4 (base is
// where the targets start in b): K u32 run counts, then every instance's
// runs (u32), row-major over the canvas from a run of 0, a fill's pixels
// 0. Where a pad, a rotate or an affine filled pixels with a Mask fill
// other than 0, the fill block follows (none else: the bytes of masks
// filled with 0): u32 N, N u32 runs (kernels.FillRuns: alternating the
// masks' own pixels and a fill's, from the masks' own), then each fill
// run's value (a byte, N/2 of them) and zeros to a multiple of 4; every
// instance's mask takes those values there. limit bounds the
// targets' bytes: past it the sample fails (dataset.TargetsTooLarge, which
// the field set words as its field over the bound) before more is made.
//
// An instance's work is its extent (its source's set pixels' bounding
// box, and the output's pixels that can come from it) and the canvas'
// rows and columns, not the canvas' pixels;
// the sample's, summed over its instances, is bounded by
// MaxInstancePixels (past it the sample fails, ErrTooLarge, at the
// instance that passed it); and stop (nil: never) is asked before each instance,
// ErrStopped returned when it says so: an abandoned sample (a lease out
// of time, a job closed, the server stopping) stops within one instance.
func (t *Targets) AppendMasks(b []byte, base int, limit int64, stop func() bool) ([]byte, error) {
	m := &t.mm
	if len(m.ys) != t.H || len(m.xs) != t.W || len(t.Masks) != len(t.Boxes) {
		return b, fmt.Errorf("targets: %d masks on a %dx%d canvas for %d boxes on %dx%d", len(t.Masks), len(m.xs), len(m.ys), len(t.Boxes), t.W, t.H)
	}
	for (len(b)-base)%4 != 0 {
		b = append(b, 0)
	}
	size := int64(len(b)-base) + 4*int64(len(t.Masks))
	m.runs, m.lens = m.runs[:0], m.lens[:0]
	m.tiles.Reset()
	if len(m.base) > 0 && len(t.Masks) > 1 { // an instance alone walks the canvas: the tiles would cost as much
		m.tiles.Build(m.base, m.bw, m.srcW, m.ys, m.xs)
	}
	var work int64
	for k := range t.Masks {
		if stop != nil && stop() {
			return b, ErrStopped
		}
		r := &t.Masks[k]
		if r.H != m.srcH || r.W != m.srcW {
			return b, fmt.Errorf("targets: instance %d's mask is %dx%d, the source %dx%d", k, r.W, r.H, m.srcW, m.srcH)
		}
		if !m.inst.Decode(r.Counts, r.H, r.W) {
			return b, fmt.Errorf("targets: instance %d's mask: runs that do not cover %dx%d", k, r.W, r.H)
		}
		n := len(m.runs)
		var looked int64
		m.runs, looked = kernels.MaskRunsExtent(m.runs, &m.inst, m.srcW, m.base, m.bw, &m.tiles, m.ys, m.xs)
		m.lens = append(m.lens, uint32(len(m.runs)-n))
		if size += 4 * int64(len(m.runs)-n); size > limit {
			return b, &dataset.TargetsTooLarge{At: size}
		}
		if work += m.inst.Pixels() + looked + int64(t.W+t.H); work > maxInstancePixels {
			return b, fmt.Errorf("%w: targets: the instance masks' work reached %d pixels by instance %d of %d (each instance's extent in the %dx%d source, the output pixels it can reach and the rows and columns of the %dx%d canvas), over the bound of %d a sample",
				errs.TooLarge, work, k+1, len(t.Masks), m.srcW, m.srcH, t.W, t.H, maxInstancePixels)
		}
	}
	m.fillRuns, m.fillVals = m.fillRuns[:0], m.fillVals[:0]
	if m.filled {
		m.fillRuns, m.fillVals, m.fillRow = kernels.FillRuns(m.fillRuns, m.fillVals, m.fillRow, m.base, m.bw, m.ys, m.xs)
		if len(m.fillRuns) > 0 {
			if size += FillBlockSize(len(m.fillRuns)); size > limit {
				return b, &dataset.TargetsTooLarge{At: size}
			}
		}
	}
	le := binary.LittleEndian
	for _, n := range m.lens {
		b = le.AppendUint32(b, n)
	}
	for _, r := range m.runs {
		b = le.AppendUint32(b, r)
	}
	if len(m.fillRuns) > 0 {
		b = le.AppendUint32(b, uint32(len(m.fillRuns)))
		for _, r := range m.fillRuns {
			b = le.AppendUint32(b, r)
		}
		b = append(b, m.fillVals...)
		for (len(b)-base)%4 != 0 {
			b = append(b, 0)
		}
	}
	return b, nil
}

// MaxInstancePixels bounds a sample's instance masks' work
// (AppendMasks): the pixels of its instances' extents and the output
// pixels each can reach, summed, about 2 s of a core at the kernels' few
// ns a pixel. COCO's densest images (a few hundred instances on a
// 1024 x 1024 canvas, each a small share of it) stay far below; an image
// of a thousand instances each the size of a 2000 x 2000 canvas is past it
// by its 64th.
const MaxInstancePixels = 1 << 28

// maxInstancePixels is the bound AppendMasks holds to: MaxInstancePixels
// (a test's own, smaller, to reach it in milliseconds).
var maxInstancePixels int64 = MaxInstancePixels

// ErrStopped is AppendMasks' answer when its stop said the sample was
// abandoned.
var ErrStopped = errors.New("targets: the masks stopped: the sample was abandoned")

// FillBlockSize is the bytes of a fill block of n runs (AppendMasks): N,
// the runs, and their n/2 values padded to a multiple of 4.
func FillBlockSize(n int) int64 {
	return 4 + 4*int64(n) + (int64(n/2)+3)/4*4
}

// TargetsSize is the bytes AppendTargets writes for k instances of p
// keypoints each.
func TargetsSize(k, p int) int64 {
	return dataset.TargetsHeader + int64(k)*(16+8+1) + int64(k)*int64(p)*(8+1)
}

// OverlapMaskSize is the bytes of the overlap mask of k instances on a w x
// h canvas after the targets (padded to a multiple of 4 each side): one
// byte a pixel of its w/4 x h/4 map, four past 255 instances.
func OverlapMaskSize(w, h, k int) int64 { return MaskSize(w, h, k, OverlapRatio, true) }

// MaskSize is the bytes of ultralytics' Format mask of k instances on a w
// x h canvas at mask_ratio ratio after the targets (padded to a multiple
// of 4): with overlap one byte a pixel of its w/ratio x h/ratio map, four
// past 255 instances; without, k such masks, a bit a pixel
// (cv.PolygonMaskBits).
func MaskSize(w, h, k, ratio int, overlap bool) int64 {
	if !overlap {
		return cv.PolygonMaskBits(w, h, k, ratio)
	}
	n := int64(w/ratio) * int64(h/ratio)
	if k > 255 {
		n *= 4
	}
	return (n + 3) / 4 * 4
}

// AppendOverlap appends t's encoding with ultralytics' Format(return_mask=True,
// mask_ratio=ratio, mask_overlap=overlap) mask. With overlap, the overlap
// mask: its instances ordered as polygons2masks_overlap orders them (by
// their masks' area, largest first: Format's instances[sorted_idx] and
// cls[sorted_idx]), then, after zeros to a multiple of 4, the map
// (cv.PolygonsToMasksOverlap of the segments on the W x H canvas),
// row-major, uint8 (int32 little-endian past 255 instances, as
// ultralytics), and zeros to a multiple of 4. Without, polygons2masks'
// one mask an instance, the instances in their order, after zeros to a
// multiple of 4: cv.AppendPolygonMasks' bits. A ratio past the canvas'
// smaller side (a mask of no pixels) is refused, as ultralytics' Format
// refuses it. limit bounds the bytes (TargetsTooLarge).
func (t *Targets) AppendOverlap(b []byte, ratio int, overlap bool, limit int64) ([]byte, error) {
	k := len(t.Boxes)
	if len(t.Segments) != k {
		return b, fmt.Errorf("%w: overlap_mask: %d instances with %d polygons: the overlap mask needs a segment dataset's polygons for every instance", errs.Unsupported, k, len(t.Segments))
	}
	if ratio < 1 || ratio > min(t.W, t.H) {
		return b, fmt.Errorf("%w: overlap_mask: mask_ratio=%d downsamples the %dx%d canvas to zero size; use mask_ratio <= %d", errs.Unsupported, ratio, t.W, t.H, min(t.W, t.H))
	}
	size := (TargetsSize(k, t.P)+3)/4*4 + MaskSize(t.W, t.H, k, ratio, overlap)
	if size > limit {
		return b, &dataset.TargetsTooLarge{At: size}
	}
	base := len(b)
	if !overlap {
		b = AppendTargets(b, t)
		for (len(b)-base)%4 != 0 {
			b = append(b, 0)
		}
		return cv.AppendPolygonMasks(b, t.Segments, t.W, t.H, ratio), nil
	}
	m, order := cv.PolygonsToMasksOverlap(t.Segments, t.W, t.H, ratio)
	t.reorder(order)
	b = AppendTargets(b, t)
	for (len(b)-base)%4 != 0 {
		b = append(b, 0)
	}
	if k > 255 {
		for _, v := range m {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	} else {
		for _, v := range m {
			b = append(b, uint8(v))
		}
	}
	for (len(b)-base)%4 != 0 {
		b = append(b, 0)
	}
	return b, nil
}

// reorder puts t's instances (boxes, labels, crowd flags, keypoints,
// segments) in order: the n-th is the order[n]-th before.
func (t *Targets) reorder(order []int) {
	boxes := append([][4]float32(nil), t.Boxes...)
	labels := append([]int64(nil), t.Labels...)
	crowd := append([]uint8(nil), t.Crowd...)
	pts := append([][2]float32(nil), t.Points...)
	vis := append([]uint8(nil), t.Vis...)
	segs := append([][][2]float32(nil), t.Segments...)
	for n, k := range order {
		t.Boxes[n], t.Labels[n], t.Crowd[n], t.Segments[n] = boxes[k], labels[k], crowd[k], segs[k]
		if t.P > 0 {
			copy(t.Points[n*t.P:(n+1)*t.P], pts[k*t.P:(k+1)*t.P])
			copy(t.Vis[n*t.P:(n+1)*t.P], vis[k*t.P:(k+1)*t.P])
		}
	}
}
