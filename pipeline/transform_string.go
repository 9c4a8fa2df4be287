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
		switch op.Kind {
		case OpRandomResizedCrop, OpCenterCrop:
			fmt.Fprintf(&b, "(%dx%d", op.Size[0], op.Size[1])
		case OpResize:
			if op.Size[1] == 0 {
				fmt.Fprintf(&b, "(%d", op.Size[0])
			} else {
				fmt.Fprintf(&b, "(%dx%d", op.Size[0], op.Size[1])
			}
		case OpRandomApply:
			fmt.Fprintf(&b, "([%s], p=%g)", opsString(op.Ops), op.P)
			continue
		case OpRandomChoice, OpRandomOrder:
			fmt.Fprintf(&b, "([%s])", opsString(op.Ops))
			continue
		case OpRandAugment:
			fmt.Fprintf(&b, "(num_ops=%d, magnitude=%d)", op.NumOps, op.Magnitude)
			continue
		case OpRandomCrop:
			fmt.Fprintf(&b, "(%dx%d, padding=%v, pad_if_needed=%v, fill=%v)", op.Size[0], op.Size[1], op.Padding, op.PadIfNeeded, op.Fill)
			continue
		case OpPad:
			fmt.Fprintf(&b, "(padding=%v, fill=%v)", op.Padding, op.Fill)
			continue
		case OpRandomIoUCrop:
			fmt.Fprintf(&b, "(scale=%v, aspect_ratio=%v, sampler_options=%v, trials=%d)", op.Scale, op.Ratio, op.Options, op.Trials)
			continue
		case OpScaleJitter:
			fmt.Fprintf(&b, "(%dx%d, scale_range=%v", op.Size[0], op.Size[1], op.Scale)
		case OpRandomShortestSize:
			fmt.Fprintf(&b, "(min_size=%v, max_size=%d", op.Sizes, op.MaxSize)
		case OpRandomResize:
			fmt.Fprintf(&b, "(min_size=%d, max_size=%d", op.Sizes[0], op.Sizes[1])
		case OpFixedSizeCrop:
			fmt.Fprintf(&b, "(%dx%d, fill=%v)", op.Size[0], op.Size[1], op.Fill)
			continue
		case OpRandomZoomOut:
			fmt.Fprintf(&b, "(fill=%v, side_range=%v, p=%g)", op.Fill, op.SideRange, op.P)
			continue
		case OpAutoAugment, OpTimmRandAugment, OpTimmAutoAugment, OpTimmAugMix:
			fmt.Fprintf(&b, "(%s)", op.Policy)
			continue
		case OpSanitizeBoundingBoxes:
			fmt.Fprintf(&b, "(min_size=%g, min_area=%g)", op.MinSize, op.MinArea)
			continue
		case OpConvertBoundingBoxFormat:
			fmt.Fprintf(&b, "(%s)", op.BoxFormat)
			continue
		case OpClampBoundingBoxes:
			if op.ClampNone {
				b.WriteString("(None)")
			}
			continue
		case OpClampKeyPoints, OpSanitizeKeyPoints:
			continue
		case OpRandomPerspective:
			fmt.Fprintf(&b, "(distortion_scale=%g, p=%g, fill=%v", op.Distortion, op.P, op.Fill)
		case OpRandomPhotometricDistort:
			fmt.Fprintf(&b, "(%v, p=%g)", op.Jitter, op.P)
			continue
		case OpNormalize, OpColorJitter, OpGrayscale, OpGaussianBlur, OpRandomRotation, OpRandomAffine,
			OpTrivialAugmentWide, OpAugMix:
			continue
		default:
			fmt.Fprintf(&b, "(p=%g)", op.P)
			continue
		}
		if op.Interp != InterpBilinear {
			fmt.Fprintf(&b, ", %s", op.Interp)
		}
		b.WriteString(")")
	}
	return b.String()
}
