package coord

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// The advisor: how many makers (the local executor counts as one, each peer
// as one) a job needs so that its trainer is not starved for input, as the
// metric stoker_workers_recommended an autoscaler follows, up and down.
//
// Starvation is read from the GPU when a monitor is there: CUDA runs
// ahead, so a trainer waits in next() while its GPU still works on the
// step before, and its wait share overstates starvation about twofold (on
// an H100 training ResNet-50: wait 0.645 where the GPU idled 0.337). The
// GPU's idle share is the starvation, the trainer's wait corroborates it
// (a GPU idle while the trainer never waits for a batch is not starved of
// input), and without a driver the wait share stands in for it.
//
// Demand is what the trainer would take were it never starved: what it got
// over the share of the time it was not starved. A maker's capacity is its
// batches per busy second (time with at least one of the job's leases on
// it), measured whatever its load, so that the advisor can see both that
// more makers are needed and that fewer would do.

// adviceHeadroom is how much more than the measured demand the recommended
// makers should make: measurement noise, and slack over exact saturation.
const adviceHeadroom = 1.05

// maxStarvationForDemand caps the starvation demand is inferred from: a job
// starved nearly all the time (a trainer just starting, a GPU busy with
// something else) would otherwise claim a demand of many times what it
// got.
const maxStarvationForDemand = 0.9

// busyFloor is the makers' busy share under which a starved trainer is not
// short of makers: they had time to spare, so something else (the network,
// the trainer's own process, the window) holds it up.
const busyFloor = 0.7

// starvation is the starvation the advice and the window controller act
// on, and the name of the signal it comes from.
func starvation(wait, gpuIdle float64, gpuOK bool) (s float64, signal string) {
	if !gpuOK {
		return clamp01(wait), "trainer wait"
	}
	return min(clamp01(gpuIdle), clamp01(wait)), "gpu"
}

func clamp01(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return min(max(x, 0), 1)
}

// adviceInput is what the advisor reads of one job, over the telemetry
// window.
type adviceInput struct {
	target    float64 // --stall-target
	starved   float64 // starvation (above)
	delivered float64 // batches per second delivered
	waited    bool    // the trainer waited at all (or reported nothing yet)
	bytes     float64 // bytes per second delivered
	makers    int     // ready makers the job may use
	busyRates []float64
	busyShare float64 // the makers' mean busy share
	// spare: makers had room while made batches waited for the trainer or
	// leases were fewer than the window: the makers were not what held the
	// trainer up.
	spare bool
	// starting: the figures still hold the job's start (telemetrySnap).
	starting bool
}

// advise is the advisor's raw recommendation and one line of advice. NaN
// when it has no figure yet.
func advise(in adviceInput) (recommended float64, advice string) {
	perMaker, known := 0.0, 0
	for _, r := range in.busyRates {
		if r > 0 {
			perMaker += r
			known++
		}
	}
	if in.makers == 0 || known == 0 {
		return math.NaN(), "no makers measured yet"
	}
	perMaker /= float64(known)
	makers := float64(in.makers)
	if in.delivered <= 0 && !in.waited {
		return makers, "the trainer is not taking batches"
	}
	if in.starting {
		// In its first window a job's trainer waited for the stream to
		// open and the first batches to be made, and its GPU idled before
		// them, whatever the makers: starvation near 1 over a little
		// delivered, a demand many times the real one, published at once
		// (rises are) and held for the whole stabilization window.
		return math.NaN(), "measuring (the job is starting)"
	}
	demand := in.delivered / (1 - min(in.starved, maxStarvationForDemand))
	needed := max(1, math.Ceil(demand*adviceHeadroom/perMaker-1e-9))
	switch {
	case in.starved <= in.target:
		if needed < makers {
			return needed, "fine (" + strconv.Itoa(int(makers-needed)) + " fewer would do)"
		}
		return makers, "fine"
	case in.spare || in.busyShare < busyFloor:
		// Starved, but the makers had time to spare: more of them would
		// idle too. Hold the count.
		return makers, "the network or the trainer is the limit (" + mbps(in.bytes) + ")"
	case needed > makers:
		return needed, "needs about " + strconv.Itoa(int(needed-makers)) + " more workers"
	}
	return makers, "starved, though the makers should keep up: the trainer or the network may be the limit"
}

func mbps(b float64) string { return strconv.Itoa(int(math.Round(b/1e6))) + " MB/s" }

// adviceSmoothing is how far back the advisor's figure looks: the median
// of its estimates over this time is what the stabilizer is given. Each
// estimate reads 3 s windows (the trainer's reports, the deliveries, the
// GPU monitor's), and a starved job's demand is extrapolated from them,
// delivered over the share of time not starved: at a quarter of the
// demand met, an idle share off by 0.03 moves it by 13%. Every estimate
// went to the stabilizer, which publishes the highest of the last
// --advise-window: the highest of a minute of noise. With one worker of
// a GPU's 4.3 workers' worth, one estimate in ten said 6 where 5 do
// (bench backpressure --scenario autoscale), and the autoscaler went to 6
// and back. The median over the makers' capacity window lets an estimate
// through only once it held for half of it.
const adviceSmoothing = capacityWindow

// medianFilter is the median of the figures of the last window (the upper
// one of an even count: the more makers), NaN while there is none.
type medianFilter struct {
	window time.Duration
	recent []timedValue
}

// add takes the figure v at now (NaN: none) and returns the median.
func (m *medianFilter) add(now time.Time, v float64) float64 {
	if !math.IsNaN(v) {
		m.recent = append(m.recent, timedValue{now, v})
	}
	i := 0
	for i < len(m.recent) && now.Sub(m.recent[i].at) > m.window {
		i++
	}
	m.recent = append(m.recent[:0], m.recent[i:]...)
	if len(m.recent) == 0 {
		return math.NaN()
	}
	vs := make([]float64, len(m.recent))
	for i, r := range m.recent {
		vs[i] = r.v
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// stabilizer publishes the advisor's recommendations as an autoscaler
// should follow them: a rise at once, a fall only once every
// recommendation over the last window was at most as low (the highest of
// them is published meanwhile, as the Kubernetes HPA's scale-down
// stabilization does), and never above max.
type stabilizer struct {
	window time.Duration
	max    float64
	recent []timedValue
}

type timedValue struct {
	at time.Time
	v  float64
}

// add takes the raw recommendation v at now and returns the one to
// publish (NaN while there is none).
func (s *stabilizer) add(now time.Time, v float64) float64 {
	if !math.IsNaN(v) {
		v = min(v, s.max)
		s.recent = append(s.recent, timedValue{now, v})
	}
	i := 0
	for i < len(s.recent) && now.Sub(s.recent[i].at) > s.window {
		i++
	}
	s.recent = append(s.recent[:0], s.recent[i:]...)
	out := math.NaN()
	for _, r := range s.recent {
		if math.IsNaN(out) || r.v > out {
			out = r.v
		}
	}
	return out
}
