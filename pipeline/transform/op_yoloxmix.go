package transform

// YOLOX's MixUp (Megvii-BaseDetection/YOLOX at 6ddff48,
// MosaicDetection.mixup), of the multi-image family (op_mosaic.go): its
// kind, Def and place, its draws, its making and its boxes' moves. The
// family's plan (op_multi.go) draws it after the sample's pre_transform
// and makes it after the sample's pixels; its kernels are
// pipeline/kernels/cv's yoloxmix.go. Its partner is one image of the
// dataset, read as a mosaic's partners are (cv.Partners on a stream of its
// own) and loaded whole: YOLOX resizes it itself.

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// OpYOLOXMixUp is YOLOX's MixUp (MosaicDetection.mixup), after the
// YOLOMosaic's YOLORandomPerspective: with probability p, the sample averaged
// with another image of the dataset, loaded, scaled by a factor drawn in
// mixup_scale, maybe mirrored, and cropped at a drawn offset (cv.YOLOXMix).
const OpYOLOXMixUp optab.OpKind = "YOLOXMixUp"

// YOLOXMixUpArgs are YOLOXMixUp's: mixup_scale, the (min, max) its jit
// factor is drawn in (YOLOX's mixup_scale; p is its mixup_prob).
type YOLOXMixUpArgs struct{ Scale [2]float64 }

func init() {
	optab.Define(optab.Def{Kind: OpYOLOXMixUp, Doc: "YOLOX's MixUp (MosaicDetection.mixup), after a YOLOMosaic's YOLORandomPerspective: with probability p, a sample with boxes is averaged with another image drawn from the dataset, loaded to fit the sample's size (YOLOX's load_resized_img), pasted on a canvas of 114, scaled by a factor drawn in mixup_scale, mirrored half the time and cropped at a drawn offset; its boxes moved so and clipped follow the sample's",
		Named: true, Geometry: true, Targets: optab.TargetsMove, NeedsTargets: true,
		Params: []optab.Param{optab.PParam(1), {Name: "mixup_scale", Typ: optab.PRange, Def: "(0.5, 1.5)", Lo: 0.01, Hi: 4}},
		FromArgs: func(a *optab.Args) optab.Op {
			return optab.Op{P: a.Float("p"), Args: &YOLOXMixUpArgs{Scale: a.Pair("mixup_scale")}}
		},
		Misplaced: "YOLOXMixUp is supported right after a YOLOMosaic's YOLORandomPerspective only (YOLOX mixes the mosaic's random_affine output)",
		Masks:     func(*optab.Op) error { return fmt.Errorf("%w: masks do not follow YOLOXMixUp yet", errs.Unsupported) },
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[YOLOXMixUpArgs](op)
			fmt.Fprintf(b, "(p=%g, mixup_scale=(%g, %g))", op.P, a.Scale[0], a.Scale[1])
		}})
	definePlacer(OpYOLOXMixUp, placeAt(func(t *Transform, op *optab.Op, n int) error {
		if err := t.checkYOLOXMix(op, n); err != nil {
			return err
		}
		t.yoloxMix, t.yoloxArgs = op, optab.ArgsOf[YOLOXMixUpArgs](op)
		return nil
	}))
}

// checkYOLOXMix checks a YOLOX MixUp where it stands: right after the
// YOLOMosaic's YOLORandomPerspective (and a CopyPaste in mixup mode after
// it), the sample's size its input_dim, without ultralytics' MixUp (one
// MixUp a recipe) and on a YOLOMosaic of p 1 (YOLOX mixes mosaics alone).
// YOLOX's recipe has neither CopyPaste nor CutMix; a CopyPaste before it
// is the pre_transform's, and checkCutMix refuses a CutMix after it.
func (t *Transform) checkYOLOXMix(op *optab.Op, n int) error {
	at := t.afterMosaic() + 1
	if t.copyPasteMix != nil {
		at++
	}
	if t.mosaic == nil || t.yolo == nil || t.mixup != nil || n != at || t.mosaic.P != 1 {
		return fmt.Errorf("%w: transform: YOLOXMixUp is supported right after a YOLOMosaic (p=1)'s YOLORandomPerspective only, without a YOLOMixUp: YOLOX mixes the mosaic's random_affine output, at its size", errs.Unsupported)
	}
	a := optab.ArgsOf[YOLOXMixUpArgs](op)
	if !(op.P >= 0 && op.P <= 1) || !(a.Scale[0] > 0 && a.Scale[0] <= a.Scale[1] && a.Scale[1] <= 4) {
		return fmt.Errorf("%w: transform: YOLOXMixUp p=%v, mixup_scale=%v: want p 0..1 and 0 < min <= max <= 4", errs.Unsupported, op.P, a.Scale)
	}
	return nil
}

// yoloxMixOn is YOLOX's MixUp's first draw for key k, whether it applies
// (random.random() < mixup_prob; MosaicDetection draws it only for a
// mosaic with labels, and stoker hands the partner either way: the
// plan's draw then leaves a sample without labels unmixed), and the
// stream its other draws follow on.
func (t *Transform) yoloxMixOn(k det.Key) (bool, det.RNG) {
	if t.yoloxMix == nil {
		return false, det.RNG{}
	}
	r := k.Stream(streamYOLOXMix + 1)
	return r.Float64() < t.yoloxMix.P, r
}

// drawYOLOX draws a YOLOX MixUp for the sample of key k (its partner the
// next handed): MosaicDetection.mixup's jit_factor (random.uniform in
// mixup_scale), FLIP (random.uniform(0, 1) > 0.5), the partner's
// geometry from its header, then the crop's offsets
// (random.randint(0, padded - size - 1) where the padded canvas is
// larger, y first). It applies to a sample with boxes only (YOLOX's
// not len(mosaic_labels) == 0), of boxes alone: YOLOX's labels have no
// polygons or keypoints.
func (md *MultiDraw) drawYOLOX(t *Transform, k det.Key, h *handed, w, ht int) error {
	md.X, md.XOK, md.haveX = false, false, false
	on, r := t.yoloxMixOn(k)
	if !on {
		return nil
	}
	xi, xf, err := h.take(1)
	if err != nil {
		return err
	}
	md.X, md.XIdx, md.xData = true, xi[0], xf[0]
	a := t.yoloxArgs
	jit := r.Uniform(a.Scale[0], a.Scale[1])
	flip := r.Uniform(0, 1) > 0.5
	w0, h0, err := md.src.Size(xf[0])
	if err != nil {
		return fmt.Errorf("yolox mixup partner (sample %d): %w", xi[0], err)
	}
	if md.XM, err = cv.YOLOXMixSizes(w0, h0, w, ht, jit); err != nil {
		return fmt.Errorf("%w: yolox mixup partner (sample %d): %v", errs.Unsupported, xi[0], err)
	}
	md.XM.Flip = flip
	md.XM.XO, md.XM.YO = 0, 0
	pw, ph := md.XM.Padded()
	if ph > ht {
		md.XM.YO = r.Intn(ph - ht)
	}
	if pw > w {
		md.XM.XO = r.Intn(pw - w)
	}
	ds, err := md.labels("YOLOXMixUp mixes a sample with boxes only (YOLOX's): it needs the dataset's labels (a job with targets)")
	if err != nil {
		return err
	}
	in, _, err := md.multiInstances(ds)
	if err != nil {
		return err
	}
	if len(in.Segments) > 0 || len(in.Keypoints) > 0 {
		return fmt.Errorf("%w: YOLOXMixUp moves boxes alone (YOLOX's labels): a dataset with polygons or keypoints is not supported", errs.Unsupported)
	}
	if md.XOK = len(in.Boxes) > 0; md.XOK { // the partner's boxes, read now: its labels once, with the plan
		_, err = md.yoloxBoxes(ds)
	}
	return err
}

// makeYOLOX mixes the YOLOX MixUp's partner into img: loaded whole (a
// load_image at its own long side resizes nothing), then made and mixed
// as MosaicDetection.mixup makes it (cv.YOLOXMixCanvas, YOLOXMixImage).
func (md *MultiDraw) makeYOLOX(img kernels.Planes, l Loader, s *MultiScratch) error {
	defer l.Release()
	m := &md.XM
	src, err := l.LoadImage(md.xData, 0, max(m.W0, m.H0))
	if err != nil {
		return err
	}
	if src.W != m.W0 || src.H != m.H0 {
		return fmt.Errorf("%w: decoded at %dx%d, its header says %dx%d", errs.Corrupt, src.W, src.H, m.W0, m.H0)
	}
	if l.Stopped() {
		return optab.ErrAbandoned
	}
	jit := scratchPlanes(&s.xj, m.JW, m.JH)
	s.xa, s.xb, s.xc = cv.YOLOXMixCanvas(jit, src, m, s.xa, s.xb, s.xc)
	cv.YOLOXMixImage(img, jit, m)
	return nil
}

// yoloxInstances is the sample's instances all, then the YOLOX MixUp
// partner's boxes (yoloxBoxes).
func (md *MultiDraw) yoloxInstances(ds Targeted, all cv.Instances) (cv.Instances, error) {
	two, err := md.yoloxBoxes(ds)
	if err != nil {
		return all, err
	}
	return cv.Concat(all, two), nil
}

// yoloxBoxes is the YOLOX MixUp partner's boxes (of ds's labels in
// pixels of its decoded size) moved as MosaicDetection.mixup moves them
// (cv.YOLOXMixBoxes), and classes: read once, with the plan's draw.
func (md *MultiDraw) yoloxBoxes(ds Targeted) (cv.Instances, error) {
	if md.haveX {
		return md.xIn, nil
	}
	m := &md.XM
	if err := md.imageLabels(ds, md.XIdx, m.W0, m.H0); err != nil {
		return cv.Instances{}, fmt.Errorf("yolox mixup partner (sample %d): %w", md.XIdx, err)
	}
	tg := &md.lab
	if len(tg.Segments) > 0 || tg.P > 0 {
		return cv.Instances{}, fmt.Errorf("%w: yolox mixup partner (sample %d): YOLOXMixUp moves boxes alone (YOLOX's labels): a dataset with polygons or keypoints is not supported", errs.Unsupported, md.XIdx)
	}
	md.xIn = cv.Instances{Boxes: cv.YOLOXMixBoxes(md.xIn.Boxes[:0], tg.Boxes, m), Cls: append(md.xIn.Cls[:0], tg.Labels...)}
	md.haveX = true
	return md.xIn, nil
}
