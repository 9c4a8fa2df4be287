package ops

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// TestRegistrySchemas holds this room's table to what the reference, the
// Python classes and NamedOp read from it: each definition under its own
// kind, argument names unique, every default a literal parseDefault reads,
// and a number's default inside the argument's own bounds. (The geometry's
// families register from pipeline/transform; its tests check them the
// same way through OpSchemas.)
func TestRegistrySchemas(t *testing.T) {
	kinds := Kinds()
	if len(kinds) == 0 {
		t.Fatal("no op registered in pipeline/ops")
	}
	for _, k := range kinds {
		d := Defs[k]
		if d.Kind != k {
			t.Errorf("%s is registered as %s", k, d.Kind)
		}
		if d.Doc == "" {
			t.Errorf("%s: no doc line for the reference", k)
		}
		seen := map[string]bool{}
		for _, p := range d.Params {
			if seen[p.Name] {
				t.Errorf("%s: argument %s twice", k, p.Name)
			}
			seen[p.Name] = true
			if p.Def == "" {
				continue
			}
			v, err := parseDefault(p.Def)
			if err != nil {
				t.Errorf("%s.%s: default %q: %v", k, p.Name, p.Def, err)
				continue
			}
			if err := p.check(v); err != nil { // its kind and its bounds
				t.Errorf("%s.%s: default %s: %v", k, p.Name, p.Def, err)
			}
		}
	}
}

// TestNamedOpsAtDefaults: every op of this room is read from the wire
// with its required arguments alone.
func TestNamedOpsAtDefaults(t *testing.T) {
	named := 0
	for _, k := range Kinds() {
		d := Defs[k]
		args := map[string]any{}
		for _, p := range d.Params {
			if p.Def == "" {
				t.Logf("%s: %s is required, skipped here (its own tests give it)", k, p.Name)
				args = nil
				break
			}
		}
		if args == nil {
			continue
		}
		named++
		op, err := NamedOp(string(k), args)
		if err != nil {
			t.Errorf("NamedOp(%s) at its defaults: %v", k, err)
			continue
		}
		if op.Kind != k {
			t.Errorf("NamedOp(%s) gave a %s", k, op.Kind)
		}
	}
	if named == 0 {
		t.Fatal("no named op with defaults in pipeline/ops: the test checks nothing")
	}
}

// TestNamedOpRefusals: what a client may get wrong in a NamedOp is
// refused with errs.Unsupported, naming the op and what is wrong.
func TestNamedOpRefusals(t *testing.T) {
	if _, err := NamedOp("NoSuchOp", nil); err == nil || !strings.Contains(err.Error(), "NoSuchOp") {
		t.Errorf("an unknown op: %v, want an error naming it", err)
	}
	cases := []struct {
		kind OpKind
		args map[string]any
		want string
	}{
		{OpRandomChannelPermutation, map[string]any{"no_such_arg": 1.0}, "no_such_arg"},
		{OpRandomEqualize, map[string]any{"p": 2.0}, "want 0..1"},
		{OpRandomEqualize, map[string]any{"p": "high"}, "want a float"},
		{OpRandomApply, map[string]any{"transforms": 1.0}, "want a ops"},
		{OpColorJitter, map[string]any{"brightness": -1.0}, "must be >= 0"},
		{OpColorJitter, map[string]any{"hue": []float64{0, 1, 2}}, "want a number or (min, max)"},
		{OpNormalize, map[string]any{"mean": []float64{0, 0}, "std": []float64{1, 1}}, "3 means"},
		{OpRandomErasing, map[string]any{"value": "noise"}, "want 'random'"},
		{OpRandomErasing, map[string]any{"per_box": true}, "for value='random'"},
		{OpAugMix, map[string]any{"chain_depth": 0.0}, "chain_depth 0"},
		{OpClampBoundingBoxes, map[string]any{"clamping_mode": "tight"}, "clamping_mode"},
		{OpGrayscale, map[string]any{"num_output_channels": 1.0}, "num_output_channels=1"},
		{OpRandomEqualize, map[string]any{"p": math.NaN()}, "finite"},
	}
	for _, c := range cases {
		_, err := NamedOp(string(c.kind), c.args)
		if err == nil {
			t.Errorf("NamedOp(%s, %v): accepted", c.kind, c.args)
			continue
		}
		if !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), string(c.kind)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NamedOp(%s, %v): %v, want errs.Unsupported naming %s and %q", c.kind, c.args, err, c.kind, c.want)
		}
	}
}

// TestParamSet: a value set by name is checked against its argument's
// type and bounds (check, as NamedOp calls it) before it reaches the op
// (set).
func TestParamSet(t *testing.T) {
	p := Param{Name: "p", Typ: PFloat, Def: "0.5", At: func(o *Op) any { return &o.P }, Lo: 0, Hi: 1}
	var op Op
	if err := p.set(&op, 0.25); err != nil || op.P != 0.25 {
		t.Fatalf("p=0.25: %v, op.P %v", err, op.P)
	}
	for _, bad := range []any{1.5, -0.1, math.NaN(), math.Inf(1), "x", true, []float64{0.1, 0.2}} {
		op := Op{P: 0.25}
		err := p.check(bad)
		if err == nil {
			err = p.set(&op, bad)
		}
		if err == nil {
			t.Errorf("p=%v: accepted", bad)
		} else if op.P != 0.25 {
			t.Errorf("p=%v: refused (%v) but the op was changed to %v", bad, err, op.P)
		}
	}
	if err := (&Param{Name: "x", Typ: PFloat}).set(&op, 1.0); err == nil {
		t.Error("an argument with no field took a value")
	}
}

// TestArgsOfAndClone: an op's typed arguments read (ArgsOf: a copy, A's
// zero for none, never writing the op), filled (ArgsAt: made once), and
// copied deeply (CloneArgs: a change to the copy, its slices' too, leaves
// the original).
func TestArgsOfAndClone(t *testing.T) {
	type args struct {
		N    int
		Idx  []int
		Name string
	}
	var op Op
	if a := ArgsOf[args](&op); a.N != 0 || op.Args != nil {
		t.Fatalf("ArgsOf of an op without arguments: %+v, and op.Args %v", a, op.Args)
	}
	ArgsAt[args](&op).N = 3
	ArgsAt[args](&op).Idx = []int{1, 0}
	if a := ArgsOf[args](&op); a.N != 3 || len(a.Idx) != 2 {
		t.Fatalf("ArgsAt filled %+v", a)
	}
	c := CloneArgs(op.Args).(*args)
	c.N, c.Idx[0], c.Name = 4, 9, "copy"
	if a := ArgsOf[args](&op); a.N != 3 || a.Idx[0] != 1 || a.Name != "" {
		t.Errorf("a change to the clone changed the original: %+v", a)
	}
	if CloneArgs(nil) != nil {
		t.Error("CloneArgs(nil) is not nil")
	}
}
