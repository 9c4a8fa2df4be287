package pipeline

// CopyPaste in mixup mode: ultralytics' (8.4.190) v8_transforms with
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

import (
	"fmt"
	"strconv"

	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

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

// appendJSON appends a CopyPaste in mixup mode's draw: {"mode": "mixup",
// "applied", "pasted", "mosaic": the partner's, "perspective": its warp}.
func (cp *cpMixDraw) appendJSON(b []byte, md *multiDraw) []byte {
	b = append(b, `{"mode":"mixup","applied":`...)
	b = strconv.AppendBool(b, cp.applied)
	b = append(b, `,"pasted":`...)
	b = strconv.AppendInt(b, int64(cp.pasted), 10)
	b = cp.mo.appendJSON(append(b, `,"mosaic":`...))
	st := md.perspStep(&cp.pp)
	b = st.AppendJSON(append(b, `,"perspective":`...))
	return append(b, '}')
}
