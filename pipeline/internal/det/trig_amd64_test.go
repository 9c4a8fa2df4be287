//go:build amd64 && !amd64.v3

package det

import (
	"math"
	"testing"
)

// TestDetTrigMatchesMath: on amd64 without FMA (GOAMD64 v1, v2) math's
// sin, cos and tan are the same Go code, unfused, so they must give the
// same bits as Sin, Cos and Tan.
func TestDetTrigMatchesMath(t *testing.T) {
	for _, x := range trigArgs() {
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"sin", Sin(x), math.Sin(x)}, {"cos", Cos(x), math.Cos(x)}, {"tan", Tan(x), math.Tan(x)}} {
			if math.Float64bits(c.got) != math.Float64bits(c.want) {
				t.Fatalf("%s(%v) = %v, math's %v", c.name, x, c.got, c.want)
			}
		}
	}
}
