package pipeline

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestStallShares(t *testing.T) {
	for _, c := range []struct {
		name  string
		jobs  []JobDemand
		floor float64
		want  []float64
	}{
		{"none", nil, -1, nil},
		{"one job", []JobDemand{{0.5, 1}}, -1, []float64{1}},
		{"one job, no stall", []JobDemand{{0, 1}}, -1, []float64{1}},
		{"no one stalls: equal", []JobDemand{{0, 1}, {0, 5}, {0, 2}}, -1, []float64{1. / 3, 1. / 3, 1. / 3}},
		// 2 jobs, default floor 1/4: demands 0.5*1 and 0.5*3 give
		// 1/4 and 3/4, the first exactly at the floor.
		{"proportional to stall x work", []JobDemand{{0.5, 1}, {0.5, 3}}, -1, []float64{0.25, 0.75}},
		{"more work, more share", []JobDemand{{0.2, 1}, {0.2, 2}}, 0, []float64{1. / 3, 2. / 3}},
		{"more stall, more share", []JobDemand{{0.6, 1}, {0.2, 1}}, 0, []float64{0.75, 0.25}},
		// The floor lifts the small job; the others share the rest 2:1.
		{"floor lifts a small demand", []JobDemand{{0.01, 1}, {0.4, 1}, {0.2, 1}}, -1, []float64{1. / 6, 5. / 9, 5. / 18}},
		// A job with no stall keeps the floor, explicit 0.1 here.
		{"no stall keeps the floor", []JobDemand{{0, 1}, {0.5, 1}, {0.5, 1}}, 0.1, []float64{0.1, 0.45, 0.45}},
		{"floor 0: no stall gets 0", []JobDemand{{0, 1}, {0.5, 1}}, 0, []float64{0, 1}},
		{"floor over 1/n is 1/n", []JobDemand{{0.9, 10}, {0.1, 1}}, 0.8, []float64{0.5, 0.5}},
		{"floor exactly 1/n", []JobDemand{{0.9, 10}, {0.1, 1}, {0, 1}}, 1. / 3, []float64{1. / 3, 1. / 3, 1. / 3}},
		// Holding one at the floor pushes another under it: two passes.
		{"cascade", []JobDemand{{1, 100}, {1, 18}, {1, 1}, {0, 1}}, -1, []float64{0.625, 0.125, 0.125, 0.125}},
		{"bad inputs clamped", []JobDemand{{math.NaN(), 1}, {2, 1}, {-1, 1}, {0.5, math.Inf(1)}, {0.5, -2}}, 0, []float64{0, 1, 0, 0, 0}},
		{"NaN floor is the default", []JobDemand{{0, 1}, {1, 1}}, math.NaN(), []float64{0.25, 0.75}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := StallShares(c.jobs, c.floor)
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			var sum float64
			for i := range got {
				sum += got[i]
				if math.Abs(got[i]-c.want[i]) > 1e-12 {
					t.Errorf("got %v, want %v", got, c.want)
					break
				}
			}
			if len(got) > 0 && math.Abs(sum-1) > 1e-12 {
				t.Errorf("shares sum to %v", sum)
			}
		})
	}
}

// TestStallSharesProperties: on random inputs the shares sum to 1, no job
// is under the floor, and the jobs above it are in Stall×Work's ratio.
func TestStallSharesProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 0))
	for range 2000 {
		n := 1 + r.IntN(8)
		jobs := make([]JobDemand, n)
		for i := range jobs {
			jobs[i] = JobDemand{Stall: r.Float64(), Work: 0.001 + r.Float64()}
			if r.IntN(4) == 0 {
				jobs[i].Stall = 0
			}
		}
		floor := -1.0
		if r.IntN(2) == 0 {
			floor = r.Float64() / float64(n)
		}
		got := StallShares(jobs, floor)
		f := floor
		if f < 0 {
			f = 1 / (2 * float64(n))
		}
		var sum float64
		ratio := math.NaN() // share/demand of the jobs above the floor
		for i, s := range got {
			sum += s
			if s < f-1e-12 {
				t.Fatalf("%v floor %v: share %d is %v, under the floor", jobs, floor, i, s)
			}
			if d := jobs[i].Stall * jobs[i].Work; s > f+1e-9 {
				if math.IsNaN(ratio) {
					ratio = s / d
				} else if math.Abs(s/d-ratio) > 1e-9*ratio {
					t.Fatalf("%v floor %v: shares %v not proportional to demand above the floor", jobs, floor, got)
				}
			}
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Fatalf("%v: shares %v sum to %v", jobs, got, sum)
		}
	}
}
