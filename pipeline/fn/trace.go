package fn

// A step in a trace: [name, {args}] as JSON, written and parsed by its
// Def's args.

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/stoker-dev/stoker/pipeline/targets"
)

// AppendJSON appends the step as a [name, {args}] pair.
func (st *Step) AppendJSON(b []byte) []byte {
	spec := st.Fn.Def()
	b = append(b, `["`...)
	b = append(b, spec.name...)
	b = append(b, `",{`...)
	for i, a := range spec.args {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, a.name)
		b = append(b, ':')
		switch a.kind {
		case argInt:
			b = appendList(b, a.n, func(b []byte, k int) []byte { return strconv.AppendInt(b, int64(st.I[a.at+k]), 10) })
		case argFloat:
			b = appendList(b, a.n, func(b []byte, k int) []byte { return AppendFloat(b, st.F[a.at+k]) })
		case argInterp:
			b = strconv.AppendQuote(b, st.Interp.String())
		case argAntialias:
			b = strconv.AppendBool(b, st.Antialias)
		case argBoxFormat:
			b = strconv.AppendQuote(b, targets.BoxFormat(st.I[a.at]).String())
		case argBool:
			b = strconv.AppendBool(b, st.I[a.at] != 0)
		case argCorners, argStartCorners:
			start, end := st.corners()
			pts := &end
			if a.kind == argStartCorners {
				pts = &start
			}
			b = appendList(b, 4, func(b []byte, k int) []byte {
				return appendList(b, 2, func(b []byte, j int) []byte { return strconv.AppendInt(b, int64(pts[k][j]), 10) })
			})
		case argFill:
			if st.FillNone {
				b = append(b, "null"...)
			} else {
				b = appendList(b, 3, func(b []byte, k int) []byte { return AppendFloat(b, st.Fill[k]) })
			}
		case argCenter:
			if !st.HasCenter {
				b = append(b, "null"...)
			} else {
				b = appendList(b, 2, func(b []byte, k int) []byte { return AppendFloat(b, st.Center[k]) })
			}
		case argEraseValue:
			if st.Random {
				b = append(b, `"random"`...)
			} else {
				b = appendList(b, 3, func(b []byte, k int) []byte { return AppendFloat(b, st.Fill[k]) })
			}
		default: // the YOLO family's (yolo.go)
			b = st.appendYOLOArg(b, a)
		}
	}
	return append(b, "}]"...)
}

// appendList appends n values, as a JSON list when n > 1.
func appendList(b []byte, n int, one func([]byte, int) []byte) []byte {
	if n == 1 {
		return one(b, 0)
	}
	b = append(b, '[')
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = one(b, k)
	}
	return append(b, ']')
}

// AppendInts appends v as a JSON list of integers (always a list, of any
// length).
func AppendInts(b []byte, v []int) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']')
}

// AppendFloat appends f in the shortest form that reads back as the same
// float64, always with a '.' or an exponent so that Python reads a float.
func AppendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	for _, c := range b[n:] {
		if c == '.' || c == 'e' || c == 'n' || c == 'I' {
			return b
		}
	}
	return append(b, ".0"...)
}

func ParseStep(p [2]json.RawMessage) (Step, error) {
	var name string
	if err := json.Unmarshal(p[0], &name); err != nil {
		return Step{}, fmt.Errorf("name: %v", err)
	}
	f, ok := byName[name]
	if !ok {
		return Step{}, fmt.Errorf("unknown op %q", name)
	}
	st := Step{Fn: f, Antialias: f == ResizedCrop || f == Resize} // torchvision's antialias=True
	var args map[string]json.RawMessage
	if len(p[1]) > 0 && string(p[1]) != "null" {
		if err := json.Unmarshal(p[1], &args); err != nil {
			return Step{}, fmt.Errorf("%s: arguments: %v", name, err)
		}
	}
	known := 0
	for _, a := range defs[f].args {
		raw, ok := args[a.name]
		if !ok {
			continue
		}
		known++
		if err := st.setArg(a, raw); err != nil {
			return Step{}, fmt.Errorf("%s: %s: %v", name, a.name, err)
		}
	}
	if known != len(args) {
		for k := range args {
			if !defs[f].has(k) {
				return Step{}, fmt.Errorf("%s: unknown argument %q", name, k)
			}
		}
	}
	return st, nil
}

func (s *Def) has(name string) bool {
	for _, a := range s.args {
		if a.name == name {
			return true
		}
	}
	return false
}

// setArg sets one argument from its JSON.
func (st *Step) setArg(a arg, raw json.RawMessage) error {
	nums := func(n int) ([]float64, error) {
		if n == 1 {
			var v float64
			err := json.Unmarshal(raw, &v)
			return []float64{v}, err
		}
		var v []float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		if len(v) == 1 && n == 2 { // torchvision takes [k] for (k, k)
			v = append(v, v[0])
		}
		if len(v) != n {
			return nil, fmt.Errorf("want %d values, got %d", n, len(v))
		}
		return v, nil
	}
	switch a.kind {
	case argPair, argFlipIdx: // the YOLO family's (yolo.go)
		return st.setYOLOArg(a, raw)
	case argInt:
		v, err := nums(a.n)
		if err != nil {
			return err
		}
		for k, x := range v {
			if x != math.Trunc(x) || math.Abs(x) > 1<<30 {
				return fmt.Errorf("%v is not an integer", x)
			}
			st.I[a.at+k] = int(x)
		}
	case argFloat:
		v, err := nums(a.n)
		if err != nil {
			return err
		}
		copy(st.F[a.at:], v)
	case argInterp:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		in, err := ParseInterpolation(s)
		if err != nil {
			return err
		}
		st.Interp = in
	case argAntialias:
		return json.Unmarshal(raw, &st.Antialias)
	case argBoxFormat:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		f, err := targets.ParseBoxFormat(s)
		if err != nil {
			return err
		}
		st.I[a.at] = int(f)
	case argCorners, argStartCorners:
		var v [][]int
		if err := json.Unmarshal(raw, &v); err != nil || len(v) != 4 {
			return fmt.Errorf("want four [x, y] corners of integers")
		}
		for i, p := range v {
			if len(p) != 2 || p[0] < -1<<30 || p[0] > 1<<30 || p[1] < -1<<30 || p[1] > 1<<30 {
				return fmt.Errorf("corner %d: want [x, y], integers within 2^30", i)
			}
			if a.kind == argCorners {
				st.I[a.at+i] = PackPoint(p[0], p[1])
			}
		}
		if a.kind == argStartCorners {
			w1, h1 := v[2][0], v[2][1]
			if v[0][0] != 0 || v[0][1] != 0 || v[1][0] != w1 || v[1][1] != 0 || v[3][0] != 0 || v[3][1] != h1 {
				return fmt.Errorf("%v: only the image's corners [[0, 0], [W-1, 0], [W-1, H-1], [0, H-1]] are supported (RandomPerspective's)", v)
			}
			st.I[a.at], st.I[a.at+1] = w1, h1
		}
	case argBool:
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("want true or false")
		}
		st.I[a.at] = 0
		if v {
			st.I[a.at] = 1
		}
	case argFill, argEraseValue:
		var s string
		if a.kind == argEraseValue && json.Unmarshal(raw, &s) == nil {
			if s != "random" {
				return fmt.Errorf("want a list of values or \"random\", got %q", s)
			}
			st.Random = true
			return nil
		}
		if string(raw) == "null" {
			st.Fill, st.FillNone = [3]float64{}, a.kind == argFill
			return nil
		}
		var v []float64
		var one float64
		if json.Unmarshal(raw, &one) == nil {
			v = []float64{one}
		} else if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		switch len(v) {
		case 1:
			st.Fill = [3]float64{v[0], v[0], v[0]}
		case 3:
			st.Fill = [3]float64(v)
		default:
			return fmt.Errorf("want 1 or 3 values, got %d", len(v))
		}
	case argCenter:
		if string(raw) == "null" {
			st.HasCenter = false
			return nil
		}
		v, err := nums(2)
		if err != nil {
			return err
		}
		st.Center, st.HasCenter = [2]float64(v), true
	}
	return nil
}
