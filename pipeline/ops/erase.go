package ops

// RandomErasing: torchvision.transforms.v2's (and timm's, with a count of
// boxes and per-box colours), and erase.

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
)

const OpRandomErasing OpKind = "RandomErasing"

// ErasingArgs are RandomErasing's arguments (Op.Args; its p is Op.P):
// scale and ratio, the box's area and aspect ranges; Value, its fill, per
// channel in pixel units (0..255); RandomValue is value="random", and
// RandomColor with it one random colour per box (timm's per_box); Mean
// and Std the Normalize its noise is drawn for (zero: ImageNet's);
// MinCount and MaxCount timm's count of boxes (0: 1; MaxCount 0:
// MinCount), each box's area divided by it.
type ErasingArgs struct {
	Scale, Ratio             [2]float64
	Value                    [3]float64
	RandomValue, RandomColor bool
	Mean, Std                [3]float64
	MinCount, MaxCount       int
}

// MaxEraseCount bounds RandomErasing's boxes per sample (timm's
// max_count).
const MaxEraseCount = 16

func init() {
	Define(Def{Kind: OpRandomErasing, Doc: "with probability p, erases a box (or count boxes) of area in scale and aspect in ratio with value",
		Params: []Param{PParam(0.5), {Name: "scale", Typ: PRange, Def: "(0.02, 0.33)"}, {Name: "ratio", Typ: PRange, Def: "(0.3, 3.3)"},
			{Name: "value", Typ: pAny, Def: "0"}, {Name: "inplace", Typ: PBool, Def: "False"},
			{Name: "noise_mean", Typ: PFloats, Def: "None", kwOnly: true}, {Name: "noise_std", Typ: PFloats, Def: "None", kwOnly: true},
			{Name: "per_box", Typ: PBool, Def: "False", kwOnly: true}, {Name: "count", Typ: pAny, Def: "1", kwOnly: true}},
		Targets: TargetsPixels, AnyFormat: true, Compile: compileErasing, FromArgs: erasingArgs,
		Keeps: func(op *Op) Keeps { return Keeps{Erase: ArgsOf[ErasingArgs](op).RandomValue} },
		Draw:  func(n *Node, r *det.RNG, d *Drawer) { n.drawErasing(r, d) },
		MaxNs: func(_ *Node, w, h int) float64 { return StepNs(fn.Step{Fn: fn.Erase, I: [6]int{0, 0, h, w}}, w, h) }})
}

// compileErasing checks a RandomErasing and keeps its arguments, the
// noise's Normalize filled in, in the node (n.erasing).
func compileErasing(_ *Compiler, n *Node, at CompileAt) error {
	where := at.Where
	if err := CheckProb(n.Op, at); err != nil {
		return err
	}
	n.erasing = ArgsOf[ErasingArgs](n.Op)
	op := &n.erasing
	if !(op.Scale[0] >= 0 && op.Scale[0] <= op.Scale[1] && op.Scale[1] <= 1) {
		return OpError(where, "scale %v: want 0 <= min <= max <= 1", op.Scale)
	}
	if !(op.Ratio[0] > 0 && op.Ratio[0] <= op.Ratio[1]) || math.IsInf(op.Ratio[1], 0) {
		return OpError(where, "ratio %v: want 0 < min <= max, finite", op.Ratio)
	}
	for _, v := range op.Value {
		if !(v >= 0 && v <= 255) {
			return OpError(where, "value %v: want pixel values in 0..255 (stoker erases uint8 pixels: a value v after Normalize is 255*(mean + std*v))", op.Value)
		}
	}
	if op.RandomValue {
		if err := checkNoiseNormalize(op, where); err != nil {
			return err
		}
	} else if op.RandomColor {
		return OpError(where, "RandomColor (one random colour per box) needs RandomValue")
	}
	lo, hi := max(op.MinCount, 1), op.MaxCount // as the wire reads them (internal/opspec)
	if hi == 0 {
		hi = lo
	}
	if lo > hi || hi > MaxEraseCount {
		return OpError(where, "count %d..%d: want 1 <= min <= max <= %d", op.MinCount, op.MaxCount, MaxEraseCount)
	}
	n.MaxSteps = hi
	n.logRatio = [2]float64{det.Log(op.Ratio[0]), det.Log(op.Ratio[1])}
	return nil
}

// checkNoiseNormalize fills in and checks the Normalize RandomErasing's
// noise is drawn for.
func checkNoiseNormalize(op *ErasingArgs, where string) error {
	if op.Std == [3]float64{} && op.Mean == [3]float64{} {
		op.Mean, op.Std = fn.ImagenetMean, fn.ImagenetStd
	}
	for c := range 3 {
		if !(op.Std[c] > 0 && op.Std[c] < 1e3 && math.Abs(op.Mean[c]) < 1e3) {
			return OpError(where, "the noise's mean %v and std %v: want finite, std > 0", op.Mean, op.Std)
		}
	}
	return nil
}

// drawErasing is RandomErasing's forward and make_params: with
// probability p, ten tries at a box of random area and log-uniform aspect
// that fits; none fitting erases nothing, as torchvision's fallback (v
// None) does. With a count (timm's RandomErasing), that many boxes (or a
// uniform number of MinCount..MaxCount), each its own ten tries at an area
// divided by the count; with RandomColor each box one colour, drawn as
// the pixel a standard normal value per channel is after the Normalize.
func (n *Node) drawErasing(r *det.RNG, d *Drawer) {
	if !(r.Float64() < n.Op.P) {
		return
	}
	op := &n.erasing
	count := max(op.MinCount, 1)
	if op.MaxCount > count {
		count += r.Intn(op.MaxCount - count + 1)
	}
	area := float64(d.W * d.H)
	for range count {
		n.eraseBox(r, d, area, count)
	}
}

// eraseBox is one box of drawErasing: ten tries at one that fits.
func (n *Node) eraseBox(r *det.RNG, d *Drawer, area float64, count int) {
	op := &n.erasing
	for range 10 {
		ea := float64(area * r.Uniform(op.Scale[0], op.Scale[1]))
		if count > 1 {
			ea /= float64(count) // timm's uniform(min_area, max_area) * area / count
		}
		aspect := det.Exp(r.Uniform(n.logRatio[0], n.logRatio[1]))
		h := int(math.RoundToEven(math.Sqrt(float64(ea * aspect))))
		w := int(math.RoundToEven(math.Sqrt(ea / aspect)))
		if !(h < d.H && w < d.W) {
			continue
		}
		st := fn.Step{Fn: fn.Erase, I: [6]int{0, 0, h, w}, Fill: op.Value}
		if op.RandomValue && !op.RandomColor {
			st.Random, st.Seed = true, r.Uint64()
			st.F = [6]float64{op.Mean[0], op.Mean[1], op.Mean[2], op.Std[0], op.Std[1], op.Std[2]}
		}
		st.I[0] = r.Intn(d.H - h + 1)
		st.I[1] = r.Intn(d.W - w + 1)
		if op.RandomColor {
			for c := range 3 {
				st.Fill[c] = normalPixel(r.Normal(), op.Mean[c], op.Std[c])
			}
		}
		d.Emit(st)
		return
	}
}

// normalPixel is the uint8 pixel a Normalize of mean and std (in [0, 1]
// units) turns into about z: round(255 * (mean + std * z)), clamped to
// 0..255, as eraseRandom's tables draw it.
func normalPixel(z, mean, std float64) float64 {
	v := math.Floor(float64(255*float64(mean+float64(std*z))) + 0.5)
	return math.Max(0, math.Min(255, v))
}

// erasingArgs reads torchvision's value (a number, one a channel, or
// "random") and timm's keyword-only noise_mean, noise_std, per_box and
// count (an int, or (min_count, max_count)).
func erasingArgs(a *Args) Op {
	op := &ErasingArgs{Scale: a.Pair("scale"), Ratio: a.Pair("ratio")}
	if s, ok := a.vals["value"].(string); ok {
		if s != "random" {
			a.Errorf("value %q: want 'random', or a number or one per channel", TruncKind(OpKind(s)))
		}
		op.RandomValue = true
	} else if !a.IsNone("value") {
		op.Value, _ = a.Fill("value")
	}
	m, s := a.Floats("noise_mean"), a.Floats("noise_std")
	switch {
	case m == nil && s == nil:
	case len(m) != 3 || len(s) != 3:
		a.Errorf("noise_mean and noise_std: want 3 values each (or None: ImageNet's), got %d and %d", len(m), len(s))
	case !op.RandomValue:
		a.Errorf("noise_mean and noise_std are for value='random'")
	default:
		op.Mean, op.Std = [3]float64(m), [3]float64(s)
	}
	if op.RandomColor = a.Bool("per_box"); op.RandomColor && !op.RandomValue {
		a.Errorf("per_box (one random colour per box) is for value='random'")
	}
	switch c := a.Floats("count"); len(c) {
	case 1:
		if op.MinCount = a.Int("count"); op.MinCount < 1 || op.MinCount > MaxEraseCount {
			a.Errorf("count %d: want 1..%d", op.MinCount, MaxEraseCount)
		}
		op.MaxCount = op.MinCount
	case 2:
		if c[0] != math.Trunc(c[0]) || c[1] != math.Trunc(c[1]) || c[0] < 1 || c[1] > MaxEraseCount {
			a.Errorf("count %v: want integers 1..%d", c, MaxEraseCount)
			break
		}
		op.MinCount, op.MaxCount = int(c[0]), int(c[1])
	default:
		a.Errorf("count %v: want an int or (min_count, max_count)", c)
	}
	return Op{P: a.Float("p"), Args: op}
}
