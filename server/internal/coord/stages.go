package coord

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

// Where a job's input stalls. Three accounts, each over the last
// TelemetryWindow, each of one denominator:
//
//   - the trainer's wall time: its step (from taking a batch to asking for
//     the next) and its wait (blocked for the next batch: the stall), as it
//     reports them; they add up to about 1;
//   - the delivery's share of wall time: sending batches (the send loop's
//     Sends, a copy into a ring slot), and made batches waiting for the
//     trainer's credit;
//   - the making time: each batch made, from lease to made, split into
//     stages; the shares add up to 1. A local batch's time is split in the
//     proportions of its samples' stage times (queue: waiting for a core;
//     read; decode; transform); a peer's into the peer's making (the wall
//     time it reports) and the rest (network: the lease and the batch on
//     the wire, the worker's streams).
//
// The verdict (verdict.go) reads the three.

// madeBatch is one batch made for the job, as the account keeps it.
type madeBatch struct {
	at    time.Time
	maker Maker
	local bool
	lease time.Duration
	times batch.StageTimes
}

// stageLog is a job's record of its made batches and its credit waits over
// the last TelemetryWindow. Owned by the coordinator's goroutine.
type stageLog struct {
	window time.Duration
	made   []madeBatch
	// waits are the credit wait of each controller interval, by its end.
	waits []timedWait
}

type timedWait struct {
	at time.Time
	d  time.Duration
}

// madeBy records batch made by m at now, leased for took, with the stage
// times its maker measured.
func (s *stageLog) madeBy(now time.Time, m Maker, took time.Duration, times batch.StageTimes) {
	s.made = append(trimBefore(s.made, now.Add(-s.window), func(b madeBatch) time.Time { return b.at }),
		madeBatch{at: now, maker: m, local: !m.Remote(), lease: max(took, 0), times: sane(times)})
}

// creditWait records the credit wait of the controller interval ending at
// now.
func (s *stageLog) creditWait(now time.Time, d time.Duration) {
	s.waits = append(trimBefore(s.waits, now.Add(-s.window), func(w timedWait) time.Time { return w.at }), timedWait{now, max(d, 0)})
}

// trimBefore drops the items before from, in time order.
func trimBefore[T any](xs []T, from time.Time, at func(T) time.Time) []T {
	i := 0
	for i < len(xs) && at(xs[i]).Before(from) {
		i++
	}
	return append(xs[:0], xs[i:]...)
}

// sane drops a stage time that cannot be one (a peer's report is not
// trusted): negative, or more than a day.
func sane(t batch.StageTimes) batch.StageTimes {
	for _, d := range []*time.Duration{&t.Queue, &t.Read, &t.Decode, &t.Transform, &t.Wall} {
		if *d < 0 || *d > 24*time.Hour {
			*d = 0
		}
	}
	return t
}

// makerShare is what the account says of one maker.
type makerShare struct {
	batches int
	lease   time.Duration // summed
	// timed: lease time of the batches whose maker reported its making;
	// network: of that, the part not spent making.
	timed, network time.Duration
}

// meanLease is the maker's mean lease time in seconds, 0 with no batch.
func (m makerShare) meanLease() float64 {
	if m.batches == 0 {
		return 0
	}
	return m.lease.Seconds() / float64(m.batches)
}

// networkShare is the share of the maker's timed lease time not spent
// making; NaN when no batch of it was timed.
func (m makerShare) networkShare() float64 {
	if m.timed <= 0 {
		return math.NaN()
	}
	return m.network.Seconds() / m.timed.Seconds()
}

// makingShares are the making account's figures: the shares (nil with no
// batch to split), and each maker's.
type makingShares struct {
	shares *MakingShares
	makers map[Maker]makerShare
}

// shares splits the making time of the batches made since now less the
// window.
func (s *stageLog) shares(now time.Time) makingShares {
	s.made = trimBefore(s.made, now.Add(-s.window), func(b madeBatch) time.Time { return b.at })
	out := makingShares{makers: make(map[Maker]makerShare)}
	var queue, read, decode, transform, peer, network, total float64
	n := 0
	for _, b := range s.made {
		ms := out.makers[b.maker]
		ms.batches++
		ms.lease += b.lease
		L := b.lease.Seconds()
		t := b.times
		switch {
		case b.local && t.Sum() > 0:
			f := L / t.Sum().Seconds()
			queue += f * t.Queue.Seconds()
			read += f * t.Read.Seconds()
			decode += f * t.Decode.Seconds()
			transform += f * t.Transform.Seconds()
		case b.local:
			// Made by a local maker that does not time its stages: no
			// figure to split it by.
			out.makers[b.maker] = ms
			continue
		case t.Wall > 0:
			made := min(t.Wall, b.lease)
			peer += made.Seconds()
			network += (b.lease - made).Seconds()
			ms.timed += b.lease
			ms.network += b.lease - made
		default:
			peer += L
		}
		out.makers[b.maker] = ms
		total += L
		n++
	}
	if n == 0 || total <= 0 {
		return out
	}
	out.shares = &MakingShares{
		Queue: queue / total, Read: read / total, Decode: decode / total, Transform: transform / total,
		Peer: peer / total, Network: network / total, SecondsPerBatch: total / float64(n), Batches: n,
	}
	return out
}

// creditWaitRatio is the share of the window's wall time made batches
// waited for the trainer's credit.
func (s *stageLog) creditWaitRatio(now time.Time, span float64) float64 {
	s.waits = trimBefore(s.waits, now.Add(-s.window), func(w timedWait) time.Time { return w.at })
	if span <= 0 {
		return 0
	}
	var d time.Duration
	for _, w := range s.waits {
		d += w.d
	}
	return clamp01(d.Seconds() / span)
}

// judge fills the job's status with where its time went (the three
// accounts) and its verdict.
func (c *Coordinator) judge(now time.Time, snap telemetrySnap, js *Status, ms []Maker, idle float64, gpuOK bool) {
	mk := c.ctl.stages.shares(now)
	js.TrainerStepRatio, js.SendRatio = snap.step, snap.sending
	js.CreditWaitRatio = c.ctl.stages.creditWaitRatio(now, snap.span)
	js.Making = mk.shares
	in := verdictInput{
		begun: snap.begun, starting: snap.starting, credit: c.credit.n.Load() > 0, delivered: snap.batches,
		buffered: len(c.table.ready), target: c.env.Config.StallTarget, starved: js.Starvation, stall: snap.stall,
		gpuIdle: idle, gpuOK: gpuOK, sending: snap.sending, waited: js.CreditWaitRatio, bytes: snap.bytesPerSec,
		making: mk.shares, workers: c.env.Config.Workers,
	}
	var total time.Duration
	for _, f := range mk.makers {
		total += f.lease
	}
	for i, m := range ms {
		f, ok := mk.makers[m]
		if i < len(js.Makers) { // publish made js.Makers in ms's order
			js.Makers[i].LeaseSeconds, js.Makers[i].NetworkShare = f.meanLease(), f.networkShare()
			if !m.Remote() {
				js.Makers[i].NetworkShare = 0
			}
		}
		if ok && m.Remote() && total > 0 {
			in.makers = append(in.makers, makerFigures{name: m.Name(), share: f.lease.Seconds() / total.Seconds(),
				lease: f.meanLease(), network: f.networkShare()})
		}
	}
	js.Bottleneck, js.Verdict = verdict(in)
}

// makingStages are the stages of MakingShares, as metrics label them.
var makingStages = []string{"queue", "read", "decode", "transform", "peer", "network"}

// stageValues are ms's shares in makingStages' order.
func stageValues(ms *MakingShares) []float64 {
	return []float64{ms.Queue, ms.Read, ms.Decode, ms.Transform, ms.Peer, ms.Network}
}

// publishStages sets the job's stage metrics from its status.
func (c *Coordinator) publishStages(js *Status) {
	m := c.env.Metrics
	m.Images.WithLabelValues(c.name).Set(js.ImagesPerSecond)
	m.TrainerStep.WithLabelValues(c.name).Set(js.TrainerStepRatio)
	m.SendRatio.WithLabelValues(c.name).Set(js.SendRatio)
	m.CreditWait.WithLabelValues(c.name).Set(js.CreditWaitRatio)
	if ms := js.Making; ms != nil {
		for i, v := range stageValues(ms) {
			m.MakingShare.WithLabelValues(c.name, makingStages[i]).Set(v)
		}
	} else {
		// No batch made in the window: no share, rather than the last.
		m.MakingShare.DeletePartialMatch(prometheus.Labels{"stoker_job": c.name})
	}
	if js.Bottleneck != c.ctl.bottleneck {
		if c.ctl.bottleneck != "" {
			m.Bottleneck.DeleteLabelValues(c.name, c.ctl.bottleneck)
		}
		c.ctl.bottleneck = js.Bottleneck
		m.Bottleneck.WithLabelValues(c.name, c.ctl.bottleneck).Set(1)
	}
}

// dropStageMetrics deletes the job's stage series when it ends.
func (c *Coordinator) dropStageMetrics() {
	m := c.env.Metrics
	l := prometheus.Labels{"stoker_job": c.name}
	m.Images.DeletePartialMatch(l)
	m.TrainerStep.DeletePartialMatch(l)
	m.SendRatio.DeletePartialMatch(l)
	m.CreditWait.DeletePartialMatch(l)
	m.MakingShare.DeletePartialMatch(l)
	m.Bottleneck.DeletePartialMatch(l)
}
