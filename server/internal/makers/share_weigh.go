package makers

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline"
)

// kindScale is what a kind's shares are scaled by: with a work share
// strictly between 0 and 1 both kinds are in the executor's foreground
// and split its cores by it; with 0 or 1 the classes keep them apart,
// and each kind's shares are its own.
func (sh *Shares) kindScale(work bool) float64 {
	ws := sh.workShare
	switch {
	case ws == 0 || ws == 1:
		return 1
	case work:
		return ws
	}
	return 1 - ws
}

// weights are the rows' queue weights: Feed jobs by the stall schedule on
// their own demand; Work jobs first by client host, on what was measured
// of each host, then within a host by its jobs' claims, each capped by
// what was measured of the job; each kind scaled by kindScale.
func (sh *Shares) weights(rows []shareRow) []float64 {
	out := make([]float64, len(rows))
	var feed []int
	hosts := map[string][]int{}
	var order []string // hosts in the order first seen, for StallShares' slices
	for i, r := range rows {
		if !r.e.work {
			feed = append(feed, i)
			continue
		}
		if _, ok := hosts[r.e.client]; !ok {
			order = append(order, r.e.client)
		}
		hosts[r.e.client] = append(hosts[r.e.client], i)
	}
	if len(feed) > 0 {
		ds := make([]pipeline.JobDemand, len(feed))
		used := usedOf(rows, feed)
		for k, i := range feed {
			d := rows[i].d
			ds[k] = pipeline.JobDemand{Stall: clamp01(d.Stall), Work: perCPU(d.Work, rows[i].e.cps), Used: used[k]}
		}
		for k, s := range pipeline.StallShares(ds, sh.target, sh.floor) {
			out[feed[k]] = s * sh.kindScale(false)
		}
	}
	if len(order) == 0 {
		return out
	}
	// Hosts: measured alone. A host is stalled as long as any of its jobs
	// waited for a core; its GPU work is unknown to this server, so every
	// host counts alike.
	hostDs := make([]pipeline.JobDemand, len(order))
	hostUsed := make([]float64, len(order))
	sum := 0.0
	for h, host := range order {
		for _, i := range hosts[host] {
			hostDs[h].Stall = max(hostDs[h].Stall, rows[i].measured)
			hostUsed[h] += rows[i].used
		}
		sum += hostUsed[h]
	}
	for h := range hostDs {
		if sum > 0 {
			hostDs[h].Used = hostUsed[h] / sum
		}
	}
	for h, hs := range pipeline.StallShares(hostDs, sh.target, sh.floor) {
		jobs := hosts[order[h]]
		ds := make([]pipeline.JobDemand, len(jobs))
		used := usedOf(rows, jobs)
		for k, i := range jobs {
			d := rows[i].d
			ds[k] = pipeline.JobDemand{Stall: min(clamp01(d.Stall), rows[i].measured), Work: perCPU(d.Work, rows[i].e.cps), Used: used[k]}
		}
		for k, js := range pipeline.StallShares(ds, sh.target, sh.floor) {
			out[jobs[k]] = hs * js * sh.kindScale(true)
		}
	}
	return out
}

// perCPU is what a unit of the executor's CPU buys a job whose trainer
// spends work GPU seconds a sample and whose samples cost cps cpuUnits:
// the shares are of CPU time, so a job whose samples cost ten times more
// buys a tenth as much GPU time with each. Unknown either way: work as
// it is (StallShares counts an unknown Work as the mean).
func perCPU(work, cps float64) float64 {
	if !(work > 0) || math.IsInf(work, 0) || !(cps > 0) {
		return work
	}
	return work / cps
}

// usedOf is each of the rows idx's share of the samples the rows idx
// took lately.
func usedOf(rows []shareRow, idx []int) []float64 {
	out := make([]float64, len(idx))
	sum := 0.0
	for _, i := range idx {
		sum += rows[i].used
	}
	if sum > 0 {
		for k, i := range idx {
			out[k] = rows[i].used / sum
		}
	}
	return out
}

// clamp01 is x within 0..1, NaN as 0.
func clamp01(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return min(max(x, 0), 1)
}
