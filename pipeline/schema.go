package pipeline

// An op's schema: its arguments as torchvision names them, their
// defaults and bounds. The reference and the Python classes are made from
// it (OpSchemas), and a NamedOp (an op on the wire by name, with no
// message of its own) is read through it (NamedOp).

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// paramType is what an argument holds.
type paramType uint8

const (
	pFloat  paramType = iota + 1
	pInt              // an integer
	pBool             // True or False
	pRange            // (min, max), or one number x meaning the op's own range about it
	pSize             // an int, or (h, w)
	pFill             // a number, or one a channel; None where the op says
	pInterp           // "nearest", "bilinear" or "bicubic"
	pString           // a name or a config string
	pOps              // a list of ops (a container's)
	pFloats           // a list of numbers
	pInts             // a list of integers
	pAny              // one of several forms (its doc says which)
	pFillBy           // a fill, or torchvision's fill per type: {Image: v, Mask: m, "others": o}
)

var paramTypeNames = [...]string{pFloat: "float", pInt: "int", pBool: "bool", pRange: "range", pSize: "size", pFill: "fill",
	pInterp: "interpolation", pString: "str", pOps: "ops", pFloats: "floats", pInts: "ints", pAny: "any",
	pFillBy: "typed_fill"}

// param is one argument of an op.
type param struct {
	name string
	typ  paramType
	// def is its default as Python writes it ("0.5", "(0.08, 1.0)",
	// "'bilinear'", "None"); "" for a required argument.
	def string
	// kwOnly: keyword-only (after torchvision's *).
	kwOnly bool
	// field is the Op field a NamedOp's value of it sets ("": a NamedOp
	// may not set it); lo and hi bound its numbers, when hi > lo.
	field  string
	lo, hi float64
}

// OpSchema is an op as the reference and the clients see it.
type OpSchema struct {
	Name string `json:"name"`
	Doc  string `json:"doc"`
	// Place: "geometry" (fused into the decode, first), "after" (on the
	// decoded crop, in order) or "container".
	Place string `json:"place"`
	// Targets: what it does to a job's targets: "pixels" (leaves them),
	// "moves", "instances" (drops, clamps or reformats them), "ops" (a
	// container: its ops'), "refused".
	Targets      string `json:"targets"`
	NeedsTargets bool   `json:"needs_targets,omitempty"`
	// Named: on the wire as a NamedOp, its Python class generated.
	Named  bool          `json:"named,omitempty"`
	Params []ParamSchema `json:"params"`
}

// ParamSchema is one argument of an OpSchema.
type ParamSchema struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Default is Python's literal; absent for a required argument.
	Default     string   `json:"default,omitempty"`
	Required    bool     `json:"required,omitempty"`
	KeywordOnly bool     `json:"keyword_only,omitempty"`
	Min         *float64 `json:"min,omitempty"`
	Max         *float64 `json:"max,omitempty"`
}

var targetRoleNames = [...]string{targetsRefused: "refused", targetsPixels: "pixels", targetsMove: "moves",
	targetsInstances: "instances", targetsContainer: "ops"}

// OpSchemas are the registered ops' schemas, by name.
func OpSchemas() []OpSchema {
	var out []OpSchema
	for _, k := range opKinds() {
		d := opDefs[k]
		s := OpSchema{Name: string(k), Doc: d.doc, Place: "after", Targets: targetRoleNames[d.targets],
			NeedsTargets: d.needsTargets, Named: d.named, Params: []ParamSchema{}}
		switch {
		case d.geometry:
			s.Place = "geometry"
		case d.targets == targetsContainer:
			s.Place = "container"
		}
		for _, p := range d.params {
			ps := ParamSchema{Name: p.name, Type: paramTypeNames[p.typ], Default: p.def, Required: p.def == "", KeywordOnly: p.kwOnly}
			if p.hi > p.lo {
				lo, hi := p.lo, p.hi
				ps.Min, ps.Max = &lo, &hi
			}
			s.Params = append(s.Params, ps)
		}
		out = append(out, s)
	}
	return out
}

// NamedOp is the op kind with args (torchvision's argument names; each a
// float64, a []float64, a string or a bool), the others at their
// defaults: a NamedOp from the wire. Only a named op (opDef.named) is read
// so; every value is checked against its param's type and bounds.
func NamedOp(kind string, args map[string]any) (Op, error) {
	d := lookupOp(OpKind(kind))
	if d == nil {
		return Op{}, errUnknownOp(OpKind(kind))
	}
	bad := func(format string, a ...any) (Op, error) {
		return Op{}, fmt.Errorf("%w: %s: %s", ErrUnsupported, kind, fmt.Sprintf(format, a...))
	}
	if !d.named {
		return bad("it has a message of its own on the wire: send that, not a NamedOp")
	}
	op := Op{Kind: d.kind}
	for _, p := range d.params {
		v, given := args[p.name]
		if !given {
			if p.def == "" {
				return bad("%s is required", p.name)
			}
			var err error
			if v, err = parseDefault(p.def); err != nil {
				panic(fmt.Sprintf("pipeline: %s's %s default %q: %v", kind, p.name, p.def, err))
			}
		}
		if err := p.set(&op, v); err != nil {
			return bad("%s: %v", p.name, err)
		}
	}
	for name := range args {
		if !hasParam(d.params, name) {
			return bad("unknown argument %q", truncKind(OpKind(name)))
		}
	}
	return op, nil
}

func hasParam(ps []param, name string) bool {
	for _, p := range ps {
		if p.name == name {
			return true
		}
	}
	return false
}

// set sets p's field of op to v, checked against p's type and bounds.
func (p *param) set(op *Op, v any) error {
	if p.field == "" {
		if v == nil {
			return nil // None where the op has no field: its default
		}
		return fmt.Errorf("not settable by name")
	}
	f := reflect.ValueOf(op).Elem().FieldByName(p.field)
	if v == nil {
		return nil // None: the field's zero (the op's doc says what it means)
	}
	num := func(x float64) error {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%v: want a finite number", x)
		}
		if p.hi > p.lo && !(x >= p.lo && x <= p.hi) {
			return fmt.Errorf("%v: want %v..%v", x, p.lo, p.hi)
		}
		return nil
	}
	switch x := v.(type) {
	case float64:
		if err := num(x); err != nil {
			return err
		}
		switch f.Kind() {
		case reflect.Float64:
			f.SetFloat(x)
			return nil
		case reflect.Int:
			if x != math.Trunc(x) || math.Abs(x) > 1<<30 {
				return fmt.Errorf("%v: want an integer", x)
			}
			f.SetInt(int64(x))
			return nil
		case reflect.Array: // a size: (x, x)
			return p.set(op, []float64{x, x})
		}
	case []float64:
		if f.Kind() == reflect.Array && f.Type().Elem().Kind() == reflect.Int && len(x) == 1 && f.Len() == 2 {
			x = []float64{x[0], x[0]} // a size of one number: (x, x)
		}
		if fk := f.Kind(); (fk == reflect.Slice || (fk == reflect.Array && f.Len() == len(x))) && f.Type().Elem().Kind() == reflect.Int {
			if f.Kind() == reflect.Slice {
				f.Set(reflect.MakeSlice(f.Type(), len(x), len(x)))
			}
			for i, e := range x {
				if err := num(e); err != nil {
					return err
				}
				if e != math.Trunc(e) {
					return fmt.Errorf("%v: want integers", x)
				}
				f.Index(i).SetInt(int64(e))
			}
			return nil
		}
		if f.Kind() == reflect.Array && f.Type().Elem().Kind() == reflect.Float64 && f.Len() == len(x) {
			for i, e := range x {
				if err := num(e); err != nil {
					return err
				}
				f.Index(i).SetFloat(e)
			}
			return nil
		}
		return fmt.Errorf("%d values: want %d", len(x), f.Len())
	case bool:
		if f.Kind() == reflect.Bool {
			f.SetBool(x)
			return nil
		}
	case string:
		switch {
		case f.Type() == reflect.TypeOf(Interpolation(0)):
			in, err := ParseInterpolation(x)
			if err != nil {
				return err
			}
			f.Set(reflect.ValueOf(in))
			return nil
		case f.Kind() == reflect.String:
			f.SetString(x)
			return nil
		}
	}
	return fmt.Errorf("%v: want a %s", v, paramTypeNames[p.typ])
}

// parseDefault reads a default's Python literal: None, True, False, a
// number, a quoted string or a tuple of numbers.
func parseDefault(s string) (any, error) {
	switch s {
	case "None":
		return nil, nil
	case "True":
		return true, nil
	case "False":
		return false, nil
	}
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return s[1 : len(s)-1], nil
	}
	if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
		var out []float64
		for _, e := range strings.Split(strings.Trim(s, "()"), ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			x, err := strconv.ParseFloat(e, 64)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	return strconv.ParseFloat(s, 64)
}
