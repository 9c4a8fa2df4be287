package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/det"
	"github.com/stoker-dev/stoker/pipeline/internal/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestRandomChannelPermutation: the op made from its definition alone
// (a NamedOp, as the wire reads it): its draws are the six permutations
// uniformly (chi-square), each a permute_channels step that moves plane
// perm[c] to plane c, traced and parsed back, with the targets left
// alone, and the names a NamedOp may not use refused.
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
	const n = 60000
	counts := map[[3]int]int{}
	var d optab.Drawer
	for i := range n {
		steps := tr.sampler().DrawInto(&d, det.Key{Seed: 7, Index: uint64(i)}, 4, 4, nil)
		if len(steps) != 1 || steps[0].Fn != fn.PermuteChannels {
			t.Fatalf("sample %d drew %+v, want one permute_channels step", i, steps)
		}
		counts[[3]int(steps[0].I[:3])]++
	}
	if len(counts) != 6 {
		t.Fatalf("%d permutations drawn, want all 6: %v", len(counts), counts)
	}
	var chi2 float64
	for _, c := range counts {
		dev := float64(c) - n/6.0
		chi2 += dev * dev / (n / 6.0)
	}
	if chi2 > 20.5 { // 5 degrees of freedom, p = 0.001
		t.Errorf("chi-square %.1f over 6 permutations (%v): not uniform", chi2, counts)
	}

	// The step's kernel and trace: plane c of the output is plane perm[c].
	steps := tr.sampler().DrawInto(&d, det.Key{Seed: 7, Index: 1}, 4, 4, nil)
	parsed, err := ParseTrace(AppendTrace(nil, steps))
	if err != nil || len(parsed) != 1 || parsed[0] != steps[0] {
		t.Fatalf("trace %s parsed to %+v, %v", AppendTrace(nil, steps), parsed, err)
	}
	pix := make([]byte, 3*16)
	for i := range pix {
		pix[i] = byte(i / 16 * 100)
	}
	if err := optab.ApplyTrace(pix, 4, 4, parsed); err != nil {
		t.Fatal(err)
	}
	for c := range 3 {
		if want := byte(steps[0].I[c] * 100); pix[c*16] != want {
			t.Errorf("plane %d holds %d, want plane %d's %d", c, pix[c*16], steps[0].I[c], want)
		}
	}

	for _, tc := range []struct {
		kind string
		args map[string]any
		msg  string
	}{
		{"RandomChannelPermutation", map[string]any{"p": 0.5}, `unknown argument "p"`},
		{"RandomSolarize", map[string]any{"threshold": 128.0}, "a message of its own"},
		{"NoSuchOp", nil, "unknown op"},
	} {
		if _, err := optab.NamedOp(tc.kind, tc.args); !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("NamedOp(%s, %v): %v, want an error saying %q", tc.kind, tc.args, err, tc.msg)
		}
	}
}
