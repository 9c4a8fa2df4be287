//go:build cgo

package pipeline

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestStallShares(t *testing.T) {
	const target = 0.02
	for _, tc := range []struct {
		name  string
		jobs  []JobDemand
		floor float64
		want  []float64
	}{
		{"one job", []JobDemand{{Stall: 0.5, Work: 1}}, -1, []float64{1}},
		// Both stalled: by work, 1:3.
		{"both stalled", []JobDemand{{Stall: 0.7, Work: 1}, {Stall: 0.2, Work: 3}}, -1, []float64{0.25, 0.75}},
		// The 3x-work job is fed (not stalled, uses 0.6): it keeps 0.75;
		// the stalled one gets the rest.
		{"one fed", []JobDemand{{Stall: 0.7, Work: 1}, {Stall: 0, Work: 3, Used: 0.6}}, -1, []float64{0.25, 0.75}},
		// A stalled job with little work still gets the floor (1/6).
		{"floor", []JobDemand{{Stall: 0.9, Work: 0.01}, {Stall: 0.9, Work: 10}, {Stall: 0.9, Work: 10}}, -1, []float64{1.0 / 6, 5.0 / 12, 5.0 / 12}},
		// Nobody stalls: shares follow use (with headroom), floors kept.
		{"none stalled", []JobDemand{{Used: 0.2}, {Used: 0.6}}, -1, []float64{0.25 / (0.25 + 0.75), 0.75 / (0.25 + 0.75)}},
		// Unknown work counts as the mean of the known.
		{"unknown work", []JobDemand{{Stall: 0.5, Work: 2}, {Stall: 0.5}}, -1, []float64{0.5, 0.5}},
		{"explicit floor", []JobDemand{{Stall: 0.5, Work: 1}, {Stall: 0.5, Work: 99}}, 0.4, []float64{0.4, 0.6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StallShares(tc.jobs, target, tc.floor)
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestStallSharesProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + r.IntN(6)
		jobs := make([]JobDemand, n)
		for i := range jobs {
			jobs[i] = JobDemand{Stall: r.Float64() * float64(r.IntN(2)), Work: r.Float64() * 3, Used: r.Float64() / float64(n)}
		}
		got := StallShares(jobs, 0.02, -1)
		sum := 0.0
		for i, x := range got {
			sum += x
			if x < 1/(2*float64(n))-1e-9 && jobs[i].Stall > 0.02 {
				t.Fatalf("%v: stalled job %d under the floor: %v", jobs, i, got)
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("%v: shares %v sum to %v", jobs, got, sum)
		}
	}
}
