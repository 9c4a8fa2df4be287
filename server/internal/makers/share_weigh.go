package makers

import (
	"math"
	"strconv"

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

// weights are the rows' queue weights: Feed jobs by the stall schedule,
// first by client on its jobs' demand, then within a client by each
// job's (feedWeights); Work jobs first by client host, on what was measured
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
		for i, s := range sh.feedWeights(rows, feed) {
			out[i] = s * sh.kindScale(false)
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

// feedWeights are the Feed rows' (feed, indexes into rows) shares, by
// row, summing to 1: the stall schedule over the clients, then over each
// client's jobs. A job's stall is the larger of its trainer's and the
// share of the period its samples waited for a core here. A client's
// demand is its jobs': stalled if any of them is, the mean GPU work per CPU of those that say theirs, and what they
// used together; so one client of one job weighs as that job did, and a
// client of many jobs as one (its jobs divide its share). A row of no
// client ("") is a client of its own.
func (sh *Shares) feedWeights(rows []shareRow, feed []int) map[int]float64 {
	clients := map[string][]int{}
	var order []string
	for _, i := range feed {
		c := rows[i].e.client
		if c == "" {
			c = "job " + strconv.Itoa(i)
		}
		if _, ok := clients[c]; !ok {
			order = append(order, c)
		}
		clients[c] = append(clients[c], i)
	}
	work := func(i int) float64 { return perCPU(rows[i].d.Work, rows[i].e.cps) }
	// A job is stalled as its trainer says, or as this executor measured:
	// its samples waited for a core. The trainer's word comes late (it
	// reports its wait when a batch reaches it), so a job the executor
	// starves would otherwise report less and less stall, count as fed,
	// and be weighed down further.
	stall := func(i int) float64 { return max(clamp01(rows[i].d.Stall), rows[i].measured) }
	cds := make([]pipeline.JobDemand, len(order))
	for c, name := range order {
		known, sum := 0, 0.0
		for _, i := range clients[name] {
			cds[c].Stall = max(cds[c].Stall, stall(i))
			cds[c].Used += rows[i].used
			if w := work(i); w > 0 && !math.IsInf(w, 0) {
				known++
				sum += w
			}
		}
		if known > 0 {
			cds[c].Work = sum / float64(known)
		}
	}
	total := 0.0
	for _, d := range cds {
		total += d.Used
	}
	for c := range cds {
		if total > 0 {
			cds[c].Used /= total
		} else {
			cds[c].Used = 0
		}
	}
	out := make(map[int]float64, len(feed))
	for c, cs := range pipeline.StallShares(cds, sh.target, sh.floor) {
		jobs := clients[order[c]]
		ds := make([]pipeline.JobDemand, len(jobs))
		used := usedOf(rows, jobs)
		for k, i := range jobs {
			ds[k] = pipeline.JobDemand{Stall: stall(i), Work: work(i), Used: used[k]}
		}
		for k, js := range pipeline.StallShares(ds, sh.target, sh.floor) {
			out[jobs[k]] = cs * js
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
