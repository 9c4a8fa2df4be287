package pipeline

import (
	"fmt"
	"strings"
)

// String describes the op list in torchvision terms; a transform of
// several views, each group's count and op list.
func (t *Transform) String() string {
	if t.views == nil {
		return opsString(t.ops) + t.stopString()
	}
	var b strings.Builder
	b.WriteString("views[")
	for v := 0; v < len(t.views); {
		n := 1
		for v+n < len(t.views) && t.views[v+n] == t.views[v] {
			n++
		}
		if v > 0 {
			b.WriteString("; ")
		}
		if name := t.viewNames[v]; name != "" {
			fmt.Fprintf(&b, "%s: ", name)
		}
		fmt.Fprintf(&b, "%d x (%s)", n, opsString(t.views[v].ops))
		v += n
	}
	b.WriteString("]")
	return b.String()
}

func opsString(ops []Op) string {
	var b strings.Builder
	for i := range ops {
		if i > 0 {
			b.WriteString(", ")
		}
		op := &ops[i]
		b.WriteString(string(op.Kind))
		format := formatP
		if d := lookupOp(op.Kind); d != nil && d.format != nil {
			format = d.format
		}
		format(&b, op)
	}
	return b.String()
}

// Trace is the trace a w x h source image would get for key k, drawn
// without decoding anything (what `stoker ops draw` prints, and what the
// sampling tests count): the plan's geometry, the steps, normalize (of
// several views, each view's).
func (t *Transform) Trace(srcW, srcH int, k Key) ([]byte, error) {
	return t.TraceBoxes(srcW, srcH, k, nil)
}

// TraceBoxes is Trace for a source whose boxes (XYXY, in its pixels) are
// boxes: what a RandomIoUCrop draws against (nil: none, and a transform
// with one fails).
func (t *Transform) TraceBoxes(srcW, srcH int, k Key, boxes [][4]float32) ([]byte, error) {
	if at := t.AtEpoch(k.Epoch); at.mosaic != nil && at.mosaicOn(k) {
		return nil, fmt.Errorf("%w: a YOLOMosaic's draw needs its partners' images (their sizes): only a decode traces it", ErrUnsupported)
	}
	var d Decoder
	if boxes != nil {
		d.SetBoxSource(fixedBoxes(boxes), 0)
	}
	if _, _, err := d.draw(t, &header{w: srcW, h: srcH}, k); err != nil {
		return nil, err
	}
	return d.AppendTrace(nil, t), nil
}

// fixedBoxes is a Targeted of one sample's boxes, label 0 each.
type fixedBoxes [][4]float32

func (b fixedBoxes) SourceTargets(i, w, h int, t *Instances) error {
	for _, bx := range b {
		t.Add(bx, 0, false)
	}
	return nil
}
