package opspec

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stoker-dev/stoker/pipeline/errs"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestRetiredOps: an op an old client sends as its own message (a field
// number Op reserves now) is refused naming the op, before and after the
// job's unknown fields are dropped (Retired, then Transform), in an op
// list and in a view group's.
func TestRetiredOps(t *testing.T) {
	if len(retiredOps) != 45 {
		t.Fatalf("%d retired ops: the wire had 45 per-op messages", len(retiredOps))
	}
	for num, name := range retiredOps {
		old := &stokerv1.Op{}
		// The old message's bytes: an empty message of that field.
		old.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), nil))
		flip := Wire("RandomHorizontalFlip")
		for _, spec := range []*stokerv1.TransformSpec{
			{Ops: []*stokerv1.Op{flip, old}},
			{Views: []*stokerv1.ViewGroup{{Count: 1, Transform: &stokerv1.TransformSpec{Ops: []*stokerv1.Op{flip, old}}}}},
		} {
			err := Retired(spec)
			if !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "op 1: "+name+" came as its own message") ||
				!strings.Contains(err.Error(), "upgrade the client") {
				t.Errorf("field %d: Retired: %v, want an error naming op 1 and %s", num, err, name)
			}
			if _, err := Transform(spec, transform.CHW); err == nil || !strings.Contains(err.Error(), name+" came as its own message") {
				t.Errorf("field %d: Transform: %v, want an error naming %s", num, err, name)
			}
		}
	}
	// An op with no known field and no retired one is a newer client's.
	newer := &stokerv1.Op{}
	newer.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 1))
	if _, err := Transform(&stokerv1.TransformSpec{Ops: []*stokerv1.Op{newer}}, transform.CHW); err == nil || !strings.Contains(err.Error(), "the op is empty") {
		t.Errorf("a newer client's op: %v, want \"the op is empty\"", err)
	}
}

// TestWire: what Wire builds is read back as the op it names, containers
// and None included.
func TestWire(t *testing.T) {
	spec := &stokerv1.TransformSpec{Ops: []*stokerv1.Op{
		Wire("RandomResizedCrop", "size", []int{32, 48}, "scale", []float64{0.5, 1}, "interpolation", "bicubic", "antialias", false),
		Wire("RandomApply", "transforms", []*stokerv1.Op{Wire("ColorJitter", "brightness", 0.4, "hue", []float64{-0.1, 0.1})}, "p", 0.8),
		Wire("RandomRotation", "degrees", 10, "fill", nil),
	}}
	tf, err := Transform(spec, transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	got := tf.String()
	for _, want := range []string{"RandomResizedCrop(32x48, bicubic)", "RandomApply([ColorJitter], p=0.8)", "RandomRotation"} {
		if !strings.Contains(got, want) {
			t.Errorf("Transform %q: want %q in it", got, want)
		}
	}
	ops, err := Ops(spec.GetOps())
	if err != nil {
		t.Fatal(err)
	}
	if r := ops[0]; !opspkg.ResamplingOf(&r).NoAntialias || opspkg.ArgsOf[transform.RRCArgs](&r).Scale != [2]float64{0.5, 1} {
		t.Errorf("RandomResizedCrop(antialias=False, scale=(0.5, 1)): %+v", opspkg.ArgsOf[transform.RRCArgs](&r))
	}
	if j := opspkg.ArgsOf[opspkg.ColorJitterArgs](&ops[1].Ops[0]).Jitter; j[0] != [2]float64{0.6, 1.4} || j[3] != [2]float64{-0.1, 0.1} || j[1] != [2]float64{1, 1} {
		t.Errorf("ColorJitter(brightness=0.4, hue=(-0.1, 0.1)): Jitter %v", j)
	}
	if r := ops[2]; opspkg.ArgsOf[transform.RotationArgs](&r).Degrees != [2]float64{-10, 10} || !opspkg.FillOf(&r).FillNone {
		t.Errorf("RandomRotation(10, fill=None): args %+v, FillNone %v", r.Args, opspkg.FillOf(&r).FillNone)
	}
}

// TestEveryOpAtItsDefaults: every registered op (the geometry's families'
// too) is read from the wire with only the arguments its schema requires,
// given by an example, and every default of its schema is one its reading
// takes: none of them is refused.
func TestEveryOpAtItsDefaults(t *testing.T) {
	required := map[string][]any{
		"size": {224}, "kernel_size": {3}, "mean": {[]float64{0.5, 0.5, 0.5}}, "std": {[]float64{0.2, 0.2, 0.2}},
		"format": {"XYWH"}, "threshold": {128}, "bits": {4}, "sharpness_factor": {2}, "degrees": {10},
		"padding": {4}, "target_size": {[]int{640, 480}}, "min_size": {[]int{480}},
		"transforms": {[]*stokerv1.Op{Wire("RandomHorizontalFlip")}}, "grid_pinpoints": {[]int{336, 672}},
	}
	// RandomResize's two sizes: an int each, min < max.
	own := map[string][]any{"RandomResize": {"min_size", 256, "max_size", 320}}
	for _, s := range opspkg.OpSchemas() {
		args, ok := own[s.Name]
		for _, p := range s.Params {
			if ok || !p.Required {
				continue
			}
			ex, known := required[p.Name]
			if !known {
				t.Fatalf("%s: no example of its required %s", s.Name, p.Name)
			}
			args = append(args, p.Name, ex[0])
		}
		if _, err := Ops([]*stokerv1.Op{Wire(s.Name, args...)}); err != nil {
			t.Errorf("%s at its defaults: %v", s.Name, err)
		}
	}
}
