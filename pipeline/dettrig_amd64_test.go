//go:build amd64 && !amd64.v3

package pipeline

import (
	"math"
	"testing"
)

// TestDetTrigMatchesMath: on amd64 without FMA (GOAMD64 v1, v2) math's
// sin, cos and tan are the same Go code, unfused, so they must give the
// same bits as detSin, detCos and detTan.
func TestDetTrigMatchesMath(t *testing.T) {
	for _, x := range detTrigArgs() {
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"sin", detSin(x), math.Sin(x)}, {"cos", detCos(x), math.Cos(x)}, {"tan", detTan(x), math.Tan(x)}} {
			if math.Float64bits(c.got) != math.Float64bits(c.want) {
				t.Fatalf("%s(%v) = %v, math's %v", c.name, x, c.got, c.want)
			}
		}
	}
}
