package ops

// An op (Op: its kind and torchvision's arguments) and its schema: its
// arguments as torchvision names them, their defaults and bounds. The
// reference and the Python classes are made from it (OpSchemas), and a
// NamedOp (every op on the wire: its name and arguments) is read through
// it (NamedOp, then the op's FromArgs: args.go).

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// paramType is what an argument holds.
type paramType uint8

const (
	PFloat  paramType = iota + 1
	PInt              // an integer
	PBool             // True or False
	PRange            // (min, max), or one number x meaning the op's own range about it
	PSize             // an int, or (h, w)
	PFill             // a number, or one a channel; None where the op says
	PInterp           // "nearest", "bilinear" or "bicubic"
	PString           // a name or a config string
	pOps              // a list of ops (a container's)
	PFloats           // a list of numbers
	PInts             // a list of integers
	pAny              // one of several forms (its doc says which)
	PFillBy           // a fill, or torchvision's fill per type: {Image: v, Mask: m, "others": o}
)

var paramTypeNames = [...]string{PFloat: "float", PInt: "int", PBool: "bool", PRange: "range", PSize: "size", PFill: "fill",
	PInterp: "interpolation", PString: "str", pOps: "ops", PFloats: "floats", PInts: "ints", pAny: "any",
	PFillBy: "typed_fill"}

// Param is one argument of an op.
type Param struct {
	Name string
	Typ  paramType
	// Def is its default as Python writes it ("0.5", "(0.08, 1.0)",
	// "'bilinear'", "None"); "" for a required argument.
	Def string
	// kwOnly: keyword-only (after torchvision's *).
	kwOnly bool
	// At is the Op field a value of it sets, for an op without a
	// FromArgs (nil: none; FromArgs reads it); Lo and Hi bound its
	// numbers, when Hi > Lo.
	At     func(op *Op) any
	Lo, Hi float64
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

var targetRoleNames = [...]string{targetsRefused: "refused", TargetsPixels: "pixels", TargetsMove: "moves",
	TargetsInstances: "instances", TargetsContainer: "ops"}

// OpSchemas are the registered ops' schemas, by name.
func OpSchemas() []OpSchema {
	var out []OpSchema
	for _, k := range Kinds() {
		d := Defs[k]
		s := OpSchema{Name: string(k), Doc: d.Doc, Place: "after", Targets: targetRoleNames[d.Targets],
			NeedsTargets: d.NeedsTargets, Named: d.Named, Params: []ParamSchema{}}
		switch {
		case d.Geometry:
			s.Place = "geometry"
		case d.Targets == TargetsContainer:
			s.Place = "container"
		}
		for _, p := range d.Params {
			ps := ParamSchema{Name: p.Name, Type: paramTypeNames[p.Typ], Default: p.Def, Required: p.Def == "", KeywordOnly: p.kwOnly}
			if p.Hi > p.Lo {
				lo, hi := p.Lo, p.Hi
				ps.Min, ps.Max = &lo, &hi
			}
			s.Params = append(s.Params, ps)
		}
		out = append(out, s)
	}
	return out
}

// NamedOp is the op kind with args (torchvision's argument names; each a
// float64, a []float64, a string, a bool, nil for None, a TypedFill or a
// container's []Op), the others at their defaults: an op from the wire.
// Each value is checked against its param's type and bounds, then the
// op's FromArgs makes it (or, without one, each param sets its field,
// Param.At).
func NamedOp(kind string, args map[string]any) (Op, error) {
	d := Lookup(OpKind(kind))
	if d == nil {
		return Op{}, errUnknownOp(OpKind(kind))
	}
	bad := func(format string, a ...any) (Op, error) {
		return Op{}, fmt.Errorf("%w: %s: %s", errs.Unsupported, kind, fmt.Sprintf(format, a...))
	}
	for name := range args {
		if !hasParam(d.Params, name) {
			return bad("unknown argument %q", TruncKind(OpKind(name)))
		}
	}
	a := &Args{kind: d.Kind, vals: make(map[string]any, len(d.Params)), given: make(map[string]bool, len(args))}
	for _, p := range d.Params {
		v, given := args[p.Name]
		if !given {
			if p.Def == "" {
				return bad("%s is required", p.Name)
			}
			var err error
			if v, err = parseDefault(p.Def); err != nil {
				panic(fmt.Sprintf("pipeline: %s's %s default %q: %v", kind, p.Name, p.Def, err))
			}
		} else if err := p.check(v); err != nil {
			return bad("%s: %v", p.Name, err)
		}
		a.vals[p.Name], a.given[p.Name] = v, given
	}
	if d.FromArgs != nil {
		op := d.FromArgs(a)
		op.Kind = d.Kind
		return op, a.Err()
	}
	op := Op{Kind: d.Kind}
	for _, p := range d.Params {
		if err := p.set(&op, a.vals[p.Name]); err != nil {
			return bad("%s: %v", p.Name, err)
		}
	}
	return op, nil
}

func hasParam(ps []Param, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// set sets p's field of op (At) to v: v's kind and bounds are checked
// (Param.check), its shape here: a size of one number is (x, x).
func (p *Param) set(op *Op, v any) error {
	if p.At == nil {
		if v == nil {
			return nil // None where the op has no field: its default
		}
		return fmt.Errorf("not settable by name")
	}
	if v == nil {
		return nil // None: the field's zero (the op's doc says what it means)
	}
	integers := func(xs []float64) ([]int, error) {
		out := make([]int, len(xs))
		for i, x := range xs {
			if x != math.Trunc(x) || math.Abs(x) > 1<<30 {
				return nil, fmt.Errorf("%v: want integers", xs)
			}
			out[i] = int(x)
		}
		return out, nil
	}
	nums, _ := v.([]float64)
	if x, ok := v.(float64); ok {
		nums = []float64{x}
	}
	switch f := p.At(op).(type) {
	case *float64:
		if x, ok := v.(float64); ok {
			*f = x
			return nil
		}
	case *int:
		if x, ok := v.(float64); ok {
			is, err := integers([]float64{x})
			if err != nil {
				return fmt.Errorf("%v: want an integer", x)
			}
			*f = is[0]
			return nil
		}
	case *[2]int:
		if len(nums) == 1 {
			nums = []float64{nums[0], nums[0]} // a size of one number: (x, x)
		}
		if len(nums) != 2 {
			return fmt.Errorf("%d values: want 2", len(nums))
		}
		is, err := integers(nums)
		if err != nil {
			return err
		}
		*f = [2]int(is)
		return nil
	case *[]int:
		if nums != nil {
			is, err := integers(nums)
			*f = is
			return err
		}
	case *[3]float64:
		if len(nums) != 3 {
			return fmt.Errorf("%d values: want 3", len(nums))
		}
		*f = [3]float64(nums)
		return nil
	case *bool:
		if x, ok := v.(bool); ok {
			*f = x
			return nil
		}
	case *string:
		if x, ok := v.(string); ok {
			*f = x
			return nil
		}
	case *kernels.Interpolation:
		if x, ok := v.(string); ok {
			in, err := fn.ParseInterpolation(x)
			*f = in
			return err
		}
	default:
		panic(fmt.Sprintf("pipeline: param %s sets a %T", p.Name, f))
	}
	return fmt.Errorf("%v: want a %s", v, paramTypeNames[p.Typ])
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

func OpsString(ops []Op) string {
	var b strings.Builder
	for i := range ops {
		if i > 0 {
			b.WriteString(", ")
		}
		op := &ops[i]
		b.WriteString(string(op.Kind))
		format := FormatP
		if d := Lookup(op.Kind); d != nil && d.Format != nil {
			format = d.Format
		}
		format(&b, op)
	}
	return b.String()
}

// OpKind names an op, with torchvision.transforms.v2's name and semantics.
type OpKind string

// The ops a Transform is built from are defined by their families' files
// (this package's, and the geometry's op_*.go in the pipeline's root), each
// registered with its schema (registry.go). The geometry
// (the first op, or Resize then CenterCrop, and detection's) is fused into
// the decode; every other op runs on the output-sized crop, in the order
// given.

// Op is one step of a transform, with torchvision's arguments: the ones
// many ops share (size, p, a container's ops) as its fields, and an op's
// own in its typed struct (Args), declared beside its Def; a fill and an
// interpolation are an op's own too (Filling and Resampling, embedded in
// its struct). Each kind reads the fields its doc names; zero fields take
// torchvision's defaults where the doc says so (RandomResizedCrop's scale
// (0.08, 1) and ratio (3/4, 4/3), say), and the wire
// (server/transform.go) fills every other default in before a Transform
// is made. Size is (height, width); Resize
// with Size[1] == 0 resizes the shorter side to Size[0] keeping the aspect
// ratio, like Resize(int).
type Op struct {
	Kind OpKind
	// Size: RandomResizedCrop, Resize, CenterCrop, RandomCrop.
	Size [2]int
	// P: the probability of the Random* ops that have one, and of
	// RandomApply.
	P float64
	// Ops: RandomApply's, RandomChoice's and RandomOrder's ops.
	Ops []Op
	// Args is the op's own arguments, a pointer to its struct
	// (BlurArgs, RotationArgs, MosaicArgs, ...: each declared beside the
	// op's Def, in its family's file), for an op that has any: set while
	// the op is made (its FromArgs, or its Params' At through ArgsAt; or
	// a literal) and read with ArgsOf. Copies of an op share it: a copy
	// that is to be changed copies it first (CloneArgs, as cloneOps does).
	Args any
}

// Filling is the fill of an op that uncovers pixels (a warp's corners, a
// pad's border: RandomRotation, RandomAffine, the policies, Pad,
// RandomCrop's padding, ...), embedded in its own arguments' struct and
// read by the code every such op shares through FillOf.
type Filling struct {
	// Fill is one value per channel; FillNone is torchvision's fill=None
	// (the policies' default), which for bilinear keeps a border pixel's
	// inside taps instead of blending towards a fill.
	Fill     [3]float64
	FillNone bool
	// FillTyped: a fill per type ({Image: v, Mask: m}): Fill (FillNone)
	// the pixels' alone, FillMask the masks' (else Fill is every type's;
	// CheckMasks).
	FillTyped bool
	FillMask  float64
}

func (f *Filling) filling() *Filling { return f }

// FillOf is op's fill: its arguments' Filling, zero for an op that has
// none.
func FillOf(op *Op) Filling {
	if f, ok := op.Args.(interface{ filling() *Filling }); ok {
		return *f.filling()
	}
	return Filling{}
}

// Resampling is how an op that resamples interpolates (the geometry's
// resizes, the warps, the policies, the VLMs' resizes), embedded in its
// own arguments' struct and read by the code they share through
// ResamplingOf.
type Resampling struct {
	Interp kernels.Interpolation
	// NoAntialias is torchvision's antialias=False (the geometry only).
	NoAntialias bool
}

func (r *Resampling) resampling() *Resampling { return r }

// Antialiased reports whether a resize by r filters as torchvision's
// antialias=True does: unless antialias=False, and never for nearest.
func (r Resampling) Antialiased() bool { return !r.NoAntialias && r.Interp != kernels.Nearest }

// ResamplingOf is op's resampling: its arguments' Resampling, zero
// (bilinear, antialiased) for an op that has none.
func ResamplingOf(op *Op) Resampling {
	if r, ok := op.Args.(interface{ resampling() *Resampling }); ok {
		return *r.resampling()
	}
	return Resampling{}
}

// ArgsOf is op's typed arguments (op.Args, a *A), or A's zero when op
// has none. It never changes op: ops are read from many goroutines.
// op.Args of another type than *A is a programming error.
func ArgsOf[A any](op *Op) A {
	if op.Args == nil {
		var zero A
		return zero
	}
	return *op.Args.(*A)
}

// CloneArgs is a copy of args (an Op's Args, a pointer to its struct),
// its slices copied too, so that the copy may be filled or changed alone
// (nil for nil): what copying an op deeply takes.
func CloneArgs(args any) any {
	if args == nil {
		return nil
	}
	v := reflect.ValueOf(args).Elem()
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	for i := range c.NumField() {
		if f := c.Field(i); f.Kind() == reflect.Slice && !f.IsNil() {
			f.Set(reflect.AppendSlice(reflect.MakeSlice(f.Type(), 0, f.Len()), f))
		}
	}
	return c.Addr().Interface()
}

// ArgsAt is op's typed arguments to fill, made (zero) when op has none
// yet: what a Param's At returns a field of while NamedOp makes the op.
// op.Args of another type than *A is a programming error.
func ArgsAt[A any](op *Op) *A {
	if op.Args == nil {
		op.Args = new(A)
	}
	return op.Args.(*A)
}

// ColorJitterOp is ColorJitter(brightness, contrast, saturation, hue) in
// torchvision's single-number form.
func ColorJitterOp(brightness, contrast, saturation, hue float64) Op {
	return Op{Kind: OpColorJitter, Args: &ColorJitterArgs{Brightness: brightness, Contrast: contrast, Saturation: saturation, Hue: hue}}
}
