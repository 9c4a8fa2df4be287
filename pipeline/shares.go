package pipeline

import "math"

// JobDemand is what the stall policy knows of one job sharing an Executor.
type JobDemand struct {
	// Stall is the fraction of the job's recent wall time its trainer
	// waited for input, 0..1 (out of range is clamped; NaN is 0).
	Stall float64
	// Work is the GPU seconds the trainer spends per sample: what one more
	// sample buys while the job is stalled. Not a positive finite number:
	// unknown, counted as the mean of the known ones (1 when none is).
	Work float64
	// Used is the share of the executor's samples the job took lately,
	// 0..1.
	Used float64
}

// StallShares is the --schedule stall policy: each job's share of the
// executor (the shares sum to 1), for Queue.SetWeight.
//
// The goal is the most GPU time: a sample given to a stalled job buys
// Work seconds of its GPU, one given to a job that is not stalled buys
// nothing now. So:
//   - a job not stalled (Stall <= target) keeps what it uses, with a
//     quarter more as headroom: it stays fed and does not flip into stall;
//   - the stalled jobs share the rest in proportion to Work, so the GPUs
//     that do the most with each sample get the most. A stalled job given
//     enough stops stalling and from then on keeps just what it uses, so
//     the shares settle instead of swinging from job to job;
//   - every job gets at least floor: a stalled job with little Work is
//     not starved.
//
// floor < 0 (or NaN) asks for the default, 1/(2n) for n jobs; it is capped
// at 1/n. When no job stalls, the shares follow use. The weights are
// shares of the workers while the jobs all have samples queued; a job that
// queues less leaves the rest to the others (the executor is
// work-conserving). Feed it smoothed stall ratios (the server's are over
// the last 3 s).
func StallShares(jobs []JobDemand, target, floor float64) []float64 {
	n := len(jobs)
	if n == 0 {
		return nil
	}
	if floor < 0 || math.IsNaN(floor) {
		floor = 1 / (2 * float64(n))
	}
	floor = min(floor, 1/float64(n))
	known, sum := 0, 0.0
	for _, j := range jobs {
		if j.Work > 0 && !math.IsInf(j.Work, 0) {
			known++
			sum += j.Work
		}
	}
	meanWork := 1.0
	if known > 0 {
		meanWork = sum / float64(known)
	}
	out := make([]float64, n)
	var stalled []int
	kept := 0.0
	for i, j := range jobs {
		stall := j.Stall
		if math.IsNaN(stall) {
			stall = 0
		}
		if stall > target {
			stalled = append(stalled, i)
			continue
		}
		used := j.Used
		if math.IsNaN(used) {
			used = 0
		}
		out[i] = max(floor, min(1, max(used, 0)*1.25))
		kept += out[i]
	}
	if len(stalled) > 0 {
		rest := max(1-kept, floor*float64(len(stalled)))
		// Floors first, then the rest by Work (water fill: a job whose
		// proportional part would fall under the floor keeps the floor).
		work := func(i int) float64 {
			if w := jobs[i].Work; w > 0 && !math.IsInf(w, 0) {
				return w
			}
			return meanWork
		}
		active := stalled
		for {
			total := 0.0
			for _, i := range active {
				total += work(i)
			}
			left := rest
			for _, i := range stalled {
				if !contains(active, i) {
					left -= floor
				}
			}
			var under []int
			for _, i := range active {
				out[i] = left * work(i) / total
				if out[i] < floor {
					under = append(under, i)
				}
			}
			if len(under) == 0 {
				break
			}
			for _, i := range under {
				out[i] = floor
			}
			active = without(active, under)
			if len(active) == 0 {
				break
			}
		}
	}
	total := 0.0
	for _, x := range out {
		total += x
	}
	for i := range out {
		out[i] /= total
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func without(xs, drop []int) []int {
	var out []int
	for _, x := range xs {
		if !contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}
