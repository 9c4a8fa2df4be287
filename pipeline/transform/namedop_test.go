package transform

import (
	"testing"

	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestNamedOpAnyValue: a NamedOp's argument comes from a client as a
// number, a tuple of numbers, a string or a bool, whatever the argument
// is; every registered named op (this room's and pipeline/ops') takes or
// refuses each form for each argument, and never panics on one (a tuple
// for a scalar once reached reflect's Len of a float).
func TestNamedOpAnyValue(t *testing.T) {
	values := []any{0.5, 3.0, -1.0, []float64{}, []float64{1}, []float64{0.1, 0.9}, []float64{1, 2, 3}, "bilinear", "x", true, false, nil}
	named := 0
	for _, s := range optab.OpSchemas() {
		if !s.Named {
			continue
		}
		named++
		for _, p := range s.Params {
			for _, v := range values {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("NamedOp(%s, %s=%#v) panicked: %v", s.Name, p.Name, v, r)
						}
					}()
					optab.NamedOp(s.Name, map[string]any{p.Name: v}) //nolint:errcheck // taken or refused: either is fine
				}()
			}
		}
	}
	if named == 0 {
		t.Fatal("no named op registered")
	}
}
