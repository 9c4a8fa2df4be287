package transform

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestRandomChannelPermutation: the op made from its definition alone
// (a NamedOp, as the wire reads it) in a Transform: its String, its
// targets left alone, and its step traced and parsed back. Its draws, its
// kernel and its NamedOp's refusals are pipeline/ops' test of the same
// name.
func TestRandomChannelPermutation(t *testing.T) {
	op, err := optab.NamedOp("RandomChannelPermutation", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := mustTransform(t, CHW, optab.Op{Kind: OpResize, Size: [2]int{4, 4}}, op)
	if got := tr.String(); got != "Resize(4x4), RandomChannelPermutation" {
		t.Errorf("String: %q", got)
	}
	if err := CheckTargets(tr); err != nil {
		t.Errorf("CheckTargets: %v: its steps leave the targets", err)
	}
	var d optab.Drawer
	for i := range uint64(20) {
		steps := tr.drawInto(&d, det.Key{Seed: 7, Index: i}, 4, 4, nil)
		if len(steps) != 1 || steps[0].Fn != fn.PermuteChannels {
			t.Fatalf("sample %d drew %+v, want one permute_channels step", i, steps)
		}
		parsed, err := ParseTrace(AppendTrace(nil, steps))
		if err != nil || len(parsed) != 1 || parsed[0] != steps[0] {
			t.Fatalf("trace %s parsed to %+v, %v", AppendTrace(nil, steps), parsed, err)
		}
	}
}
