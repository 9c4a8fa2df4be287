package ops

import (
	"reflect"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// TestContainerDraws: RandomApply draws all its ops, in order, at p, or
// none; RandomChoice one op, with its weights (uniform when None);
// RandomOrder each op once in an order drawn uniformly. An op inside
// draws from its own stream, its container's times 64 plus its place
// (so what one op draws never shifts another's): the same steps as the op
// compiled alone on that stream. MaxSteps and MaxNs are the sum of the
// ops' (RandomChoice's: the largest).
func TestContainerDraws(t *testing.T) {
	inv := Op{Kind: OpRandomInvert, P: 1}
	sol := Op{Kind: OpRandomSolarize, P: 1, Args: &SolarizeArgs{Threshold: 100}}
	gray := Op{Kind: OpGrayscale}
	jit := ColorJitterOp(0.4, 0.4, 0, 0)
	const keys = 6000

	apply := compileOp(t, Op{Kind: OpRandomApply, P: 0.3, Ops: []Op{jit, inv}})
	kid, err := (&Compiler{W: testW, H: testH}).Compile(&jit, 0, 2*64+1, 1)
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	for i := range uint64(keys) {
		s := draw(&apply, 1, i)
		if len(s) == 0 {
			continue
		}
		hits++
		alone := draw(&kid, 1, i)
		if !reflect.DeepEqual(s, append(alone, fn.Step{Fn: fn.Invert})) {
			t.Fatalf("sample %d: RandomApply drew %+v, want its ColorJitter's own draw %+v then invert", i, s, alone)
		}
	}
	within(t, "RandomApply(p=0.3)", float64(hits)/keys, 0.3, keys)
	if apply.MaxSteps != 5 || apply.MaxNs(testW, testH) != maxNs(t, jit)+maxNs(t, inv) {
		t.Errorf("RandomApply: MaxSteps %d, MaxNs %v", apply.MaxSteps, apply.MaxNs(testW, testH))
	}

	for _, probs := range [][]float64{nil, {1, 3, 0}} {
		choice := compileOp(t, Op{Kind: OpRandomChoice, Ops: []Op{inv, sol, gray}, Args: &ChoiceArgs{P: probs}})
		counts := map[fn.Fn]int{}
		for i := range uint64(keys) {
			s := draw(&choice, 1, i)
			if len(s) != 1 {
				t.Fatalf("RandomChoice(p=%v) sample %d drew %+v", probs, i, s)
			}
			counts[s[0].Fn]++
		}
		want := []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}
		if probs != nil {
			want = []float64{0.25, 0.75, 0}
		}
		for j, f := range []fn.Fn{fn.Invert, fn.Solarize, fn.RGBToGrayscale} {
			within(t, "RandomChoice's "+f.String(), float64(counts[f])/keys, want[j], keys)
		}
		if choice.MaxSteps != 1 {
			t.Errorf("RandomChoice: MaxSteps %d", choice.MaxSteps)
		}
		if got, most := choice.MaxNs(testW, testH), max(maxNs(t, inv), maxNs(t, sol), maxNs(t, gray)); got != most {
			t.Errorf("RandomChoice: MaxNs %v, want its dearest op's %v", got, most)
		}
	}

	order := compileOp(t, Op{Kind: OpRandomOrder, Ops: []Op{inv, sol, gray}})
	orders := map[[3]fn.Fn]int{}
	for i := range uint64(keys) {
		s := draw(&order, 1, i)
		if len(s) != 3 {
			t.Fatalf("RandomOrder sample %d drew %+v", i, s)
		}
		orders[[3]fn.Fn{s[0].Fn, s[1].Fn, s[2].Fn}]++
	}
	if x := chiSquare(orders, 6, keys); len(orders) != 6 || x > 20.5 {
		t.Errorf("RandomOrder: orders %v (chi-square %.1f): want the 6, uniformly", orders, x)
	}
	if order.MaxSteps != 3 {
		t.Errorf("RandomOrder: MaxSteps %d", order.MaxSteps)
	}
}

// TestContainerRefused: a container's bounds (ops, nesting, nodes and
// steps a sample draws) and its ops' errors, named by their place
// through their containers.
func TestContainerRefused(t *testing.T) {
	jit := ColorJitterOp(0.4, 0, 0, 0)
	inv := Op{Kind: OpRandomInvert, P: 0.5}
	many := func(n int, op Op) []Op {
		ops := make([]Op, n)
		for i := range ops {
			ops[i] = op
		}
		return ops
	}
	order32 := Op{Kind: OpRandomOrder, Ops: many(32, jit)}
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: OpRandomApply, P: 0.8, Ops: []Op{jit, {Kind: OpRandomGrayscale, P: -1}}}, "op 1 (RandomApply) > op 1 (RandomGrayscale): p=-1"},
		{Op{Kind: OpRandomApply, P: 0.8}, "op 1 (RandomApply): pass at least one op"},
		{Op{Kind: OpRandomApply, P: 1.2, Ops: []Op{jit}}, "p=1.2"},
		{Op{Kind: OpRandomApply, P: 0.5, Ops: []Op{jit}, Args: &ChoiceArgs{P: []float64{1}}}, "only RandomChoice takes a list of p"},
		{Op{Kind: OpRandomOrder, Ops: many(33, inv)}, "33 ops: the limit is 32"},
		{Op{Kind: OpRandomChoice, Ops: []Op{jit, inv}, Args: &ChoiceArgs{P: []float64{1}}}, "1 values of p for 2 ops"},
		{Op{Kind: OpRandomChoice, Ops: []Op{jit, inv}, Args: &ChoiceArgs{P: []float64{1, -1}}}, "want finite values >= 0"},
		{Op{Kind: OpRandomChoice, Ops: []Op{jit, inv}, Args: &ChoiceArgs{P: []float64{0, 0}}}, "want a positive sum"},
		{Op{Kind: OpRandomChoice, Ops: []Op{jit, {Kind: "GaussianBlurry"}}}, `op 1 (RandomChoice) > op 1 (GaussianBlurry): unknown op "GaussianBlurry"`},
		{nest(5), "nested deeper than 4"},
		{Op{Kind: OpRandomOrder, Ops: many(32, Op{Kind: OpRandomApply, P: 0.5, Ops: many(4, inv)})}, "more than 128 ops in all"},
		{Op{Kind: OpRandomApply, P: 0.5, Ops: []Op{order32, order32, order32}}, "may draw 384 steps per sample: the limit is 256"},
		{Op{Kind: OpNormalize, Args: &NormalizeArgs{Std: [3]float64{1, 1, 1}}}, "Normalize must come once, last (and not inside a container)"},
		{Op{Kind: "GaussianBlurry"}, `op 1 (GaussianBlurry): unknown op "GaussianBlurry"`},
	} {
		refused(t, tc.op, testW, testH, tc.want)
	}
	// Four deep is the limit, not over it.
	if n := compileOp(t, nest(4)); n.MaxSteps != 1 {
		t.Errorf("nest(4): MaxSteps %d", n.MaxSteps)
	}
}

// maxNs is op's worst cost on the test's output, compiled alone.
func maxNs(t *testing.T, op Op) float64 {
	n := compileOp(t, op)
	return n.MaxNs(testW, testH)
}

// nest is depth RandomApply containers, one inside the other, around a
// RandomInvert.
func nest(depth int) Op {
	op := Op{Kind: OpRandomInvert, P: 0.5}
	for range depth {
		op = Op{Kind: OpRandomApply, P: 0.5, Ops: []Op{op}}
	}
	return op
}
