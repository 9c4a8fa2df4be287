package pipeline

// The YOLO family: ultralytics' (8.4.190) single-image training ops, with
// its names prefixed by YOLO so that they never clash with
// torchvision's of the same names (RandomPerspective, RandomFlip):
// YOLOLoadImage (BaseDataset.load_image: the long side to imgsz,
// cv2.INTER_LINEAR), YOLOLetterBox, YOLORandomPerspective, YOLORandomHSV
// and YOLORandomFlip. Their kernels are pipeline/kernels/cv's, exact
// against ultralytics and its OpenCV (RandomHSV within 1). The first
// three are the geometry (yolo.go: run on the image at its own size, in
// the decode's canvas path); the last two are steps on the output.
// Labels move as ultralytics' Instances do, in float32 (boxes XYXY).
// Below them, the multi-image geometry's CopyPaste, both modes.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

const (
	OpYOLOLoadImage         OpKind = "YOLOLoadImage"
	OpYOLOLetterBox         OpKind = "YOLOLetterBox"
	OpYOLORandomPerspective OpKind = "YOLORandomPerspective"
	OpYOLORandomHSV         OpKind = "YOLORandomHSV"
	OpYOLORandomFlip        OpKind = "YOLORandomFlip"
)

// yoloKind says whether k is one of the YOLO geometry's ops.
func yoloKind(k OpKind) bool {
	return k == OpYOLOLoadImage || k == OpYOLOLetterBox || k == OpYOLORandomPerspective
}

func init() {
	yolo := func(d opDef) {
		if d.geometry {
			d.stays = true
			d.misplaced = fmt.Sprintf("%s after other ops: the YOLO geometry is YOLOLoadImage, then YOLOLetterBox and/or YOLORandomPerspective, first, fused into the decode", d.kind)
		}
		d.named = true
		d.masks = func(*Op) error {
			return fmt.Errorf("masks do not follow the YOLO family's ops yet")
		}
		defineOp(d)
	}
	yolo(opDef{kind: OpYOLOLoadImage, doc: "ultralytics' load_image: the whole image, its long side resized to imgsz (cv2.INTER_LINEAR)",
		params:   []param{{name: "imgsz", typ: pInt, def: "640", field: "ImgSz", lo: 1, hi: maxSide}},
		geometry: true, targets: targetsInstances,
		format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(imgsz=%d)", op.ImgSz) }})
	yolo(opDef{kind: OpYOLOLetterBox, doc: "ultralytics' LetterBox: resized to fit new_shape (h, w), padded with 114",
		params: []param{{name: "new_shape", typ: pSize, def: "(640, 640)", field: "Size", lo: 1, hi: maxSide},
			{name: "auto", typ: pBool, def: "False", field: "Auto"}, {name: "scale_fill", typ: pBool, def: "False", field: "ScaleFill"},
			{name: "scaleup", typ: pBool, def: "True", field: "ScaleUp"}, {name: "center", typ: pBool, def: "True", field: "LetterCenter"},
			{name: "stride", typ: pInt, def: "32", field: "Stride", lo: 1, hi: 4096}},
		geometry: true, targets: targetsInstances,
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(%dx%d, auto=%v, scale_fill=%v, scaleup=%v, center=%v, stride=%d)", op.Size[0], op.Size[1], op.Auto, op.ScaleFill, op.ScaleUp, op.LetterCenter, op.Stride)
		}})
	yolo(opDef{kind: OpYOLORandomPerspective, doc: "ultralytics' RandomPerspective: a random warp into size (w, h; None: the image's), boxes filtered",
		params: []param{{name: "degrees", typ: pFloat, def: "0.0", field: "YDegrees", lo: 0, hi: 360},
			{name: "translate", typ: pFloat, def: "0.1", field: "YTranslate", lo: 0, hi: 1},
			{name: "scale", typ: pFloat, def: "0.5", field: "YScale", lo: 0, hi: 0.99},
			{name: "shear", typ: pFloat, def: "0.0", field: "YShear", lo: 0, hi: 80},
			{name: "perspective", typ: pFloat, def: "0.0", field: "YPersp", lo: 0, hi: 0.01},
			{name: "size", typ: pSize, def: "None", field: "YSize", lo: 1, hi: maxSide}},
		geometry: true, targets: targetsInstances,
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(degrees=%g, translate=%g, scale=%g, shear=%g, perspective=%g, size=%v)", op.YDegrees, op.YTranslate, op.YScale, op.YShear, op.YPersp, op.YSize)
		}})
	yolo(opDef{kind: OpYOLORandomHSV, doc: "ultralytics' RandomHSV: hue, saturation and value by gains drawn in -+(hgain, sgain, vgain)",
		params: []param{{name: "hgain", typ: pFloat, def: "0.5", field: "HGain", lo: 0, hi: 1},
			{name: "sgain", typ: pFloat, def: "0.5", field: "SGain", lo: 0, hi: 1}, {name: "vgain", typ: pFloat, def: "0.5", field: "VGain", lo: 0, hi: 1}},
		targets: targetsPixels, anyFormat: true,
		step: func(*Op) Step { return Step{Fn: FnYOLOHSV} }, // its cost
		compile: func(_ *compiler, n *node, at compileAt) error {
			for _, g := range []float64{n.op.HGain, n.op.SGain, n.op.VGain} {
				if !(g >= 0 && g <= 1) {
					return opError(at.where, "gain %v: want 0..1", g)
				}
			}
			return nil
		},
		draw: func(n *node, r *RNG, d *drawer) {
			op := n.op
			if op.HGain == 0 && op.SGain == 0 && op.VGain == 0 {
				return // ultralytics draws nothing then
			}
			st := Step{Fn: FnYOLOHSV}
			for i, g := range []float64{op.HGain, op.SGain, op.VGain} {
				st.F[i] = float64(r.Uniform(-1, 1) * g) // np.random.uniform(-1, 1, 3) * gains
			}
			d.emit(st)
		},
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(hgain=%g, sgain=%g, vgain=%g)", op.HGain, op.SGain, op.VGain)
		}})
	yolo(opDef{kind: OpYOLORandomFlip, doc: "ultralytics' RandomFlip: flipped with probability p in direction, keypoints reordered by flip_idx",
		params: []param{pParam(0.5), {name: "direction", typ: pString, def: "'horizontal'", field: "Direction"},
			{name: "flip_idx", typ: pInts, def: "None", field: "FlipIdx", lo: 0, hi: 1023}},
		targets: targetsInstances,
		compile: func(_ *compiler, n *node, at compileAt) error {
			if err := checkProb(n.op, at); err != nil {
				return err
			}
			if d := n.op.Direction; d != "horizontal" && d != "vertical" {
				return opError(at.where, "direction %q: want 'horizontal' or 'vertical'", truncateString(d, 32))
			}
			if len(n.op.FlipIdx) > 1024 {
				return opError(at.where, "flip_idx of %d keypoints: the limit is 1024", len(n.op.FlipIdx))
			}
			for _, j := range n.op.FlipIdx {
				if j < 0 || j >= len(n.op.FlipIdx) {
					return opError(at.where, "flip_idx %v: want indices below its length", n.op.FlipIdx)
				}
			}
			n.step = Step{Fn: FnYOLOFlipLR, I: [6]int{1: fn.InternFlipIdx(n.op.FlipIdx)}}
			if n.op.Direction == "vertical" {
				n.step.Fn = FnYOLOFlipUD
			}
			return nil
		},
		draw: drawApplied, // random.random() < p
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(p=%g, direction=%s, flip_idx=%v)", op.P, op.Direction, op.FlipIdx)
		}})
}

// CopyPaste (op_mosaic.go defines it with the multi-image ops): in flip
// mode right after the Mosaic (v8_transforms' default pre_transform:
// Mosaic, CopyPaste, RandomPerspective), the mosaic's own mirrored
// copies pasted; in mixup mode: ultralytics' (8.4.190) v8_transforms with
// copy_paste_mode="mixup" appends to its pre_transform (Mosaic,
// RandomPerspective) a CopyPaste whose copies come from another sample
// made by Mosaic and RandomPerspective: with probability p, of that
// sample's instances those whose IoA with every instance of this one is
// below 0.30, the fraction p least overlapping, are pasted (their
// polygons filled into a mask, the other sample's pixels copied there)
// and added after this one's. The MixUp's and the CutMix's partners are
// made by the same pre_transform, so draw their own. The partner is read,
// not consumed, as a MixUp's: cv.Partners of the sample's key on a stream
// of its own (cv.CopyPasteStream), and made with draws of its own (its
// key's view plus copyPasteView).

// checkCopyPaste checks a CopyPaste where it stands: right after the
// Mosaic, in flip mode.
func (t *Transform) checkCopyPaste(op *Op, n int) error {
	if t.mosaic == nil || n != 1 {
		return fmt.Errorf("%w: transform: YOLOCopyPaste is supported right after a YOLOMosaic only (ultralytics' v8_transforms puts it there in flip mode: Mosaic, CopyPaste, RandomPerspective)", ErrUnsupported)
	}
	if op.Mode != "flip" {
		return fmt.Errorf("%w: transform: YOLOCopyPaste mode %q: want 'flip' (right after the YOLOMosaic) or 'mixup' (after its YOLORandomPerspective)", ErrUnsupported, truncateString(op.Mode, 32))
	}
	if !(op.P >= 0 && op.P <= 1) {
		return fmt.Errorf("%w: transform: YOLOCopyPaste p=%v: want 0..1", ErrUnsupported, op.P)
	}
	return nil
}

// prePartners appends the partners of k's pre_transform to buf: its
// Mosaic's n-1, then, when a CopyPaste in mixup mode draws to apply, its
// partner and that one's Mosaic's n-1 (copypaste_mix.go).
func (t *Transform) prePartners(k Key, size int, buf []int) []int {
	buf = t.mosaicPartners(k, size, buf)
	if t.copyPasteMixOn(k) {
		j := copyPasteMixPartner(k, size)
		buf = append(buf, j)
		buf = t.mosaicPartners(copyPasteKey(k, j), size, buf)
	}
	return buf
}

// copyPaste is ultralytics' CopyPaste in flip mode on the mosaic img
// (its draw mo), when t has one: the mosaic's instances (the sample's
// labels: the Decoder's box source), the copies it pastes (copyPasteSelect),
// their segments filled into a mask (cv.CopyPasteMask), and the mirrored
// mosaic's pixels copied where it is set (cv2.copyTo). Nothing pasted
// leaves img as it is.
func (d *Decoder) copyPaste(img kernels.Planes, t *Transform, mo *mosaicDraw) error {
	mo.cp, mo.pasted = t.copyPaste != nil, 0
	if !mo.cp {
		return nil
	}
	mo.cpP = t.copyPaste.P
	if d.boxSrc == nil {
		return fmt.Errorf("%w: YOLOCopyPaste pastes the sample's segments: it needs the dataset's labels (a job with targets of a YOLO segment dataset)", ErrUnsupported)
	}
	in, _, err := d.mosaicInstances(d.boxSrc, mo)
	if err != nil {
		return err
	}
	flipped, sel, err := copyPasteSelect(in, mo, t.copyPaste.P)
	if err != nil || len(sel) == 0 {
		return err
	}
	m := &d.multi
	n := img.W * img.H
	if cap(m.cpMask) < n {
		m.cpMask = make([]byte, n)
	}
	mask := m.cpMask[:n]
	m.cpPts = cv.CopyPasteMask(mask, img.W, img.H, flipped, sel, m.cpPts)
	cv.CopyPasteImage(img, mask)
	mo.pasted = len(sel)
	return nil
}

// copyPasteSelect is CopyPaste.get_params in flip mode on a mosaic's
// instances in (its 2*imgsz canvas): their mirrored copies and those it
// pastes (cv.CopyPasteSelect). A mosaic of boxes without segments is
// refused: ultralytics' CopyPaste skips it silently, leaving a job that
// asked for it without it.
func copyPasteSelect(in cv.Instances, mo *mosaicDraw, p float64) (cv.Instances, []int, error) {
	if len(in.Boxes) > 0 && len(in.Segments) == 0 && p > 0 {
		return cv.Instances{}, nil, fmt.Errorf("%w: YOLOCopyPaste: the mosaic of samples %v has boxes without polygons: CopyPaste pastes segments, give it a YOLO segment dataset (ultralytics' skips it silently on boxes)", ErrUnsupported, mo.idx)
	}
	flipped, sel := cv.CopyPasteSelect(in, cv.MosaicSize(mo.imgsz), p)
	return flipped, sel, nil
}

// copyPasteView keys a CopyPaste partner's draws, as mixView a MixUp's.
const copyPasteView = 3 << 40

// copyPasteKey is the key a CopyPaste partner j of the pre_transform of
// key k is made with.
func copyPasteKey(k Key, j int) Key {
	k.Index, k.View = uint64(j), k.View+copyPasteView
	return k
}

// checkCopyPasteMix checks a CopyPaste in mixup mode where it stands:
// right after the Mosaic's YOLORandomPerspective (v8_transforms appends
// it to the pre_transform), without a CopyPaste in flip mode.
func (t *Transform) checkCopyPasteMix(op *Op, n int) error {
	if t.mosaic == nil || t.yolo == nil || t.copyPaste != nil || n != t.afterMosaic()+1 {
		return fmt.Errorf("%w: transform: YOLOCopyPaste mode 'mixup' is supported right after a YOLOMosaic's YOLORandomPerspective only (ultralytics' v8_transforms appends it to the pre_transform: Mosaic, RandomPerspective, CopyPaste), and not with a YOLOCopyPaste in flip mode", ErrUnsupported)
	}
	if !(op.P >= 0 && op.P <= 1) {
		return fmt.Errorf("%w: transform: YOLOCopyPaste p=%v: want 0..1", ErrUnsupported, op.P)
	}
	return nil
}

// copyPasteMixOn is a CopyPaste in mixup mode's draw for the
// pre_transform of key k: whether it applies (BaseMixTransform's
// random.uniform(0, 1) > p skips it; p 0 never does).
func (t *Transform) copyPasteMixOn(k Key) bool {
	if t.copyPasteMix == nil || t.copyPasteMix.P == 0 {
		return false
	}
	r := k.Stream(cv.CopyPasteStream + 1)
	return !(r.Float64() > t.copyPasteMix.P)
}

// copyPasteMixPartner is the CopyPaste partner of the pre_transform of
// key k in a dataset of size samples.
func copyPasteMixPartner(k Key, size int) int {
	var one [1]int
	cv.Partners(k, cv.CopyPasteStream, size, one[:])
	return one[0]
}

// cpMixDraw is what a CopyPaste in mixup mode drew for one pre_transform:
// on, that it drew to apply (its partner read and made: mo, warped by
// pp); applied, that the sample had instances (ultralytics' returns a
// sample without any untouched, before its draw); pasted, the partner's
// instances it pasted.
type cpMixDraw struct {
	on, applied bool
	p           float64
	mo          mosaicDraw
	pp          cv.PerspectiveParams
	pasted      int
}

// copyPasteMix is CopyPaste in mixup mode on img, the pre_transform of
// key k (its mosaic mo, warped by pp) already made, when t has one and it
// draws to apply: its partner (the next handed, take) made by the Mosaic
// and the warp, its instances chosen against img's (copyPasteMixSelect),
// their polygons filled into a mask (cv.CopyPasteMask) and the partner's
// pixels copied there (cv2.copyTo).
func (d *Decoder) copyPasteMix(img kernels.Planes, t *Transform, k Key, take func(int) ([]int, [][]byte, error),
	cp *cpMixDraw, mo *mosaicDraw, pp *cv.PerspectiveParams, md *multiDraw) error {
	*cp = cpMixDraw{mo: cp.mo, on: t.copyPasteMixOn(k)}
	if !cp.on {
		return nil
	}
	cp.p = t.copyPasteMix.P
	ci, cd, err := take(1)
	if err != nil {
		return err
	}
	pi, pd, err := take(t.mosaic.Tiles - 1)
	if err != nil {
		return err
	}
	m := &d.multi
	n := img.W * img.H
	if cap(m.cpImg) < 3*n {
		m.cpImg = make([]byte, 3*n)
	}
	part := kernels.Planes{Pix: m.cpImg[:3*n], W: img.W, H: img.H}
	if err := d.preInto(part, cd[0], ci[0], pi, pd, t, copyPasteKey(k, ci[0]), &cp.mo, &cp.pp); err != nil {
		return fmt.Errorf("copy_paste partner (sample %d): %w", ci[0], err)
	}
	if d.boxSrc == nil {
		return fmt.Errorf("%w: YOLOCopyPaste pastes another sample's segments: it needs the dataset's labels (a job with targets of a YOLO segment dataset)", ErrUnsupported)
	}
	in, _, err := d.preInstances(d.boxSrc, mo, pp, md)
	if err != nil {
		return err
	}
	cp.applied = len(in.Boxes) > 0
	two, sel, err := d.copyPasteMixSelect(d.boxSrc, in, cp, md)
	if err != nil || len(sel) == 0 {
		return err
	}
	if cap(m.cpMask) < n {
		m.cpMask = make([]byte, n)
	}
	mask := m.cpMask[:n]
	m.cpPts = cv.CopyPasteMask(mask, img.W, img.H, two, sel, m.cpPts)
	cv.CopyPasteFrom(img, part, mask)
	cp.pasted = len(sel)
	return nil
}

// copyPasteMixSelect is CopyPaste.get_params in mixup mode on the
// instances in of a pre_transform whose CopyPaste drew cp, of ds's
// labels: the partner's instances (its mosaic, warped) and those it
// pastes (cv.CopyPasteMixSelect); none when in has none (ultralytics'
// returns such a sample untouched). Boxes without polygons are refused,
// as in flip mode.
func (d *Decoder) copyPasteMixSelect(ds Targeted, in cv.Instances, cp *cpMixDraw, md *multiDraw) (cv.Instances, []int, error) {
	if len(in.Boxes) == 0 {
		return cv.Instances{}, nil, nil
	}
	two, _, err := d.preInstances(ds, &cp.mo, &cp.pp, md)
	if err != nil {
		return two, nil, fmt.Errorf("copy_paste partner (sample %d): %w", cp.mo.idx[0], err)
	}
	for _, x := range []cv.Instances{in, two} {
		if len(x.Boxes) > 0 && len(x.Segments) == 0 {
			return two, nil, fmt.Errorf("%w: YOLOCopyPaste: the samples %v and %v have boxes without polygons: CopyPaste pastes segments, give it a YOLO segment dataset (ultralytics' skips it silently on boxes)", ErrUnsupported, md.mo.idx, cp.mo.idx)
		}
	}
	if len(two.Keypoints) > 0 || len(in.Keypoints) > 0 {
		return two, nil, fmt.Errorf("%w: YOLOCopyPaste mode 'mixup' on a dataset with keypoints is not supported", ErrUnsupported)
	}
	return two, cv.CopyPasteMixSelect(in, two, cp.p), nil
}

// preMixInstances is one pre_transform's instances: its mosaic's (mo),
// pasted by a CopyPaste in flip mode, warped (pp), then with what its
// CopyPaste in mixup mode pasted (cp, nil: none), after them.
func (d *Decoder) preMixInstances(ds Targeted, mo *mosaicDraw, pp *cv.PerspectiveParams, cp *cpMixDraw, md *multiDraw) (cv.Instances, int, error) {
	in, p, err := d.preInstances(ds, mo, pp, md)
	if err != nil || cp == nil || !cp.on {
		return in, p, err
	}
	two, sel, err := d.copyPasteMixSelect(ds, in, cp, md)
	if err != nil {
		return in, p, err
	}
	if len(sel) != cp.pasted {
		return in, p, fmt.Errorf("targets: YOLOCopyPaste pasted %d of its partner's instances, its labels select %d", cp.pasted, len(sel))
	}
	return cv.CopyPasteInstances(in, two, sel), p, nil
}

// appendJSON appends a CopyPaste in mixup mode's draw, when it drew to
// apply, between pre and post: {"mode": "mixup", "applied", "pasted",
// "mosaic": the partner's, "perspective": its warp}.
func (cp *cpMixDraw) appendJSON(b []byte, pre, post string, md *multiDraw) []byte {
	if !cp.on {
		return b
	}
	b = append(b, pre...)
	b = append(b, `{"mode":"mixup","applied":`...)
	b = strconv.AppendBool(b, cp.applied)
	b = append(b, `,"pasted":`...)
	b = strconv.AppendInt(b, int64(cp.pasted), 10)
	b = cp.mo.appendJSON(append(b, `,"mosaic":`...))
	st := md.perspStep(&cp.pp)
	b = st.AppendJSON(append(b, `,"perspective":`...))
	return append(append(b, '}'), post...)
}
