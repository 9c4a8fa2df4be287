package ops

// A named op's arguments (Args): what a client sent by torchvision's names
// and in torchvision's forms, each checked against its param's type (and
// bounds) before the op's FromArgs reads it, the others at their defaults.
// An op that reads its arguments so is made from them in one place, its
// family's file; what is left to the wire (internal/opspec) is their
// encoding.

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TypedFill is torchvision's fill per type ({Image: v, Mask: m}): the
// pixels' fill (nil: None) and the masks' (a uint8 Mask's value).
type TypedFill struct {
	Image []float64
	Mask  float64
}

// Args is a named op's arguments: every param's value, given or its
// default (nil: None). Each getter reads one in the form it wants and
// records the first error (Err), naming the op and the argument.
type Args struct {
	kind  OpKind
	vals  map[string]any
	given map[string]bool
	err   error
}

// Errorf records an error about the op's arguments (the first one wins).
func (a *Args) Errorf(format string, v ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("%w: %s: %s", errs.Unsupported, a.kind, fmt.Sprintf(format, v...))
	}
}

// Err is the first error a getter or FromArgs recorded.
func (a *Args) Err() error { return a.err }

// Given: the client sent name (not its default).
func (a *Args) Given(name string) bool { return a.given[name] }

// IsNone: name is None.
func (a *Args) IsNone(name string) bool { return a.vals[name] == nil }

// Float is a number.
func (a *Args) Float(name string) float64 {
	switch v := a.vals[name].(type) {
	case float64:
		return v
	case []float64:
		if len(v) == 1 {
			return v[0]
		}
	}
	a.Errorf("%s %v: want a number", name, a.show(name))
	return 0
}

// Int is an integral number, bounded to ±2^30.
func (a *Args) Int(name string) int {
	x := a.Float(name)
	if x != math.Trunc(x) || math.Abs(x) > 1<<30 {
		a.Errorf("%s %v: want an integer", name, x)
		return 0
	}
	return int(x)
}

// Bool is True or False.
func (a *Args) Bool(name string) bool {
	v, ok := a.vals[name].(bool)
	if !ok {
		a.Errorf("%s %v: want True or False", name, a.show(name))
	}
	return v
}

// Str is a string ("" for None).
func (a *Args) Str(name string) string {
	switch v := a.vals[name].(type) {
	case string:
		return v
	case nil:
		return ""
	}
	a.Errorf("%s %v: want a string", name, a.show(name))
	return ""
}

// Floats is a tuple of numbers (one number: a tuple of it; None: nil).
func (a *Args) Floats(name string) []float64 {
	switch v := a.vals[name].(type) {
	case float64:
		return []float64{v}
	case []float64:
		return v
	case nil:
		return nil
	}
	a.Errorf("%s %v: want numbers", name, a.show(name))
	return nil
}

// Ints is a tuple of integers, each bounded to 0..2^20 (None: nil).
func (a *Args) Ints(name string) []int {
	fs := a.Floats(name)
	out := make([]int, 0, len(fs))
	for _, x := range fs {
		if x != math.Trunc(x) || x < 0 || x > 1<<20 {
			a.Errorf("%s %v: want integers in 0..%d", name, fs, 1<<20)
			return nil
		}
		out = append(out, int(x))
	}
	return out
}

// Pair is (min, max): two numbers.
func (a *Args) Pair(name string) [2]float64 {
	fs := a.Floats(name)
	if len(fs) != 2 {
		a.Errorf("%s %v: want (min, max)", name, a.show(name))
		return [2]float64{}
	}
	return [2]float64(fs)
}

// Size is torchvision's size, (h, w): an int is square.
func (a *Args) Size(name string) [2]int {
	is := a.Ints(name)
	switch len(is) {
	case 1:
		return [2]int{is[0], is[0]}
	case 2:
		return [2]int(is)
	}
	a.Errorf("%s %v: want an int or (h, w)", name, a.show(name))
	return [2]int{}
}

// Interp is an interpolation by torchvision's name.
func (a *Args) Interp(name string) kernels.Interpolation {
	in, err := fn.ParseInterpolation(a.Str(name))
	if err != nil {
		a.Errorf("%s: %v", name, err)
	}
	return in
}

// Resampling is the interpolation of argument interp ("": bilinear, for
// an op that reads it itself), and the antialias of argument "antialias"
// where the op has one (None is True, what torchvision does on PIL
// images).
func (a *Args) Resampling(interp string) Resampling {
	var r Resampling
	if interp != "" {
		r.Interp = a.Interp(interp)
	}
	if _, ok := a.vals["antialias"]; ok && !a.IsNone("antialias") {
		r.NoAntialias = !a.Bool("antialias")
	}
	return r
}

// Fill is a fill of one value or one a channel (None: none, false).
func (a *Args) Fill(name string) (fill [3]float64, ok bool) { return a.fill(name, a.Floats(name)) }

// fill is the fill fs (nil: None, false) of argument name.
func (a *Args) fill(name string, fs []float64) (fill [3]float64, ok bool) {
	switch len(fs) {
	case 0:
		return fill, fs != nil
	case 1:
		return [3]float64{fs[0], fs[0], fs[0]}, true
	case 3:
		return [3]float64(fs), true
	}
	a.Errorf("%s has %d values: want 1 or 3 (one per channel)", name, len(fs))
	return fill, false
}

// TypedFill is argument name as an op's fill: Fill (FillNone where it is
// None and noneOK, else zero), and with a fill per type the masks'
// (FillTyped, FillMask).
func (a *Args) TypedFill(name string, noneOK bool) (f Filling) {
	t, typed := a.vals[name].(TypedFill)
	if !typed {
		f.Fill, _ = a.Fill(name)
		f.FillNone = noneOK && a.IsNone(name)
		return f
	}
	if !(t.Mask >= 0 && t.Mask <= 255) || t.Mask != math.Trunc(t.Mask) {
		a.Errorf("%s: the Mask's fill %v: want an integer 0..255 (a uint8 Mask's value)", name, t.Mask)
	}
	f.FillTyped, f.FillMask = true, t.Mask
	f.Fill, _ = a.fill(name, t.Image)
	f.FillNone = noneOK && t.Image == nil
	return f
}

// Ops is a container's ops.
func (a *Args) Ops(name string) []Op {
	v, ok := a.vals[name].([]Op)
	if !ok {
		a.Errorf("%s: want a list of ops", name)
	}
	return v
}

// show is name's value for a message.
func (a *Args) show(name string) any { return showArg(a.vals[name]) }

// check checks v's kind against p's type (its shape is the getters').
func (p *Param) check(v any) error {
	if v == nil {
		return nil
	}
	ok := false
	switch p.Typ {
	case PFloat, PInt:
		_, ok = v.(float64)
	case PBool:
		_, ok = v.(bool)
	case PString, PInterp:
		_, ok = v.(string)
	case PRange, PSize, PFill, PFloats, PInts:
		switch v.(type) {
		case float64, []float64:
			ok = true
		}
	case PFillBy:
		switch v.(type) {
		case float64, []float64, TypedFill:
			ok = true
		}
	case pOps:
		_, ok = v.([]Op)
	case pAny:
		ok = true
	}
	if !ok {
		return fmt.Errorf("%v: want a %s", showArg(v), paramTypeNames[p.Typ])
	}
	var nums []float64
	switch x := v.(type) {
	case float64:
		nums = []float64{x}
	case []float64:
		nums = x
	case TypedFill:
		nums = append([]float64{x.Mask}, x.Image...)
	}
	for _, x := range nums {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%v: want finite numbers", showArg(v))
		}
		if p.Hi > p.Lo && !(x >= p.Lo && x <= p.Hi) {
			return fmt.Errorf("%v: want %v..%v", x, p.Lo, p.Hi)
		}
	}
	return nil
}

func showArg(v any) any {
	if ops, ok := v.([]Op); ok {
		return fmt.Sprintf("[%d ops]", len(ops))
	}
	return v
}
