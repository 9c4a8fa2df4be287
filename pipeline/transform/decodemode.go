package transform

// A Transform's variants a job sets: its decode mode (WithDecode) and
// its stop_epoch (WithStopEpoch).

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// DecodeMode says whether a JPEG may be decoded at a DCT scale before the
// geometry resamples it. The zero value is DecodeExact.
type DecodeMode uint8

const (
	// DecodeExact decodes every JPEG at full scale and resamples it as
	// torchvision's decode_jpeg and resized_crop (or resize and
	// center_crop) do: torchvision's pixels. The default.
	DecodeExact DecodeMode = iota
	// DecodeFast lets the libjpeg-turbo path decode at 1/2, 1/4 or 1/8
	// scale (the Decoder's WithDCTScaling) when the crop is at least 2, 4
	// or 8 times the output on both sides and an antialiased filter
	// follows: a scaled IDCT averages pixels, close to what the widened
	// filter would have done, but not the same bytes (docs/transforms.md
	// gives the measured bound). The reference path and PNG and WebP
	// files always decode at full scale.
	DecodeFast
)

var decodeNames = [...]string{DecodeExact: "exact", DecodeFast: "fast"}

// String is the mode's name: "exact" or "fast".
func (m DecodeMode) String() string {
	if int(m) < len(decodeNames) {
		return decodeNames[m]
	}
	return fmt.Sprintf("DecodeMode(%d)", uint8(m))
}

// ParseDecodeMode parses "exact" or "fast".
func ParseDecodeMode(s string) (DecodeMode, error) {
	for i, n := range decodeNames {
		if s == n {
			return DecodeMode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: decode %q: want exact or fast", errs.Unsupported, s)
}

// WithDecode returns t decoding its JPEGs in mode m (the same ops, the same
// draws; only the decode's scale may differ). t itself is unchanged.
func (t *Transform) WithDecode(m DecodeMode) *Transform {
	c := *t
	c.decode = m
	if s := c.stop; s != nil && s.after != nil { // a stop_epoch's variant too
		cs := *s
		cs.after = s.after.WithDecode(m)
		c.stop = &cs
	}
	return &c
}

// DecodeMode is how t decodes its JPEGs (WithDecode).
func (t *Transform) DecodeMode() DecodeMode { return t.decode }

// The DETR family's stop_epoch (RT-DETR v2, D-FINE, DEIM: a Compose's
// policy {name: stop_epoch, epoch: E, ops: [...]}): from epoch E on, the
// top-level ops of the named kinds are not run. The transform is compiled
// once, with every op, and an "after" variant is cut from it with those
// ops taken out; each sample picks one by its Key's epoch (AtEpoch). The
// ops left keep the RNG streams they were compiled with, so they draw
// what they would have drawn with the others on, as torchvision's would
// simply not call an op it skips.

// DETRStopOps are the ops the DETR family's configs switch off at their
// stop_epoch (D-FINE's configs/dfine/include/dataloader.yml): the stop's
// default when no op is named.
var DETRStopOps = []optab.OpKind{optab.OpRandomPhotometricDistort, OpRandomZoomOut, OpRandomIoUCrop}

// stopEpoch is a transform's switch: from epoch on, after is the
// transform its samples are made with. In after itself, off is set and
// after nil; iouOff says its RandomIoUCrop is off (the crop is the whole
// canvas; the SanitizeBoundingBoxes and flip before its Resize stay).
type stopEpoch struct {
	epoch  uint64
	kinds  []optab.OpKind
	after  *Transform
	off    bool
	iouOff bool
}

// WithStopEpoch returns t whose top-level ops of the given kinds (nil:
// DETRStopOps, or YOLOStopOps for a transform with a multi-image op) are off from epoch on (D-FINE's `epoch >= stop_epoch`,
// epochs counted from 0 as Key.Epoch counts them). Each kind named must
// be among t's ops (the default's: at least one), and switchable: not an
// op that fixes the batch's size or dtype (RandomResizedCrop, Resize,
// CenterCrop, RandomCrop, Pad, ScaleJitter, FixedSizeCrop, Normalize).
// A transform of several views is refused. t itself is unchanged.
func (t *Transform) WithStopEpoch(epoch uint64, kinds []optab.OpKind) (*Transform, error) {
	bad := func(format string, a ...any) (*Transform, error) {
		return nil, fmt.Errorf("%w: stop_epoch: %s", errs.Unsupported, fmt.Sprintf(format, a...))
	}
	if t.views != nil {
		return bad("a transform of several views is not supported")
	}
	if t.stop != nil {
		return bad("the transform already has a stop_epoch")
	}
	named := kinds != nil
	if !named {
		kinds = DETRStopOps
		if t.mosaic != nil {
			kinds = YOLOStopOps
		}
	}
	if len(kinds) > optab.MaxOps {
		return bad("%d ops named: the limit is %d", len(kinds), optab.MaxOps)
	}
	off := make([]bool, len(t.ops))
	any := false
	for _, k := range kinds {
		found := false
		for i := range t.ops {
			if t.ops[i].Kind == k {
				off[i], found = true, true
			}
		}
		switch {
		case !found && named:
			return bad("%q is not an op of the transform at its top level (%s): name the kinds of its ops, as D-FINE's policy names their classes (an op in a container goes with its container, named)", optab.TruncKind(k), t)
		case found && !stoppable(k):
			return bad("%s cannot be switched off: it fixes the batch's size or dtype (switchable: the ops on pixels, the flips, RandomZoomOut, RandomIoUCrop, SanitizeBoundingBoxes and the like)", k)
		}
		any = any || found
	}
	if !any {
		return bad("the transform (%s) has none of the DETR family's %v: name the ops to switch off (stop_ops)", t, DETRStopOps)
	}
	after, err := t.cut(off)
	if err != nil {
		return nil, err
	}
	c := *t
	c.stop = &stopEpoch{epoch: epoch, kinds: slices.Clone(kinds), after: after}
	after.stop = &stopEpoch{epoch: epoch, kinds: c.stop.kinds, off: true, iouOff: after.stop != nil && after.stop.iouOff}
	return &c, nil
}

// stoppable reports whether ops of kind k may be switched off.
func stoppable(k optab.OpKind) bool {
	d := optab.Lookup(k)
	return d == nil || !d.Stays
}

// cut is t without its ops i where off[i]: the compiled nodes of the
// others, with their streams, and its geometry without a RandomZoomOut,
// a RandomIoUCrop (its crop the whole canvas), or the flip and
// SanitizeBoundingBoxes before their Resize.
func (t *Transform) cut(off []bool) (*Transform, error) {
	a := *t
	a.stop = nil
	index := func(op *optab.Op) int {
		for i := range t.ops {
			if &t.ops[i] == op {
				return i
			}
		}
		return -1
	}
	used := make([]bool, len(t.ops))
	keep := func(nodes []optab.Node) ([]optab.Node, int) {
		var out []optab.Node
		steps := 0
		for _, n := range nodes {
			i := index(n.Op)
			if i >= 0 {
				used[i] = true
				if off[i] {
					continue
				}
			}
			out = append(out, n)
			steps += n.MaxSteps
		}
		return out, steps
	}
	a.pre, a.maxPre = keep(t.pre)
	a.post, a.maxSteps = keep(t.post)
	if i := index(t.zoom); i >= 0 {
		used[i] = true
		if off[i] {
			a.zoom = nil
		}
	}
	if err := t.stopMulti(&a, index, off, used); err != nil { // the multi-image family's (op_mosaic.go)
		return nil, err
	}
	if t.seg != nil {
		if i := index(t.seg.flip); i >= 0 { // the segmentation geometry's flip (op_seg.go)
			used[i] = true
			if off[i] {
				a.segFlipP = 0
			}
		}
	}
	if i := index(t.iou); i >= 0 {
		used[i] = true
		if off[i] {
			a.stop = &stopEpoch{iouOff: true}
		}
		// iouMid[k] is op i+1+k: SanitizeBoundingBoxes steps and one flip.
		a.iouMid = nil
		for k, st := range t.iouMid {
			used[i+1+k] = true
			if !off[i+1+k] {
				a.iouMid = append(a.iouMid, st)
			} else if st.Fn == fn.HorizontalFlip {
				a.preFlip = 0
			}
		}
	}
	for i := range t.ops {
		if !off[i] || used[i] {
			continue
		}
		if t.ops[i].Kind == optab.OpRandomHorizontalFlip && t.hasFlip {
			a.flip = 0 // the flip fused after the geometry (its stream stays 2)
			continue
		}
		return nil, fmt.Errorf("%w: stop_epoch: op %d (%s) cannot be switched off where it stands", errs.Unsupported, i, t.ops[i].Kind)
	}
	return &a, nil
}

// AtEpoch is the transform epoch's samples are made with: t, or from its
// stop_epoch on the variant without the ops it switches off.
func (t *Transform) AtEpoch(epoch uint64) *Transform {
	if s := t.stop; s != nil && s.after != nil && epoch >= s.epoch {
		return s.after
	}
	return t
}

// StopEpoch is t's stop_epoch and the kinds of the ops it switches off
// (ok false: none).
func (t *Transform) StopEpoch() (epoch uint64, kinds []optab.OpKind, ok bool) {
	if t.stop == nil || t.stop.off {
		return 0, nil, false
	}
	return t.stop.epoch, slices.Clone(t.stop.kinds), true
}

// iouOn reports whether t's RandomIoUCrop draws its crop (not switched
// off by a stop_epoch).
func (t *Transform) iouOn() bool { return t.stop == nil || !t.stop.iouOff }

// stopString describes t's stop_epoch for String ("" for none).
func (t *Transform) stopString() string {
	e, kinds, ok := t.StopEpoch()
	if !ok {
		return ""
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return fmt.Sprintf("; from epoch %d without %s", e, strings.Join(names, ", "))
}
