package makers

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/pipeline"
)

// shareEvery is how often the executor's per-job weights are recomputed.
const shareEvery = 500 * time.Millisecond

// DormantAfter is how many rebalances in a row a queue may make nothing
// and have nothing queued before rebalances leave it out (it is dormant)
// until its next Fill: a job that stopped leasing costs no CPU, however
// many there are.
const DormantAfter = 2

// Shares keeps the local executor's per-job queues weighted by where
// capacity buys the most GPU time (pipeline.StallShares), this server's
// own trainers' jobs (Feed jobs) and other servers' leases (Work jobs)
// apart: Work jobs take at most --work-share of the cores while Feed jobs
// have samples waiting (with the default 0, only what Feed jobs leave:
// their queues are in the executor's background class).
//
// Feed jobs are shared by client first (rpc.ClientID: a verified client
// certificate's subject, else a connection), then among each client's
// jobs, so a client that opens more jobs does not take more of the cores.
// A Feed job's demand is its input stall and its trainer's GPU seconds
// per sample as its coordinator measured them, and the share of the
// executor's CPU it took lately (the executor shares CPU time, not
// samples: pipeline.WithCPUClock). A Work job's is what its leases claim, believed
// no further than what this server measures of it: its stall is at most
// the share of the time its samples waited for a core here, and between
// client hosts the claims count for nothing, each host weighed by what
// was measured of it alone (its jobs' wait, its use); a host's claims
// only divide its own share among its jobs.
type Shares struct {
	floor, target, workShare float64
	samples                  [2]prometheus.Counter // by kind: feed, work; nil: not counted

	mu     sync.Mutex
	all    map[*pipeline.Queue]*shareEntry
	awake  map[*pipeline.Queue]*shareEntry // those rebalance weighs
	byKind [2]int                          // awake queues, by kind
	last   time.Time                       // the last rebalance
}

// shareEntry is one queue's place in the schedule.
type shareEntry struct {
	demand func() pipeline.JobDemand
	work   bool // a Work job's (kind 1); a Feed job's otherwise
	// client is a Work job's client host, a Feed job's client
	// (rpc.ClientID; "": a client of its own).
	client string
	made   uint64  // Made at the last rebalance
	cpu    float64 // Charged at the last rebalance
	// cps is the CPU (in the executor's cpuUnits) its samples were
	// charged lately, a mean over about two periods; 0: none measured.
	cps    float64
	used   float64
	waited time.Duration // Waited at the last rebalance
	quiet  int           // rebalances in a row with nothing made or queued
	awake  bool
	// weight is the job's own (JobSpec.cpu_weight): its schedule
	// weight is its share times it.
	weight float64
}

func (e *shareEntry) kind() int {
	if e.work {
		return 1
	}
	return 0
}

// NewShares weighs queues with floor (negative: 1/(2·jobs) of a kind),
// target and workShare (Config's); samples, when not nil, counts the
// samples made by kind (stoker_executor_samples_total).
func NewShares(floor, target, workShare float64, samples *prometheus.CounterVec) *Shares {
	sh := &Shares{
		floor: floor, target: target, workShare: workShare,
		all: make(map[*pipeline.Queue]*shareEntry), awake: make(map[*pipeline.Queue]*shareEntry),
		last: time.Now(),
	}
	if samples != nil {
		sh.samples = [2]prometheus.Counter{samples.WithLabelValues("feed"), samples.WithLabelValues("work")}
	}
	return sh
}

// add weighs q by demand from now on: a Work job's of the coordinator at
// client when work is set, otherwise one of this server's own Feed jobs,
// opened by client ("": a client of its own).
// Its share is multiplied by weight (the job's cpu_weight; <= 0: 1).
func (sh *Shares) add(q *pipeline.Queue, demand func() pipeline.JobDemand, work bool, client string, weight float64) {
	if !(weight > 0) {
		weight = 1
	}
	e := &shareEntry{demand: demand, work: work, client: client, made: q.Made(), cpu: q.Charged(), waited: q.Waited(), weight: weight}
	q.SetBackground(sh.background(work))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.all[q] = e
	sh.wakeLocked(q, e)
}

// background says whether the queues of a kind are in the executor's
// background class: Work jobs' under the default work share 0, Feed
// jobs' under 1.
func (sh *Shares) background(work bool) bool {
	switch sh.workShare {
	case 0:
		return work
	case 1:
		return !work
	}
	return false
}

// wake puts q back among the queues rebalance weighs, if it was dormant:
// called at each of its Fills.
func (sh *Shares) wake(q *pipeline.Queue) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.all[q]; e != nil && !e.awake {
		sh.wakeLocked(q, e)
	}
}

// wakeLocked makes e awake, its weight an equal part of its kind's until
// the next rebalance. sh.mu is held.
func (sh *Shares) wakeLocked(q *pipeline.Queue, e *shareEntry) {
	e.awake, e.quiet = true, 0
	sh.awake[q] = e
	sh.byKind[e.kind()]++
	q.SetWeight(e.weight * sh.kindScale(e.work) / float64(sh.byKind[e.kind()]))
}

// sleepLocked leaves e out of rebalances until it wakes. sh.mu is held.
func (sh *Shares) sleepLocked(q *pipeline.Queue, e *shareEntry) {
	e.awake, e.used = false, 0
	delete(sh.awake, q)
	sh.byKind[e.kind()]--
}

// remove forgets q (its job ended).
func (sh *Shares) remove(q *pipeline.Queue) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.all[q]
	if e == nil {
		return
	}
	sh.count(e, q.Made()-e.made)
	if e.awake {
		sh.sleepLocked(q, e)
	}
	delete(sh.all, q)
}

// count adds n samples made to e's kind's counter.
func (sh *Shares) count(e *shareEntry, n uint64) {
	if c := sh.samples[e.kind()]; c != nil && n > 0 {
		c.Add(float64(n))
	}
}

// shareRow is one awake queue as a rebalance sees it.
type shareRow struct {
	q        *pipeline.Queue
	e        *shareEntry
	d        pipeline.JobDemand // as its job says it
	measured float64            // the share of the period its samples waited for a core
	used     float64            // its smoothed share of the samples made
}

// Rebalance sets every awake queue's weight to its share, and puts the
// queues that made nothing and have nothing queued to sleep.
func (sh *Shares) Rebalance() {
	sh.mu.Lock()
	now := time.Now()
	dt := now.Sub(sh.last).Seconds()
	sh.last = now
	rows := make([]shareRow, 0, len(sh.awake))
	used := make([]float64, 0, len(sh.awake))
	total := 0.0
	for q, e := range sh.awake {
		m, w, c := q.Made(), q.Waited(), q.Charged()
		dm, dw, dc := m-e.made, w-e.waited, max(c-e.cpu, 0)
		e.made, e.waited, e.cpu = m, w, c
		if dm > 0 {
			if x := dc / float64(dm); e.cps == 0 {
				e.cps = x
			} else {
				e.cps = 0.5*e.cps + 0.5*x
			}
		}
		sh.count(e, dm)
		if dm == 0 && q.Pending() == 0 {
			if e.quiet++; e.quiet >= DormantAfter {
				sh.sleepLocked(q, e)
				continue
			}
		} else {
			e.quiet = 0
		}
		r := shareRow{q: q, e: e}
		if dt > 0 {
			r.measured = min(dw.Seconds()/dt, 1)
		}
		rows = append(rows, r)
		used = append(used, dc)
		total += dc
	}
	for i, r := range rows {
		if total > 0 {
			// Smoothed over about two periods: use moves with the
			// shares, not with one period's noise. Use is the CPU the
			// schedule charged (samples without a CPU clock), the
			// quantity the weights share.
			r.e.used = 0.5*r.e.used + 0.5*used[i]/total
		}
		rows[i].d, rows[i].used = r.e.demand(), r.e.used
	}
	sh.mu.Unlock()
	for i, w := range sh.weights(rows) {
		rows[i].q.SetWeight(w * rows[i].e.weight)
	}
}

// Run rebalances every shareEvery until stop is closed.
func (sh *Shares) Run(stop <-chan struct{}) {
	t := time.NewTicker(shareEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			sh.Rebalance()
		case <-stop:
			return
		}
	}
}

// Queues is how many queues the schedule holds, and how many of them it
// weighs (awake): a job that ended holds none, a job that stopped leasing
// only a dormant one.
func (sh *Shares) Queues() (held, awake int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.all), len(sh.awake)
}

// ByKind sums what f says of each queue the schedule holds, of Feed jobs
// and of Work jobs, from base's sums (nil: 0); f is given the queue and
// its samples made when the schedule last counted them (in the samples
// counter NewShares was given). base and f run under the schedule's
// lock, so that what a rebalance counts is in one or the other, never in
// both or neither.
func (sh *Shares) ByKind(base func() (feed, work uint64), f func(q *pipeline.Queue, counted uint64) uint64) (feed, work uint64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if base != nil {
		feed, work = base()
	}
	for q, e := range sh.all {
		if e.work {
			work += f(q, e.made)
		} else {
			feed += f(q, e.made)
		}
	}
	return feed, work
}

// FeedClients is how many Feed jobs' queues the schedule holds for each
// client (rpc.ClientID; "" for jobs of no client): the clients among
// which it shares the cores first.
func (sh *Shares) FeedClients() map[string]int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := map[string]int{}
	for _, e := range sh.all {
		if !e.work {
			out[e.client]++
		}
	}
	return out
}
