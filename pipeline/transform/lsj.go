package transform

// Large-scale jitter (the Copy-Paste paper's LSJ, torchvision's detection
// references' "lsj" recipe): ScaleJitter then FixedSizeCrop, fused into
// the decode. Drawn in float32 as torch.rand and its products with Python
// numbers are: every product rounded to float32 before it is used.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// MaxJitter bounds ScaleJitter's scale_range: at most 16 times the target
// size (torchvision's default is (0.1, 2)).
const MaxJitter = 16

// The places of ScaleJitter and FixedSizeCrop in the geometry (placer):
// ScaleJitter first, then FixedSizeCrop right after it; FixedSizeCrop
// first, or after the ScaleJitter; no geometry op after FixedSizeCrop.
func init() {
	definePlacer(OpScaleJitter, placeAt(placeScaleJitter).followedBy(afterScaleJitter).needing(scaleJitterNeeds))
	definePlacer(OpFixedSizeCrop, placeAt(placeFixedSizeCrop).followedBy(afterFixedSizeCrop))
}

// placeScaleJitter checks a ScaleJitter, the geometry's op n (t.jitter).
func placeScaleJitter(t *Transform, op *optab.Op, n int) error {
	if n > 0 {
		return misplaced(op, n)
	}
	if err := checkSize(op, false); err != nil {
		return err
	}
	if s := optab.ArgsOf[ScaleJitterArgs](op).Scale; !(s[0] > 0 && s[0] <= s[1] && s[1] <= MaxJitter) {
		return transformErr("ScaleJitter scale_range %v: want 0 < min <= max <= %d", s, MaxJitter)
	}
	t.jitter = op
	return nil
}

// afterScaleJitter is ScaleJitter's rule for the geometry's ops after it:
// FixedSizeCrop next.
func afterScaleJitter(t *Transform, op *optab.Op, _ int) error {
	if t.fixed == nil && op.Kind != OpFixedSizeCrop {
		return scaleJitterNeeds(t)
	}
	return nil
}

// scaleJitterNeeds refuses a ScaleJitter with no FixedSizeCrop after it.
func scaleJitterNeeds(t *Transform) error {
	if t.fixed == nil {
		return transformErr("ScaleJitter gives a size that varies per image: follow it with FixedSizeCrop, which fixes the batch's size")
	}
	return nil
}

// placeFixedSizeCrop checks a FixedSizeCrop, the geometry's op n (t.fixed),
// and sets the output size: its own.
func placeFixedSizeCrop(t *Transform, op *optab.Op, n int) error {
	if n > 0 && t.jitter == nil {
		return misplaced(op, n)
	}
	if err := checkSize(op, false); err != nil {
		return err
	}
	if err := checkPadding(op, [4]int{}); err != nil {
		return err
	}
	t.fixed = op
	t.geom, t.outH, t.outW = CropResize, op.Size[0], op.Size[1]
	if t.jitter != nil {
		t.geom = ResizeCrop
	}
	return nil
}

// afterFixedSizeCrop refuses every geometry op after a FixedSizeCrop.
func afterFixedSizeCrop(_ *Transform, op *optab.Op, n int) error {
	return transformErr("op %d (%s) after FixedSizeCrop is not supported: the geometry is ScaleJitter (if any) then FixedSizeCrop", n, op.Kind)
}

// jitterSize is ScaleJitter.make_params for a w x h image: the scale
// lo + u * (hi - lo) (u a 24-bit uniform, in float32 as torch.rand's
// tensor), r = float32(min(tH / h, tW / w)) * scale, each side
// int(side * r) in float32.
func jitterSize(r *det.RNG, op *optab.Op, w, h int) (nw, nh int) {
	u := r.Float32()
	sr := optab.ArgsOf[ScaleJitterArgs](op).Scale
	lo, hi := sr[0], sr[1]
	scale := float32(lo) + float32(u*float32(hi-lo))
	base := min(float64(op.Size[0])/float64(h), float64(op.Size[1])/float64(w))
	f := float32(float32(base) * scale)
	return int(float32(float32(w) * f)), int(float32(float32(h) * f))
}

// fixedOffset is FixedSizeCrop's draw on a w x h image: one uniform r,
// top int((h - height) * r) and left int((w - width) * r) in float32
// where the image is larger (0 where it is not).
func fixedOffset(r *det.RNG, op *optab.Op, w, h int) (top, left int) {
	u := r.Float32()
	return int(float32(float32(max(h-op.Size[0], 0)) * u)), int(float32(float32(max(w-op.Size[1], 0)) * u))
}

// lsjPlan plans ScaleJitter (if any) and FixedSizeCrop: the image resized
// to rw x rh (resizeCrop; not resized: cropResize), its window at (cx, cy)
// of at most the crop's size decoded, padded on the right and bottom with
// the fill (padded, vis) where it is smaller than the crop. Each op draws
// from a stream of its own.
func (t *Transform) lsjPlan(p *SamplePlan, k det.Key) error {
	w, h := p.SrcW, p.SrcH
	if t.jitter != nil {
		r := k.Stream(StreamCrop)
		w, h = jitterSize(&r, t.jitter, p.SrcW, p.SrcH)
		if w < 1 || h < 1 {
			return fmt.Errorf("%w: ScaleJitter resizes the %dx%d image to %dx%d: a side of 0 pixels (torchvision's resize fails too)",
				errs.Unsupported, p.SrcW, p.SrcH, w, h)
		}
		p.RW, p.RH = w, h // at most maxSide * maxJitter a side
	}
	r := k.Stream(streamFixed)
	top, left := fixedOffset(&r, t.fixed, w, h)
	ch, cw := t.fixed.Size[0], t.fixed.Size[1]
	p.CX, p.CY, p.CW, p.CH = left, top, cw, ch
	p.RCFill = optab.FillOf(t.fixed).Fill
	if w < cw || h < ch { // padded on the right and bottom
		p.Padded, p.Vis = true, true
		p.vx, p.vy, p.VW, p.VH = left, top, min(w, cw), min(h, ch)
		p.PadL, p.PadT = 0, 0
	}
	return nil
}

// streamFixed is FixedSizeCrop's RNG stream: a child of the geometry's, as
// streamZoom, so that a ScaleJitter before it keeps stream 1.
const streamFixed = StreamCrop*64 + 4

// lsjSteps are the plan's ScaleJitter and FixedSizeCrop as functional
// ops: resize to the drawn size, then fixed_size_crop.
func (t *Transform) lsjSteps(p *SamplePlan, buf []fn.Step) []fn.Step {
	w, h := p.SrcW, p.SrcH
	if t.jitter != nil {
		st := fn.Step{Fn: fn.Resize, Interp: p.Interp, Antialias: p.Antialias, I: [6]int{4: p.RH, 5: p.RW}}
		buf = append(buf, st)
		w, h = p.RW, p.RH
	}
	ch, cw := t.fixed.Size[0], t.fixed.Size[1]
	return append(buf, fn.Step{Fn: fn.FixedSizeCrop, I: [6]int{p.CY, p.CX, min(h, ch), min(w, cw), ch, cw}, Fill: optab.FillOf(t.fixed).Fill})
}

// Per-sample sizes: a transform whose geometry is a RandomShortestSize
// with a max_size and no CenterCrop after it (t.vary). Each sample is
// made at its own size, then padded with zeros on the right and bottom
// to the bound, outH x outW (padCorner), its size after it (sizeTrailer):
// the slot every buffer, budget and ring counts, which every maker (a
// peer too) sends and a verified peer's is compared by. A batch is sent
// padded to its largest sample instead (PackSizes), as DETR's
// nested_tensor_from_tensor_list pads it, the sizes beside it.

// SizeTrailer is the bytes after a sample of per-sample size: its height
// and width, then its image's as decoded (BatchHeader.source_sizes:
// AnyRes's image_sizes, DETR's orig_size), u32 little-endian each.
const SizeTrailer = 16

// CompactOut is where a w x h sample is made in its slot (which starts
// slot): all of it, or of per-sample sizes its start, compact.
func (t *Transform) CompactOut(slot []byte, w, h int) []byte {
	px := slot[:t.viewBytes()]
	if t.vary {
		px = px[:len(px)-SizeTrailer]
	}
	return px[:len(px)/(t.outW*t.outH)*w*h]
}

// padSample spreads a w x h sample made compact at the start of out (its
// slot: viewBytes) to the bound and writes its size after it, and its
// image's, srcW x srcH.
func (t *Transform) padSample(out []byte, w, h, srcW, srcH int) {
	px := out[:len(out)-SizeTrailer]
	PadCorner(px, w, h, t.outW, t.outH, len(px)/(3*t.outW*t.outH), t.layout)
	putTrailer(out, w, h, srcW, srcH)
}

// putTrailer writes a sample's trailer at the end of its slot: its size
// (h, w), its image's (srcH, srcW).
func putTrailer(slot []byte, w, h, srcW, srcH int) {
	tr := slot[len(slot)-SizeTrailer:]
	binary.LittleEndian.PutUint32(tr, uint32(h))
	binary.LittleEndian.PutUint32(tr[4:], uint32(w))
	binary.LittleEndian.PutUint32(tr[8:], uint32(srcH))
	binary.LittleEndian.PutUint32(tr[12:], uint32(srcW))
}

// SourceSizes is each of n samples' image's size as decoded (h, w), from
// the trailers of a batch of per-sample sizes (its first view of them),
// before it is packed (PackSizes, PackRaggedViews); nil of one size.
func (t *Transform) SourceSizes(data []byte, n int) [][2]int {
	for v := range t.Views() {
		vt := t.View(v)
		if !vt.vary {
			continue
		}
		l, out := t.vlayout, make([][2]int, n)
		for i := range n {
			tr := data[l.Offset(n, v, i):][:l.Bytes(v)]
			tr = tr[len(tr)-SizeTrailer:]
			out[i] = [2]int{int(binary.LittleEndian.Uint32(tr[8:])), int(binary.LittleEndian.Uint32(tr[12:]))}
		}
		return out
	}
	return nil
}

// checkResize checks a Resize, RandomShortestSize or RandomResize, the
// geometry's op n.
func (t *Transform) checkResize(op *optab.Op, n int) error {
	switch op.Kind {
	case OpResize:
		return checkSize(op, true)
	case OpRandomShortestSize:
		a := optab.ArgsOf[ShortestSizeArgs](op)
		sizes := a.MinSize
		if len(sizes) == 0 || len(sizes) > 256 {
			return transformErr("RandomShortestSize min_size of %d sizes: want 1 to 256", len(sizes))
		}
		for _, s := range sizes {
			if s < 1 || s > optab.MaxSide {
				return transformErr("RandomShortestSize min_size %v: sides must be in 1..%d", sizes, optab.MaxSide)
			}
		}
		if a.MaxSize < 0 || a.MaxSize > optab.MaxSide {
			return transformErr("RandomShortestSize max_size %d: want 1..%d (0: None)", a.MaxSize, optab.MaxSide)
		}
	case OpRandomResize:
		if a := optab.ArgsOf[RandomResizeArgs](op); a.MinSize < 1 || a.MinSize >= a.MaxSize || a.MaxSize > optab.MaxSide+1 {
			return transformErr("RandomResize min_size, max_size %v: want 1 <= min_size < max_size <= %d", []int{a.MinSize, a.MaxSize}, optab.MaxSide+1)
		}
	}
	if n > 0 {
		return transformErr("%s must come first (before a CenterCrop, if any): its size is drawn on the image", op.Kind)
	}
	return nil
}

// varySize sets the output of a geometry that resizes without a crop
// after it: RandomShortestSize with a max_size makes each sample its own
// size, at most max_size a side. The others are refused: their size has
// no bound a batch's memory could be counted by.
func (t *Transform) varySize() error {
	op := t.resize
	switch {
	case op.Kind == OpRandomShortestSize:
		if m := optab.ArgsOf[ShortestSizeArgs](op).MaxSize; m > 0 {
			t.geom, t.vary, t.varyGeom, t.outH, t.outW = ResizeCrop, true, true, m, m
			return nil
		}
		return fmt.Errorf("%w: transform: RandomShortestSize without max_size gives sizes without a bound (the batch's memory is counted at the largest): give max_size, or a CenterCrop after it", errs.Unsupported)
	case op.Kind == OpRandomResize:
		return fmt.Errorf("%w: transform: RandomResize gives sizes without a bound (its longer side follows the image's aspect): follow it with a CenterCrop, or use RandomShortestSize with a max_size", errs.Unsupported)
	}
	return fmt.Errorf("%w: transform: Resize(%d) of the shorter side gives a size that varies per image without a bound; add CenterCrop, give Resize both sides, or use RandomShortestSize with a max_size", errs.Unsupported, op.Size[0])
}

// checkVaryOps refuses, after a geometry of per-sample sizes, the ops
// compiled for one size (their Def's OneSize: the policies), inside
// containers too; after a rotation of the image whole, growWhole refuses
// those that run before a Resize((h, w)) or CenterCrop fixes the size.
func (t *Transform) checkVaryOps(ops []optab.Op) error {
	if !t.vary || t.whole { // the image whole: a Resize((h, w)) or CenterCrop fixes it (growWhole)
		return nil
	}
	for i := range ops {
		if d := optab.Lookup(ops[i].Kind); d != nil && d.OneSize {
			return fmt.Errorf("%w: transform: %s after a geometry of per-sample sizes (a RandomShortestSize's, a processor's resize, a rotation with expand=True first) is not supported: it is compiled for one size", errs.Unsupported, ops[i].Kind)
		}
		if err := t.checkVaryOps(ops[i].Ops); err != nil {
			return err
		}
	}
	return nil
}

// Varies reports whether each sample has its own size (at most Size()).
func (t *Transform) Varies() bool { return t.vary }

// ResizeSize is the plan's drawn size for a RandomShortestSize or
// RandomResize (its stream: the geometry's), torchvision's make_params:
// RandomShortestSize's r = min(min_size / shorter, max_size / longer) in
// float64 as Python's, each side int(side * r); RandomResize's shorter
// side a uniform integer in [min_size, max_size), as Resize(int).
func ResizeSize(op *optab.Op, k det.Key, w, h int) (rw, rh int) {
	r := k.Stream(StreamCrop)
	if op.Kind == OpRandomResize {
		a := optab.ArgsOf[RandomResizeArgs](op)
		s := a.MinSize + r.Intn(a.MaxSize-a.MinSize)
		return ResizedSize(w, h, [2]int{s, 0})
	}
	a := optab.ArgsOf[ShortestSizeArgs](op)
	s := a.MinSize[r.Intn(len(a.MinSize))]
	f := float64(s) / float64(min(w, h))
	if a.MaxSize > 0 {
		f = min(f, float64(a.MaxSize)/float64(max(w, h)))
	}
	return int(float64(w) * f), int(float64(h) * f)
}

// PadCorner spreads a w x h sample made compact at the start of out (3
// channels of elem bytes, in layout) to its place in a bw x bh one, the
// rest zeros. It works from the last row back, so no row is overwritten
// before it has moved.
func PadCorner(out []byte, w, h, bw, bh, elem int, layout Layout) {
	planes, rw, brw := 3, w*elem, bw*elem
	if layout == HWC {
		planes, rw, brw = 1, 3*w*elem, 3*bw*elem
	}
	for c := planes - 1; c >= 0; c-- {
		for y := h - 1; y >= 0; y-- {
			src, dst := (c*h+y)*rw, (c*bh+y)*brw
			copy(out[dst:dst+rw], out[src:src+rw])
			clear(out[dst+rw : dst+brw])
		}
		clearDirty(out[(c*bh+h)*brw : (c+1)*bh*brw])
	}
}

// zeroPage is what clearDirty compares with.
var zeroPage [4096]byte

// clearDirty zeroes b, writing only the pages of it that are not zero
// already: below a sample in a slot of a generous bound (SmartResize's, a
// detection recipe's) most of it is still zero from the slot's last
// sample, and reading a page costs less than writing it.
func clearDirty(b []byte) {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if string(b[:n]) != string(zeroPage[:n]) {
			clear(b[:n])
		}
		b = b[n:]
	}
}

// PackSizes packs n samples of a transform of per-sample sizes, each in
// its slot of SampleBytes (padded to the bound, its size after it), into
// n samples padded to the largest height and width among them, in place:
// it returns that size (bh, bw), each sample's (h, w) and the packed
// data[:n*3*bh*bw] (times 4 of float32). Each sample's rows move towards
// the start, so none is overwritten before it has moved. A size past the
// bound (a peer's lie: the server checks what a verified peer sends, not
// every peer's) is taken as the bound.
func (t *Transform) PackSizes(data []byte, n int) (bh, bw int, sizes [][2]int, packed []byte) {
	slot := t.SampleBytes()
	sizes = make([][2]int, n)
	for i := range n {
		tr := data[(i+1)*slot-SizeTrailer:]
		h, w := int(binary.LittleEndian.Uint32(tr)), int(binary.LittleEndian.Uint32(tr[4:]))
		sizes[i] = [2]int{min(h, t.outH), min(w, t.outW)}
		bh, bw = max(bh, sizes[i][0]), max(bw, sizes[i][1])
	}
	elem := 1
	if t.norm != nil {
		elem = 4
	}
	planes, rw, brw, rows, brows := 3, t.outW*elem, bw*elem, t.outH, bh
	if t.layout == HWC {
		planes, rw, brw = 1, 3*t.outW*elem, 3*bw*elem
	}
	bslot := planes * brows * brw
	for i := range n {
		for c := range planes {
			for y := range brows {
				src, dst := i*slot+(c*rows+y)*rw, i*bslot+(c*brows+y)*brw
				copy(data[dst:dst+brw], data[src:src+brw])
			}
		}
	}
	return bh, bw, sizes, data[:n*bslot]
}

// SampleSize is the size of p's sample: its own of a transform of
// per-sample sizes, else the transform's.
func (t *Transform) SampleSize(p *SamplePlan) (w, h int) {
	if t.vary || t.geomW > 0 { // of ops that grow it: the geometry's
		return p.OutW, p.OutH
	}
	return t.outW, t.outH
}

// FixedSizeCrop's boxes (large-scale jitter, lsj.go), as torchvision's
// FixedSizeCrop moves a tv_tensors.BoundingBoxes, in float32.

// The bound on per-sample sizes of a geometry that keeps the image's own
// size or a part of it: the detection references' recipes that do not
// resize (hflip: no geometry op; ssdlite and ssd: a RandomIoUCrop, after a
// RandomZoomOut for ssd, with no Resize after it). Nothing in their ops
// bounds a sample, so the job gives the bound (TransformSpec.max_size), or
// the dataset does where it lists its images' sizes (NewTransformData);
// each sample is then made at its own size into a slot of the bound, as
// RandomShortestSize's are (lsj.go), and one past the bound fails.

// NewTransformBound is NewTransform with a bound on a sample's size,
// (height, width), for the recipes whose geometry keeps the image's own
// size or a part of it (no geometry op; a RandomIoUCrop, after a
// RandomZoomOut if any, without a Resize): each sample is its own size,
// at most the bound, and a sample past it fails. A zero bound is none;
// a transform whose size is fixed, or bounded by its ops, ignores it.
func NewTransformBound(layout Layout, bound [2]int, ops ...optab.Op) (*Transform, error) {
	return newTransform(layout, bound, "", ops...)
}

// NewTransformData is NewTransform for a dataset whose images are at most
// w x h (COCO's annotations list every image's size): the bound on a
// sample's size, where the geometry needs one, is that size times what
// the ops grow it by (DataBound). A sample past it (a file larger than
// its annotation says) fails, naming the bound's source.
func NewTransformData(layout Layout, w, h int, ops ...optab.Op) (*Transform, error) {
	if w < 1 || h < 1 {
		return NewTransform(layout, ops...)
	}
	b := DataBound(ops, w, h)
	return newTransform(layout, b, fmt.Sprintf("the dataset's largest image, %dx%d in its annotations, times the ops' growth", w, h), ops...)
}

// checkBoundArg checks a bound given: none, or 1..MaxSide a side.
func checkBoundArg(bound [2]int) error {
	if bound != [2]int{} && (bound[0] < 1 || bound[1] < 1 || bound[0] > optab.MaxSide || bound[1] > optab.MaxSide) {
		return fmt.Errorf("%w: transform: max_size %dx%d (height x width): want 1..%d a side", errs.Unsupported, bound[0], bound[1], optab.MaxSide)
	}
	return nil
}

// boundSize sets the output of a geometry that keeps the image's own size
// (own: no geometry op) or a part of it (what, a RandomIoUCrop without a
// Resize): each sample is its own size, at most the job's bound
// (t.bound, NewTransformBound), past which a sample fails (checkBound).
// Without a bound it is refused: nothing else bounds the source images.
func (t *Transform) boundSize(what string) error {
	if t.bound == [2]int{} {
		return fmt.Errorf("%w: transform: %s keeps each image's own size (or a crop of it), which no op bounds: "+
			"follow it with Resize((h, w)), or give the job a bound on the sizes, max_size=(h, w) (the batch's memory is counted at it)", errs.Unsupported, what)
	}
	t.geom, t.vary, t.varyGeom, t.outH, t.outW = CropResize, true, true, t.bound[0], t.bound[1]
	return nil
}

// DataBound is the bound on a sample's size, (height, width), that ops
// give the images of a dataset at most w x h: their size, times a
// RandomZoomOut's side_range maximum where the geometry starts with one
// (after RandomPhotometricDistorts), its canvas int(side * r) with r
// drawn in float32 (a pixel's slack), at most MaxSide a side (a sample
// past it fails by itself).
func DataBound(ops []optab.Op, w, h int) [2]int {
	if n := leadingPre(ops); n < len(ops) && ops[n].Kind == OpRandomZoomOut {
		if s := optab.ArgsOf[ZoomOutArgs](&ops[n]).SideRange[1]; s >= 1 && s <= maxZoom {
			w, h = int(math.Ceil(float64(w)*s))+1, int(math.Ceil(float64(h)*s))+1
		}
	}
	return [2]int{min(h, optab.MaxSide), min(w, optab.MaxSide)}
}

// checkBound fails a sample whose own size (a transform under the job's
// bound) is past the bound.
func (t *Transform) checkBound(p *SamplePlan) error {
	smart := t.resize != nil && selfSized(t.resize) // its own bound, or the job's (op_smart.go, op_naflex.go)
	if !smart && (t.bound == [2]int{} || !t.varyGeom || (!t.own && (t.iou == nil || t.resize != nil))) {
		return nil
	}
	if p.OutW > t.outW || p.OutH > t.outH {
		from := fmt.Sprintf("max_size=(%d, %d): height, width", t.outH, t.outW)
		if t.boundFrom != "" {
			from = t.boundFrom + "; give the job a max_size=(h, w) past it"
		}
		return fmt.Errorf("%w: the %dx%d image (width x height) makes a %dx%d sample, past the job's bound of %dx%d (%s)",
			errs.TooLarge, p.SrcW, p.SrcH, p.OutW, p.OutH, t.outW, t.outH, from)
	}
	return nil
}
