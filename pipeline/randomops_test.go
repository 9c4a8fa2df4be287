package pipeline

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestRandomOpListsRefusedOrMade: op lists drawn from the whole registry
// (every op after the geometry and every container, with arguments drawn
// from each param's type and bounds, some at their defaults, containers
// two deep), after one of a few geometries (a rotation that grows the
// image among them): the wire's NamedOp and NewTransform refuse with
// errs.Unsupported or take the list, and a transform taken decodes two
// small JPEGs through both decoders to nil or a per-sample
// errs.Unsupported, never a panic nor another error. An op added to the
// registry is drawn here with no change to this test. (Two explorations
// of 200,000 such lists, about 36,700 taken each, found nothing wrong;
// 2 and 4 of their decodes failed their sample as a RandomPerspective's
// corners drew three in a line, an errs.Unsupported naming them.)
func TestRandomOpListsRefusedOrMade(t *testing.T) {
	var after, containers []opspkg.OpKind
	for _, k := range opspkg.Kinds() {
		switch d := opspkg.Defs[k]; {
		case d.Geometry:
		case d.Targets == opspkg.TargetsContainer:
			containers = append(containers, k)
		default:
			after = append(after, k)
		}
	}
	r := rand.New(rand.NewSource(65))
	var draw func(depth int) (opspkg.Op, error)
	draw = func(depth int) (opspkg.Op, error) {
		if depth < 2 && r.Intn(6) == 0 {
			var kids []opspkg.Op
			for range 1 + r.Intn(3) {
				kid, err := draw(depth + 1)
				if err != nil {
					return kid, err
				}
				kids = append(kids, kid)
			}
			return opspkg.NamedOp(string(containers[r.Intn(len(containers))]), map[string]any{"transforms": kids})
		}
		k := after[r.Intn(len(after))]
		args := map[string]any{}
		for _, p := range opspkg.Defs[k].Params {
			if v, ok := randomArg(r, p); ok {
				args[p.Name] = v
			}
		}
		return opspkg.NamedOp(string(k), args)
	}
	rot := opspkg.Op{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-40, 40}, Expand: true}}
	geometries := [][]opspkg.Op{
		nil,
		{{Kind: transform.OpResize, Size: [2]int{32, 40}}},
		{{Kind: transform.OpResize, Size: [2]int{30, 0}}},
		{{Kind: transform.OpRandomResizedCrop, Size: [2]int{24, 24}}},
		{{Kind: transform.OpCenterCrop, Size: [2]int{20, 20}}},
		{{Kind: transform.OpResize, Size: [2]int{32, 40}}, rot},
		{rot, {Kind: transform.OpResize, Size: [2]int{30, 30}}},
	}
	imgs := [][]byte{encodeJPEG(goldenPicture(37, 29, 1), 80), encodeJPEG(goldenPicture(61, 45, 2), 90)}
	decs := make([]*Decoder, len(decoderKinds))
	for i, dk := range decoderKinds {
		decs[i] = NewDecoder(dk.opts...)
		defer decs[i].Close()
	}
	lists := 4000
	if testing.Short() {
		lists = 500
	}
	taken := 0
	for n := range lists {
		ops := append([]opspkg.Op(nil), geometries[r.Intn(len(geometries))]...)
		var err error
		for range 1 + r.Intn(4) {
			var op opspkg.Op
			if op, err = draw(0); err != nil {
				break
			}
			ops = append(ops, op)
		}
		if err != nil {
			if !errors.Is(err, errs.Unsupported) {
				t.Fatalf("NamedOp: %v, want errs.Unsupported", err)
			}
			continue
		}
		tr, err := transform.NewTransform(transform.Layout(r.Intn(2)), ops...)
		if err != nil {
			if !errors.Is(err, errs.Unsupported) {
				t.Fatalf("NewTransform(%s): %v, want errs.Unsupported", opspkg.OpsString(ops), err)
			}
			continue
		}
		taken++
		out := make([]byte, tr.SampleBytes())
		for _, img := range imgs {
			for i, d := range decs {
				if err := d.Decode(img, tr, det.Key{Seed: uint64(n), Index: uint64(i)}, out); err != nil && !errors.Is(err, errs.Unsupported) {
					t.Fatalf("%s, %s decoder: %v, want nil or errs.Unsupported", opspkg.OpsString(ops), decoderKinds[i].name, err)
				}
			}
		}
	}
	if taken < lists/10 {
		t.Errorf("only %d of %d lists taken: the draw tests little past the refusals", taken, lists)
	}
}

// randomArg draws a value for p by its type (within its bounds, mostly),
// or none (ok false: its default).
func randomArg(r *rand.Rand, p opspkg.Param) (v any, ok bool) {
	if r.Intn(2) == 0 {
		return nil, false
	}
	num := func() float64 {
		if p.Hi > p.Lo && r.Intn(5) > 0 {
			return p.Lo + r.Float64()*(p.Hi-p.Lo)
		}
		return []float64{0, 0.5, 1, 2, 3, -1, 7, 0.01, 100}[r.Intn(9)]
	}
	integer := func() float64 {
		if p.Hi > p.Lo && r.Intn(5) > 0 {
			return math.Round(p.Lo + r.Float64()*(p.Hi-p.Lo))
		}
		return []float64{0, 1, 2, 3, 5, 8, 16, 31, -1}[r.Intn(9)]
	}
	list := func(f func() float64) []float64 {
		xs := make([]float64, 1+r.Intn(4))
		for i := range xs {
			xs[i] = f()
		}
		return xs
	}
	switch p.Typ {
	case opspkg.PFloat:
		return num(), true
	case opspkg.PInt:
		return integer(), true
	case opspkg.PBool:
		return r.Intn(2) == 0, true
	case opspkg.PRange:
		a, b := num(), num()
		if r.Intn(3) == 0 {
			return a, true
		}
		return []float64{min(a, b), max(a, b)}, true
	case opspkg.PSize:
		if r.Intn(2) == 0 {
			return float64(1 + r.Intn(40)), true
		}
		return []float64{float64(1 + r.Intn(40)), float64(1 + r.Intn(40))}, true
	case opspkg.PFill, opspkg.PFillBy:
		return float64(r.Intn(256)), true
	case opspkg.PInterp:
		return []string{"nearest", "bilinear", "bicubic"}[r.Intn(3)], true
	case opspkg.PFloats:
		return list(num), true
	case opspkg.PInts:
		return list(integer), true
	}
	return nil, false
}
