// Package opspec turns the wire's transform spec (stokerv1.TransformSpec)
// into the pipeline's ops, filling in torchvision's defaults where the wire
// leaves a field unset. It is the one place that knows both: the server
// compiles jobs with it, and `stoker ops` draws traces with it.
//
// Errors wrap errs.Unsupported and name the op by its position
// (through its containers) and the argument that is wrong.
package opspec

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stoker-dev/stoker/pipeline/errs"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// MaxPresetName bounds a preset's name on the wire.
const MaxPresetName = 256

// Transform compiles a TransformSpec for layout: a preset name, an op
// list, or view groups, exactly one of the three.
func Transform(spec *stokerv1.TransformSpec, layout transform.Layout) (*transform.Transform, error) {
	return TransformData(spec, layout, 0, 0)
}

// TransformData is Transform for a dataset whose images are at most w x h
// (0: not known): an op list without a max_size is bounded by them where
// its geometry needs a bound (transform.NewTransformData).
func TransformData(spec *stokerv1.TransformSpec, layout transform.Layout, w, h int) (*transform.Transform, error) {
	set := 0
	for _, has := range []bool{spec.GetPreset() != "", len(spec.GetOps()) > 0, len(spec.GetViews()) > 0} {
		if has {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%w: transform: set exactly one of preset, ops and views", errs.Unsupported)
	}
	var bound [2]int
	switch ms := spec.GetMaxSize(); {
	case len(ms) == 0:
	case len(ms) != 2:
		return nil, fmt.Errorf("%w: transform: max_size of %d values: want 2, (height, width)", errs.Unsupported, len(ms))
	case spec.GetPreset() != "":
		return nil, fmt.Errorf("%w: transform: max_size bounds the sizes of an op list's samples (or of views' op lists): not with a preset", errs.Unsupported)
	default:
		bound = [2]int{int(min(ms[0], 1<<20)), int(min(ms[1], 1<<20))}
	}
	if len(spec.GetViews()) > 0 {
		groups, err := views(spec.GetViews())
		if err != nil {
			return nil, err
		}
		return transform.NewViewsBound(layout, bound, groups...)
	}
	if spec.GetPreset() != "" {
		if err := presetName(spec.GetPreset()); err != nil {
			return nil, err
		}
		return transform.ParseTransform(spec.GetPreset(), layout)
	}
	ops, err := Ops(spec.GetOps())
	if err != nil {
		return nil, err
	}
	if bound == [2]int{} {
		return transform.NewTransformData(layout, w, h, ops...)
	}
	return transform.NewTransformBound(layout, bound, ops...)
}

// presetName refuses a preset's name over MaxPresetName.
func presetName(p string) error {
	if len(p) > MaxPresetName {
		return fmt.Errorf("%w: transform preset name %q… of %d bytes: the limit is %d (known: %s)",
			errs.Unsupported, p[:64], len(p), MaxPresetName, strings.Join(transform.PresetNames(), ", "))
	}
	return nil
}

// views converts the wire's view groups, each a one-view preset or an op
// list. Counts are bounded before anything is made of them.
func views(in []*stokerv1.ViewGroup) ([]transform.ViewGroup, error) {
	if len(in) > transform.MaxViews {
		return nil, fmt.Errorf("%w: transform: %d view groups: the limit is %d views", errs.Unsupported, len(in), transform.MaxViews)
	}
	out := make([]transform.ViewGroup, len(in))
	total := 0
	for g, vg := range in {
		where := fmt.Sprintf("view group %d", g)
		if n := vg.GetName(); n != "" {
			where += fmt.Sprintf(" (%q)", truncate(n, 64))
		}
		total += int(min(vg.GetCount(), transform.MaxViews+1))
		if total > transform.MaxViews {
			return nil, fmt.Errorf("%w: transform: %s: %d views or more: the limit is %d", errs.Unsupported, where, total, transform.MaxViews)
		}
		t := vg.GetTransform()
		out[g] = transform.ViewGroup{Name: vg.GetName(), Count: int(vg.GetCount())}
		switch {
		case vg.GetSeveralImages() && vg.GetOneImage():
			return nil, fmt.Errorf("%w: transform: %s: several_images and one_image: give one (or neither: every image)", errs.Unsupported, where)
		case vg.GetSeveralImages():
			out[g].Images = transform.SeveralImages
		case vg.GetOneImage():
			out[g].Images = transform.OneImage
		}
		switch {
		case len(t.GetViews()) > 0:
			return nil, fmt.Errorf("%w: transform: %s: views inside a view: give each group a preset or ops", errs.Unsupported, where)
		case t.GetPreset() != "" && len(t.GetOps()) > 0, t.GetPreset() == "" && len(t.GetOps()) == 0:
			return nil, fmt.Errorf("%w: transform: %s: set exactly one of preset and ops", errs.Unsupported, where)
		case t.GetPreset() != "":
			if err := presetName(t.GetPreset()); err != nil {
				return nil, err
			}
			ops, err := transform.Preset(t.GetPreset())
			if err != nil {
				return nil, fmt.Errorf("%w (%s)", err, where)
			}
			out[g].Ops = ops
		default:
			list, err := ops(t.GetOps(), where+": ", 0)
			if err != nil {
				return nil, err
			}
			out[g].Ops = list
		}
	}
	return out, nil
}

// truncate shortens a client's string for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Ops converts wire ops to pipeline ops, torchvision's defaults filled in.
func Ops(in []*stokerv1.Op) ([]opspkg.Op, error) { return ops(in, "", 0) }

// maxWireDepth bounds the containers' nesting before the pipeline sees it
// (which refuses deeper than its own, smaller, bound with a clearer error).
const maxWireDepth = 16

func ops(in []*stokerv1.Op, path string, depth int) ([]opspkg.Op, error) {
	if depth > maxWireDepth {
		return nil, fmt.Errorf("%w: transform: %s: containers nested deeper than %d", errs.Unsupported, path, maxWireDepth)
	}
	out := make([]opspkg.Op, 0, len(in))
	for i, o := range in {
		where := fmt.Sprintf("%sop %d", path, i)
		op, err := convert(o, where, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

func convert(o *stokerv1.Op, where string, depth int) (opspkg.Op, error) {
	n := o.GetNamed()
	if n == nil {
		if err := retiredErr(o, where); err != nil {
			return opspkg.Op{}, err
		}
		return opspkg.Op{}, fmt.Errorf("%w: transform: %s: the op is empty (a newer client's op this server does not know?)", errs.Unsupported, where)
	}
	return named(n, where, depth)
}

// retiredOps are the per-op messages' field numbers of Op before every op
// became a NamedOp (proto/stoker/v1/stoker.proto reserves them), by the
// op's name: an old client's op is refused naming it.
var retiredOps = map[protowire.Number]string{
	1: "RandomResizedCrop", 2: "Resize", 3: "CenterCrop", 4: "RandomHorizontalFlip", 5: "ColorJitter", 6: "Normalize",
	7: "RandomVerticalFlip", 8: "Grayscale", 9: "RandomGrayscale", 10: "GaussianBlur", 11: "RandomSolarize",
	12: "RandomPosterize", 13: "RandomInvert", 14: "RandomEqualize", 15: "RandomAutocontrast",
	16: "RandomAdjustSharpness", 17: "RandomRotation", 18: "RandomAffine", 19: "RandomErasing", 20: "RandomApply",
	21: "RandomChoice", 22: "RandomOrder", 23: "TrivialAugmentWide", 24: "RandAugment", 25: "AutoAugment", 26: "AugMix",
	27: "TimmRandAugment", 90: "RandomCrop", 120: "Pad", 133: "TimmAutoAugment", 134: "TimmAugMix",
	160: "SanitizeBoundingBoxes", 161: "RandomZoomOut", 162: "RandomIoUCrop", 163: "RandomPhotometricDistort",
	164: "ConvertBoundingBoxFormat", 165: "ScaleJitter", 166: "FixedSizeCrop", 167: "RandomShortestSize",
	168: "RandomResize", 170: "ClampBoundingBoxes", 171: "ClampKeyPoints", 172: "SanitizeKeyPoints",
	173: "RandomPerspective", 174: "PadIfSmaller",
}

// retired is the name of the retired per-op message o holds among its
// unknown fields ("": none).
func retired(o *stokerv1.Op) string {
	b := o.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		if name, ok := retiredOps[num]; ok {
			return name
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return ""
		}
		b = b[n+m:]
	}
	return ""
}

// retiredErr is the refusal of o, at where, when it holds a retired
// per-op message (nil when it holds none).
func retiredErr(o *stokerv1.Op, where string) error {
	name := retired(o)
	if name == "" {
		return nil
	}
	return fmt.Errorf("%w: transform: %s: %s came as its own message, which this server no longer reads: every op travels as a NamedOp now (upgrade the client)",
		errs.Unsupported, where, name)
}

// Retired refuses a spec whose ops include a retired per-op message
// (retiredOps), naming the op: a JobSpec's unknown fields are dropped
// before its transform is compiled, so the server asks first.
func Retired(spec *stokerv1.TransformSpec) error {
	check := func(ops []*stokerv1.Op, where string) error {
		for i, o := range ops {
			if o.GetOp() == nil {
				if err := retiredErr(o, fmt.Sprintf("%sop %d", where, i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := check(spec.GetOps(), ""); err != nil {
		return err
	}
	for g, vg := range spec.GetViews() {
		if err := check(vg.GetTransform().GetOps(), fmt.Sprintf("view group %d: ", g)); err != nil {
			return err
		}
	}
	return nil
}

// Bounds of a NamedOp (proto/stoker/v1/stoker.proto).
const (
	maxNamedName    = 64
	maxNamedArgs    = 32
	maxNamedNumbers = 512
	maxNamedText    = 256
)

// named reads a NamedOp through the op's schema (ops.NamedOp), its
// sizes bounded first; a container's ops are read so too, a level deeper.
func named(n *stokerv1.NamedOp, where string, depth int) (opspkg.Op, error) {
	bad := func(format string, a ...any) (opspkg.Op, error) {
		return opspkg.Op{}, fmt.Errorf("%w: transform: %s: %s", errs.Unsupported, where, fmt.Sprintf(format, a...))
	}
	if len(n.GetName()) > maxNamedName {
		return bad("a NamedOp's name of %d bytes: the limit is %d", len(n.GetName()), maxNamedName)
	}
	if len(n.GetArgs()) > maxNamedArgs {
		return bad("%s with %d arguments: the limit is %d", n.GetName(), len(n.GetArgs()), maxNamedArgs)
	}
	args := make(map[string]any, len(n.GetArgs()))
	numbers := func(name string, v *stokerv1.Numbers) ([]float64, error) {
		if len(v.GetValues()) > maxNamedNumbers {
			return nil, fmt.Errorf("%w: transform: %s: %s: %s has %d values: the limit is %d", errs.Unsupported, where, n.GetName(), name, len(v.GetValues()), maxNamedNumbers)
		}
		return append([]float64{}, v.GetValues()...), nil
	}
	for _, a := range n.GetArgs() {
		name := a.GetName()
		if len(name) > maxNamedName {
			return bad("%s: an argument's name of %d bytes: the limit is %d", n.GetName(), len(name), maxNamedName)
		}
		if _, dup := args[name]; dup {
			return bad("%s: argument %q given twice", n.GetName(), name)
		}
		switch v := a.GetValue().(type) {
		case *stokerv1.NamedArg_Number:
			args[name] = v.Number
		case *stokerv1.NamedArg_Numbers:
			vals, err := numbers(name, v.Numbers)
			if err != nil {
				return opspkg.Op{}, err
			}
			args[name] = vals
		case *stokerv1.NamedArg_Text:
			if len(v.Text) > maxNamedText {
				return bad("%s: %s is a string of %d bytes: the limit is %d", n.GetName(), name, len(v.Text), maxNamedText)
			}
			args[name] = v.Text
		case *stokerv1.NamedArg_Flag:
			args[name] = v.Flag
		case *stokerv1.NamedArg_None:
			args[name] = nil
		case *stokerv1.NamedArg_Ops:
			kids, err := ops(v.Ops.GetOps(), fmt.Sprintf("%s (%s) > ", where, truncate(n.GetName(), 64)), depth+1)
			if err != nil {
				return opspkg.Op{}, err
			}
			args[name] = kids
		case *stokerv1.NamedArg_TypedFill:
			t := opspkg.TypedFill{Mask: v.TypedFill.GetMask()}
			if v.TypedFill.Image != nil {
				vals, err := numbers(name, v.TypedFill.GetImage())
				if err != nil {
					return opspkg.Op{}, err
				}
				t.Image = vals
			}
			args[name] = t
		default:
			return bad("%s: %s has no value", n.GetName(), name)
		}
	}
	op, err := opspkg.NamedOp(n.GetName(), args)
	if errors.Is(err, errs.Unsupported) { // "transform: op 1: Pad: fill: ...", the kind of error said once, first
		return op, fmt.Errorf("%w: transform: %s: %s", errs.Unsupported, where, strings.TrimPrefix(err.Error(), errs.Unsupported.Error()+": "))
	}
	if err != nil {
		return op, fmt.Errorf("transform: %s: %w", where, err)
	}
	return op, nil
}

// Wire is the op name with its arguments, name and value pairs (a
// number, a []float64 or []int, a string, a bool, nil for None, or a
// container's []*stokerv1.Op), as the wire's Op: what a Go client sends.
// It panics on an odd list or a value of another type (a caller's bug).
func Wire(name string, kv ...any) *stokerv1.Op {
	if len(kv)%2 != 0 {
		panic("opspec.Wire: an odd list of names and values")
	}
	n := &stokerv1.NamedOp{Name: name}
	for i := 0; i < len(kv); i += 2 {
		a := &stokerv1.NamedArg{Name: kv[i].(string)}
		switch v := kv[i+1].(type) {
		case int:
			a.Value = &stokerv1.NamedArg_Number{Number: float64(v)}
		case float64:
			a.Value = &stokerv1.NamedArg_Number{Number: v}
		case []float64:
			a.Value = &stokerv1.NamedArg_Numbers{Numbers: &stokerv1.Numbers{Values: v}}
		case []int:
			vals := make([]float64, len(v))
			for j, x := range v {
				vals[j] = float64(x)
			}
			a.Value = &stokerv1.NamedArg_Numbers{Numbers: &stokerv1.Numbers{Values: vals}}
		case string:
			a.Value = &stokerv1.NamedArg_Text{Text: v}
		case bool:
			a.Value = &stokerv1.NamedArg_Flag{Flag: v}
		case nil:
			a.Value = &stokerv1.NamedArg_None{None: true}
		case []*stokerv1.Op:
			a.Value = &stokerv1.NamedArg_Ops{Ops: &stokerv1.OpList{Ops: v}}
		default:
			panic(fmt.Sprintf("opspec.Wire: %s's %s: a %T", name, kv[i], v))
		}
		n.Args = append(n.Args, a)
	}
	return &stokerv1.Op{Op: &stokerv1.Op_Named{Named: n}}
}
