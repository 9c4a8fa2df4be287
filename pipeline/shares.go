package pipeline

import "math"

// JobDemand is what the stall policy knows of one job sharing an Executor.
type JobDemand struct {
	// Stall is the fraction of the job's recent wall time its trainer
	// waited for input, 0..1 (out of range is clamped; NaN is 0).
	Stall float64
	// Work is the GPU seconds the trainer spends per sample, > 0: what one
	// more sample buys while the job is stalled. A value that is not a
	// positive finite number counts as no demand (the job gets the floor).
	Work float64
}

// StallShares is the --schedule stall policy: each job's share of the
// executor (the shares sum to 1), for Queue.SetWeight.
//
// The goal is to minimize the input stall summed over jobs, counted in GPU
// time: a sample given to a stalled job buys Work seconds of its GPU, one
// given to a job that is not stalled buys nothing now. So capacity goes in
// proportion to Stall×Work: the jobs that stall most, on the GPUs that do
// the most with each sample, get the most. (For one fixed snapshot the
// exact optimum would give everything to the stalled job with the largest
// Work until it stops stalling; but stall is measured after the fact and
// the shares are recomputed from it, and the proportional rule converges
// where the greedy one flips all capacity from job to job each period.
// A job that is given enough stops stalling, its share falls to the
// floor, and the capacity moves on to the jobs still stalled.)
//
// The floor: every job gets at least floor, stalled or not. A stalled job
// with little Work is not starved; a job that is not stalled now keeps
// enough to go on and does not flip into stall the moment others want
// more (its share then rises with its stall). The shares are a water
// fill: the jobs whose proportional share would fall below the floor are
// held at it, and the rest of the capacity is shared by the others in
// proportion to Stall×Work, so among the jobs above the floor the ratios
// are exactly those of Stall×Work.
//
// floor < 0 (or NaN) asks for the default, 1/(2n) for n jobs: half the
// capacity is guaranteed, evenly, and the other half follows the stall.
// floor is capped at 1/n (all equal); floor 0 is no floor, and a job with
// no stall then gets 0 (SetWeight clamps it to the smallest weight: it
// still runs when nothing else wants the workers). When no job stalls the
// shares are equal: the order does not matter then, and an even split is
// the neutral start for whoever stalls next.
//
// The weights are shares of the workers while the jobs all have samples
// queued; a job that queues less than its share leaves the rest to the
// others (the executor is work-conserving). Feed it smoothed stall ratios
// (over a few seconds): the shares follow them.
func StallShares(jobs []JobDemand, floor float64) []float64 {
	n := len(jobs)
	if n == 0 {
		return nil
	}
	if floor < 0 || math.IsNaN(floor) {
		floor = 1 / (2 * float64(n))
	}
	floor = min(floor, 1/float64(n))
	shares := make([]float64, n)
	demand := make([]float64, n)
	var total float64
	for i, j := range jobs {
		stall := j.Stall
		if math.IsNaN(stall) {
			stall = 0
		}
		stall = min(max(stall, 0), 1)
		if j.Work > 0 && !math.IsInf(j.Work, 1) {
			demand[i] = stall * j.Work
		}
		total += demand[i]
	}
	if total == 0 || math.IsInf(total, 1) {
		for i := range shares {
			shares[i] = 1 / float64(n)
		}
		return shares
	}
	// Water fill: hold at the floor every job whose proportional share of
	// what the held ones leave falls below it, until none does. Each pass
	// holds at least one more job or ends, so at most n passes; holding a
	// job only lowers what is left for the others, so a job once held
	// stays held.
	held := make([]bool, n)
	nheld := 0
	for {
		var free float64
		for i := range demand {
			if !held[i] {
				free += demand[i]
			}
		}
		left := 1 - floor*float64(nheld)
		changed := false
		for i := range demand {
			if !held[i] && (free == 0 || left*demand[i]/free < floor) {
				held[i] = true
				nheld++
				changed = true
			}
		}
		if !changed || nheld == n {
			for i := range shares {
				if held[i] {
					shares[i] = floor
				} else {
					shares[i] = left * demand[i] / free
				}
			}
			break
		}
	}
	// Rounding, and all held at a floor below 1/n when every demand is
	// too small (floor*n < 1 is then impossible in exact arithmetic, but
	// normalize anyway): the shares sum to 1.
	var sum float64
	for _, s := range shares {
		sum += s
	}
	if sum <= 0 {
		for i := range shares {
			shares[i] = 1 / float64(n)
		}
		return shares
	}
	for i := range shares {
		shares[i] /= sum
	}
	return shares
}
