package bench

// `stoker bench backpressure`: sampling the servers' /metrics and /proc,
// and reading figures off the samples.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// startSampler samples every o.sample until finish.
func (r *bpRunner) startSampler(ctx context.Context) {
	ctx, r.stopSampler = context.WithCancel(ctx)
	r.sampleDone = make(chan struct{})
	go func() {
		defer close(r.sampleDone)
		tick := time.NewTicker(r.b.o.sample)
		defer tick.Stop()
		hist := map[string][]bpPoint{}
		var ready float64
		for {
			r.sampleOnce(ctx, hist, &ready)
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// bpPoint is a cumulative counter's value at t.
type bpPoint struct{ t, v float64 }

// rateOver appends (t, v) to h and returns the rate over about the last
// second.
func rateOver(h *[]bpPoint, t, v float64) float64 {
	*h = append(*h, bpPoint{t, v})
	i := 0
	for i+1 < len(*h) && (*h)[i+1].t <= t-1 {
		i++
	}
	*h = (*h)[i:]
	first := (*h)[0]
	if t <= first.t {
		return 0
	}
	return (v - first.v) / (t - first.t)
}

func (r *bpRunner) sampleOnce(ctx context.Context, hist map[string][]bpPoint, ready *float64) {
	r.mu.Lock()
	procs, trainers, target, phase := slices.Clone(r.procs), slices.Clone(r.trainers), r.target, r.phaseNow
	r.mu.Unlock()
	if phase == "" {
		return
	}
	now := time.Now()
	t := now.Sub(r.start).Seconds()
	s := bpSample{T: round2(t), Phase: phase, Jobs: []bpJobSample{}, Procs: []bpProcSample{}}
	var ms map[string]float64
	var err error
	if target != nil {
		ms, err = ScrapeMetrics(ctx, target.metrics)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.mu.Lock()
			r.run.ScrapeErrors++
			r.mu.Unlock()
		}
	}
	if ms != nil {
		s.PeersReady = ms["stoker_peers_ready"]
		if s.PeersReady != *ready {
			r.event(fmt.Sprintf("%v peer(s) ready", s.PeersReady))
			*ready = s.PeersReady
		}
	}
	for _, tr := range trainers {
		js := bpJobSample{Job: tr.name, Recommended: -1}
		if ms != nil {
			w, ok := jobSeries(ms, "stoker_window", tr.dataset)
			js.Published = ok
			js.Window = w
			js.Stall, _ = jobSeries(ms, "stoker_input_stall_ratio", tr.dataset)
			js.Buffered, _ = jobSeries(ms, "stoker_buffered_batches", tr.dataset)
			if v, ok := jobSeries(ms, "stoker_workers_recommended", tr.dataset); ok && !math.IsNaN(v) {
				js.Recommended = v
			}
			sent := ms[`stoker_samples_sent_total{dataset="`+tr.dataset+`"}`]
			h := hist["sent "+tr.name]
			js.ImagesPerSec = round2(rateOver(&h, t, sent))
			hist["sent "+tr.name] = h
			js.Stall = round4(js.Stall)
		}
		s.Jobs = append(s.Jobs, js)
	}
	for _, p := range procs {
		ps := bpProcSample{Proc: p.name}
		if c, err := p.cpu(); err == nil {
			h := hist["cpu "+p.name]
			ps.Cores = round3(rateOver(&h, t, c.Seconds()))
			hist["cpu "+p.name] = h
		}
		ps.RSSBytes, _ = p.rss()
		s.Procs = append(s.Procs, ps)
	}
	r.mu.Lock()
	r.run.Samples = append(r.run.Samples, s)
	r.mu.Unlock()
}

// jobSeries finds metric's series for the job of dataset on the server
// (its job label is DATASET-rRANK-ID); with several (a job that ended and
// one that began), the largest value.
func jobSeries(ms map[string]float64, metric, dataset string) (float64, bool) {
	found, v := false, 0.0
	for k, x := range ms {
		if strings.HasPrefix(k, metric+"{") && strings.Contains(k, `stoker_job="`+dataset+`-r`) {
			if !found || x > v {
				v = x
			}
			found = true
		}
	}
	return v, found
}

// seriesLabel returns label's value in series key of metric.
func seriesLabel(key, metric, label string) (string, bool) {
	rest, ok := strings.CutPrefix(key, metric+"{")
	if !ok {
		return "", false
	}
	_, v, ok := strings.Cut(rest, label+`="`)
	if !ok {
		return "", false
	}
	v, _, ok = strings.Cut(v, `"`)
	return v, ok
}

// steadySamples are ph's samples after its first telemetry window (its
// first half when shorter).
func steadySamples(ss []bpSample, ph bpPhase) []bpSample {
	from := ph.Start + min(bpTelemetryWindow.Seconds(), (ph.End-ph.Start)/2)
	var out []bpSample
	for _, s := range ss {
		if s.Phase == ph.Name && s.T >= from {
			out = append(out, s)
		}
	}
	return out
}

// medianOf is the median of f over the samples where it is ok; -1 (not
// measured: every figure it is used for is otherwise at least 0) when none
// is.
func medianOf(ss []bpSample, f func(bpSample) (float64, bool)) float64 {
	var xs []float64
	for _, s := range ss {
		if v, ok := f(s); ok && !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return -1
	}
	return round4(median(xs))
}

func recommendedOf(s bpSample) (float64, bool) {
	return s.Jobs[0].Recommended, s.Jobs[0].Published && s.Jobs[0].Recommended >= 0
}

// allCores is the cores the bench's processes used (not the machine's).
func allCores(s bpSample) (float64, bool) {
	sum := 0.0
	for _, p := range s.Procs {
		if p.Proc != bpMachine {
			sum += p.Cores
		}
	}
	return sum, true
}

// machineCores is the machine's busy cores, every process's and steal.
func machineCores(s bpSample) (float64, bool) {
	for _, p := range s.Procs {
		if p.Proc == bpMachine {
			return p.Cores, true
		}
	}
	return 0, false
}

// machineBusy is the CPU time every CPU spent busy (user, nice, system,
// irq, softirq and steal: time the hypervisor gave to others) since boot,
// from /proc/stat, in clock ticks of 10 ms.
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// machineMemUsed is MemTotal less MemAvailable, from /proc/meminfo.
func machineMemUsed() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	var total, avail int64 = -1, -1
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "MemTotal":
				total = n << 10
			case "MemAvailable":
				avail = n << 10
			}
		}
	}
	if total < 0 || avail < 0 {
		return 0, errors.New("/proc/meminfo: no MemTotal or MemAvailable")
	}
	return total - avail, nil
}
