package pipeline

// Mosaic: ultralytics' (8.4.190) Mosaic of 4 or 9 images, the sample's
// own and partners drawn from the dataset, as a geometry op: each image
// resized as BaseDataset.load_image resizes it (its long side to imgsz,
// cv2.INTER_LINEAR), laid out around a drawn centre on a canvas of 114,
// its labels moved by its tile's padding, concatenated, clipped to the
// canvas and the boxes of no area dropped (Mosaic._cat_labels). Its output
// is ultralytics' mosaic: 2*imgsz a side. The kernels are
// pipeline/kernels/cv's (MosaicLayout, MosaicImage, MosaicInstances); the
// partners' bytes are read by the executor in the sample's lease
// (decode_multi.go).
//
// Partners are read, not consumed: their indices are cv.Partners of the
// sample's key (the seed, epoch, index, view and copy) on a stream of
// their own, uniform over the dataset, so the epoch's plan is untouched
// (every index is still the primary sample exactly once an epoch) and a
// sample's mosaic is the same on any topology and across a resume.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// OpMosaic is ultralytics' Mosaic (imgsz, n, p).
const OpMosaic OpKind = "Mosaic"

func init() {
	defineOp(opDef{kind: OpMosaic, doc: "ultralytics' Mosaic: the image and n-1 partners drawn from the dataset, each resized to imgsz on its long side, tiled around a random centre on a 2*imgsz canvas of 114",
		named: true, geometry: true, targets: targetsMove, stays: true,
		params: []param{
			{name: "imgsz", typ: pInt, def: "640", field: "Imgsz", lo: 32, hi: maxSide / 2},
			{name: "p", typ: pFloat, def: "1.0", field: "P", lo: 0, hi: 1},
			{name: "n", typ: pInt, def: "4", field: "Tiles", lo: 4, hi: 9},
		},
		misplaced: "Mosaic after other ops is not supported: it is the geometry, first, fused into the decode",
		masks:     func(*Op) error { return fmt.Errorf("%w: masks do not follow Mosaic yet", ErrUnsupported) },
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(imgsz=%d, p=%g, n=%d)", op.Imgsz, op.P, op.Tiles)
		}})
}

// checkMosaic checks a Mosaic's arguments beyond the schema: n is 4 or 9,
// imgsz within the output bound, p 1 (a mosaic not drawn leaves the image
// at its load_image size, which only a YOLO RandomPerspective after it
// could take: not yet).
func checkMosaic(op *Op, n int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: Mosaic: %s", ErrUnsupported, fmt.Sprintf(format, a...))
	}
	switch {
	case n > 0:
		return bad("it must be the first op (the geometry)")
	case op.Tiles != 4 && op.Tiles != 9:
		return bad("n=%d: want 4 or 9", op.Tiles)
	case op.Imgsz < 32 || 2*op.Imgsz > maxSide:
		return bad("imgsz=%d: want 32..%d", op.Imgsz, maxSide/2)
	case op.P != 1:
		return bad("p=%g: only p=1 is supported (a sample left unmosaicked keeps its load_image size, which the batch cannot take)", op.P)
	}
	return nil
}

// mosaicDraw is what one sample's Mosaic drew: its partners (the sample
// itself first), each image's load_image size (w, h), the centre and the
// tiles.
type mosaicDraw struct {
	n, imgsz int
	idx      []int
	sizes    [][2]int
	xc, yc   int
	tiles    []cv.Tile
}

// mosaicPartners appends to buf the partner indices (n-1 of them) of the
// sample of key k in a dataset of size len, for t's Mosaic at k's epoch;
// nil when t has none then. The sample's view and copy are in k: each
// view and each repeated copy has its own partners.
func (t *Transform) mosaicPartners(k Key, size int, buf []int) []int {
	t = t.AtEpoch(k.Epoch)
	if t.mosaic == nil || size < 1 {
		return nil
	}
	buf = append(buf[:0], make([]int, t.mosaic.Tiles-1)...)
	cv.Partners(k, cv.MosaicStream, size, buf)
	return buf
}

// mosaicCentre is Mosaic.get_params' draw for n = 4: yc, then xc, each
// int(random.uniform(-border, 2*imgsz + border)) with border -imgsz//2
// (Python's floor division), from the geometry's stream. 9 draws nothing.
func (t *Transform) mosaicCentre(k Key) (xc, yc int) {
	if t.mosaic.Tiles != 4 {
		return 0, 0
	}
	s := t.mosaic.Imgsz
	border := -((s + 1) / 2) // -s // 2
	r := k.Stream(streamCrop)
	lo, hi := float64(-border), float64(2*s+border)
	yc = int(r.Uniform(lo, hi))
	xc = int(r.Uniform(lo, hi))
	return xc, yc
}

// appendJSON appends the mosaic's trace entry: ["mosaic", {n, imgsz,
// indexes (the sample's first, then its partners), sizes ((w, h) each, as
// load_image resized it), xc, yc}].
func (m *mosaicDraw) appendJSON(b []byte) []byte {
	b = append(b, `["mosaic",{"n":`...)
	b = strconv.AppendInt(b, int64(m.n), 10)
	b = append(b, `,"imgsz":`...)
	b = strconv.AppendInt(b, int64(m.imgsz), 10)
	b = append(b, `,"indexes":`...)
	b = appendList(b, len(m.idx), func(b []byte, i int) []byte { return strconv.AppendInt(b, int64(m.idx[i]), 10) })
	b = append(b, `,"sizes":`...)
	b = appendList(b, len(m.sizes), func(b []byte, i int) []byte {
		return appendList(b, 2, func(b []byte, j int) []byte { return strconv.AppendInt(b, int64(m.sizes[i][j]), 10) })
	})
	b = append(b, `,"xc":`...)
	b = strconv.AppendInt(b, int64(m.xc), 10)
	b = append(b, `,"yc":`...)
	b = strconv.AppendInt(b, int64(m.yc), 10)
	return append(b, "}]"...)
}
