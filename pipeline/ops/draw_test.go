package ops

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// The draws of this room's families, without a Transform: an op is
// compiled as a Transform compiles the op right after its geometry
// (position 1, stream 2, on the output's w x h) and drawn as its Decoder
// draws it (Node.Draw into a Drawer keyed by the sample).

// The output the ops are compiled for unless a test says otherwise.
const testW, testH = 32, 24

// compileAt is op compiled for a w x h output, or t's end.
func compileAt(t testing.TB, op Op, w, h int) Node {
	t.Helper()
	n, err := (&Compiler{W: w, H: h}).Compile(&op, 1, 2, 0)
	if err != nil {
		t.Fatalf("%s: %v", OpsString([]Op{op}), err)
	}
	return n
}

// compileOp is op compiled for the test's output.
func compileOp(t testing.TB, op Op) Node {
	t.Helper()
	return compileAt(t, op, testW, testH)
}

// refused checks that op does not compile for a w x h output, with an
// error that wraps errs.Unsupported and says want.
func refused(t *testing.T, op Op, w, h int, want string) {
	t.Helper()
	_, err := (&Compiler{W: w, H: h}).Compile(&op, 1, 2, 0)
	if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want an error wrapping errs.Unsupported saying %q", OpsString([]Op{op}), err, want)
	}
}

// drawAt is n's steps for sample i of seed on a w x h image.
func drawAt(n *Node, seed, i uint64, w, h int) []fn.Step {
	d := Drawer{K: det.Key{Seed: seed, Index: i}, W: w, H: h}
	n.Draw(&d)
	return d.Steps
}

// draw is n's steps for sample i of seed on the test's output.
func draw(n *Node, seed, i uint64) []fn.Step { return drawAt(n, seed, i, testW, testH) }

// within fails t unless frac, a rate over n draws, is within 4.5
// standard deviations of p.
func within(t *testing.T, what string, frac, p float64, n int) {
	t.Helper()
	if sd := math.Sqrt(p * (1 - p) / float64(n)); math.Abs(frac-p) > 4.5*sd+1e-12 {
		t.Errorf("%s: %.4f of %d draws, want %.4f (within %.4f)", what, frac, n, p, 4.5*sd)
	}
}

// chiSquare is Pearson's statistic of counts against equal odds over k
// outcomes.
func chiSquare[K comparable](counts map[K]int, k, n int) float64 {
	var x float64
	e := float64(n) / float64(k)
	for _, c := range counts {
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x + float64(k-len(counts))*e // the outcomes never drawn
}

// validOps is an op of each kind this room defines, with arguments
// torchvision's defaults or a test's: TestDrawBounds draws each, and
// holds the table to the registry, so a new family is drawn here too.
func validOps() map[OpKind]Op {
	jit := ColorJitterOp(0.4, 0.4, 0.4, 0.1)
	return map[OpKind]Op{
		OpRandomHorizontalFlip:     {Kind: OpRandomHorizontalFlip, P: 0.5},
		OpRandomVerticalFlip:       {Kind: OpRandomVerticalFlip, P: 0.5},
		OpColorJitter:              jit,
		OpRandomPhotometricDistort: photometricOp(),
		OpGrayscale:                {Kind: OpGrayscale},
		OpRandomGrayscale:          {Kind: OpRandomGrayscale, P: 0.1},
		OpRandomChannelPermutation: {Kind: OpRandomChannelPermutation},
		OpGaussianBlur:             {Kind: OpGaussianBlur, Args: &BlurArgs{KernelSize: [2]int{5, 3}, Sigma: [2]float64{0.1, 2}}},
		OpRandomSolarize:           {Kind: OpRandomSolarize, P: 0.5, Args: &SolarizeArgs{Threshold: 128}},
		OpRandomPosterize:          {Kind: OpRandomPosterize, P: 0.5, Args: &PosterizeArgs{Bits: 4}},
		OpRandomInvert:             {Kind: OpRandomInvert, P: 0.5},
		OpRandomEqualize:           {Kind: OpRandomEqualize, P: 0.5},
		OpRandomAutocontrast:       {Kind: OpRandomAutocontrast, P: 0.5},
		OpRandomAdjustSharpness:    {Kind: OpRandomAdjustSharpness, P: 0.5, Args: &SharpnessArgs{Factor: 2}},
		OpRandomErasing:            erasingOp(),
		OpRandomApply:              {Kind: OpRandomApply, P: 0.5, Ops: []Op{jit, {Kind: OpRandomInvert, P: 0.5}}},
		OpRandomChoice:             {Kind: OpRandomChoice, Ops: []Op{jit, {Kind: OpRandomInvert, P: 0.5}}},
		OpRandomOrder:              {Kind: OpRandomOrder, Ops: []Op{jit, {Kind: OpRandomInvert, P: 0.5}, {Kind: OpGrayscale}}},
		OpSanitizeBoundingBoxes:    {Kind: OpSanitizeBoundingBoxes, Args: &SanitizeArgs{MinSize: 1, MinArea: 1}},
		OpConvertBoundingBoxFormat: {Kind: OpConvertBoundingBoxFormat, Args: &BoxFormatArgs{Format: targets.BoxCXCYWH}},
		OpClampBoundingBoxes:       {Kind: OpClampBoundingBoxes},
		OpClampKeyPoints:           {Kind: OpClampKeyPoints},
		OpSanitizeKeyPoints:        {Kind: OpSanitizeKeyPoints},
		OpTrivialAugmentWide:       {Kind: OpTrivialAugmentWide, Args: &TrivialAugmentWideArgs{Bins: 31}},
		OpRandAugment:              {Kind: OpRandAugment, Args: &RandAugmentArgs{NumOps: 2, Magnitude: 9, Bins: 31}},
		OpAutoAugment:              {Kind: OpAutoAugment, Args: &AutoAugmentArgs{Policy: "imagenet"}},
		OpAugMix:                   {Kind: OpAugMix, Args: &AugMixArgs{Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1}},
		OpTimmRandAugment:          {Kind: OpTimmRandAugment, Args: &TimmArgs{Config: "rand-m9-mstd0.5-inc1", RandomInterp: true, Filling: Filling{Fill: [3]float64{124, 116, 104}}}},
		OpTimmAutoAugment:          {Kind: OpTimmAutoAugment, Args: &TimmArgs{Config: "original", RandomInterp: true, Filling: Filling{Fill: [3]float64{124, 116, 104}}}},
		OpTimmAugMix:               {Kind: OpTimmAugMix, Args: &TimmArgs{Config: "augmix-m3-w3", RandomInterp: true, Filling: Filling{Fill: [3]float64{124, 116, 104}}}},
	}
}

// TestDrawBounds: every op this room defines (Normalize aside: it is
// not drawn, but packed) compiles at its arguments above and draws, over
// many samples, at most the steps its node bounds (MaxSteps), costing at
// most its worst cost (MaxNs), each step one its functional op takes on
// the image (fn.Check); the same key draws the same steps.
func TestDrawBounds(t *testing.T) {
	ops := validOps()
	for _, k := range Kinds() {
		if _, ok := ops[k]; !ok && k != OpNormalize {
			t.Errorf("%s is registered but not in validOps: its draws are not checked", k)
		}
	}
	for _, k := range Kinds() {
		op, ok := ops[k]
		if !ok {
			continue
		}
		t.Run(string(k), func(t *testing.T) {
			n := compileOp(t, op)
			worst := n.MaxNs(testW, testH)
			drew := 0
			for i := range uint64(300) {
				steps := draw(&n, 5, i)
				if len(steps) > n.MaxSteps {
					t.Fatalf("sample %d drew %d steps, over its bound %d: %+v", i, len(steps), n.MaxSteps, steps)
				}
				var ns float64
				for j := range steps {
					if err := fn.Check(&steps[j], testW, testH); err != nil {
						t.Fatalf("sample %d step %d: %v", i, j, err)
					}
					ns += StepNs(steps[j], testW, testH)
				}
				if ns > worst*(1+1e-9) {
					t.Fatalf("sample %d: its steps cost %.0f ns, over the worst cost %.0f: %+v", i, ns, worst, steps)
				}
				if again := draw(&n, 5, i); !reflect.DeepEqual(again, steps) {
					t.Fatalf("sample %d drew %+v, then %+v", i, steps, again)
				}
				drew += len(steps)
			}
			if drew == 0 {
				t.Errorf("300 samples drew no step")
			}
		})
	}
}

// TestDrawSchemaBounds: each argument whose schema bounds it (Param's Lo
// and Hi, which a NamedOp checks too) compiles at both bounds, where a
// drawn step carries the value, and is refused just outside them and at
// NaN, with the compiler's error naming the op's place and the argument.
// A probability at 0 draws nothing, at 1 the op's step every time.
func TestDrawSchemaBounds(t *testing.T) {
	ops := validOps()
	checked := 0
	for _, k := range Kinds() {
		base, ok := ops[k]
		if !ok {
			continue
		}
		for _, p := range Defs[k].Params {
			if p.At == nil || !(p.Hi > p.Lo) {
				continue
			}
			checked++
			set := func(v float64) Op {
				op := base
				op.Args = CloneArgs(base.Args) // its own, not base's
				switch f := p.At(&op).(type) {
				case *float64:
					*f = v
				case *int:
					*f = int(v)
				default:
					t.Fatalf("%s.%s: a field of type %T", k, p.Name, f)
				}
				return op
			}
			_, isInt := p.At(&base).(*int)
			for _, v := range []float64{p.Lo, p.Hi} {
				n := compileOp(t, set(v))
				for i := range uint64(50) {
					steps := draw(&n, 9, i)
					switch {
					case p.Name == "p" && v == 0 && len(steps) != 0:
						t.Fatalf("%s at p=0 drew %+v", k, steps)
					case p.Name == "p" && v == 1 && len(steps) == 0:
						t.Fatalf("%s at p=1 drew nothing (sample %d)", k, i)
					case p.Name != "p" && len(steps) > 0 && !(steps[0].F[0] == v || isInt && steps[0].I[0] == int(v)):
						t.Fatalf("%s at %s=%v drew %+v: the value is not its step's", k, p.Name, v, steps[0])
					}
				}
			}
			step := 1.0
			if !isInt {
				step = math.Max(1e-6, (p.Hi-p.Lo)*1e-6)
			}
			bad := []float64{p.Lo - step, p.Hi + step}
			if !isInt {
				bad = append(bad, math.NaN(), math.Inf(1))
			}
			for _, v := range bad {
				name := p.Name
				if name == "p" {
					name = "p="
				}
				refused(t, set(v), testW, testH, "op 1 ("+string(k)+"): "+name)
			}
		}
	}
	if checked < 8 {
		t.Errorf("%d bounded arguments checked: the schema's bounds are not read", checked)
	}
}
