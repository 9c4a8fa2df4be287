package bench

// `stoker bench backpressure`: the scenarios slow, fast and two.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/stoker-dev/stoker/internal/freeport"
	"github.com/stoker-dev/stoker/internal/opspec"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

func (b *bpBench) spec(dataset string) *stokerv1.JobSpec {
	t := &stokerv1.TransformSpec{Preset: b.o.transform}
	if n := uint32(b.o.size); n > 0 {
		t = &stokerv1.TransformSpec{Ops: []*stokerv1.Op{
			opspec.Wire("RandomResizedCrop", "size", int(n)), opspec.Wire("RandomHorizontalFlip"),
		}}
	}
	return &stokerv1.JobSpec{Dataset: dataset, Transform: t, BatchSize: uint32(b.o.batch), Seed: 1, Shuffle: true}
}

// serverArgs are the flags every server of this bench gets.
func (b *bpBench) serverArgs(workers int, metrics string, extra ...string) []string {
	args := []string{"--workers", strconv.Itoa(workers), "--stall-target", strconv.FormatFloat(b.o.stallTarget, 'g', -1, 64), "--gpus", "none"}
	if metrics != "" {
		args = append(args, "--metrics", metrics)
	}
	return append(args, extra...)
}

// slow: one server, one trainer; phase saturated (no step), then slow.
func (b *bpBench) slow(ctx context.Context) (*bpSlowResult, error) {
	o := b.o
	res := &bpSlowResult{StepMs: msOf(o.slowStep), ServerWorkers: o.slowWorkers}
	r := newBPRunner(b, "slow")
	defer r.stop()
	srv, err := r.startServer(ctx, "server", b.serverArgs(o.slowWorkers, "")...)
	if err != nil {
		return nil, err
	}
	r.setTarget(srv)
	if err := r.startTrainers(ctx, &bpTrainer{name: "trainer", dataset: "bench"}); err != nil {
		return nil, err
	}
	r.startSampler(ctx)
	if err := r.phase(ctx, "saturated", o.seconds, []time.Duration{0}, nil); err != nil {
		return nil, err
	}
	if err := r.phase(ctx, "slow", o.seconds, []time.Duration{o.slowStep}, nil); err != nil {
		return nil, err
	}
	res.Run = r.finish()
	sat, slow := res.Run.Phases[0], res.Run.Phases[1]
	res.SaturatedImagesPerSec, res.SaturatedServerCores, res.SaturatedCPUPerImage = sat.Jobs[0].ImagesPerSec, sat.ServerCores, sat.ServerCPUPerImage
	res.SlowImagesPerSec, res.SlowServerCores, res.SlowCPUPerImage = slow.Jobs[0].ImagesPerSec, slow.ServerCores, slow.ServerCPUPerImage
	res.CPUPerImageRatio = ratio(res.SlowCPUPerImage, res.SaturatedCPUPerImage)
	res.ExpectedSlowCores = round4(res.SlowImagesPerSec * res.SaturatedCPUPerImage / 1000)
	res.CoresOverExpected = ratio(res.SlowServerCores, res.ExpectedSlowCores)
	res.StallSaturated, res.StallSlow = sat.Jobs[0].Stall, slow.Jobs[0].Stall
	res.WindowSaturated, res.WindowSlow, res.WindowSlowLast = sat.Jobs[0].Window, slow.Jobs[0].Window, slow.Jobs[0].WindowLast
	res.NarrowDecisions = slow.Decisions["narrow"]
	res.BufferedSlow = slow.Jobs[0].Buffered
	var rss []rssSample
	for _, s := range res.Run.Samples {
		if s.Phase == "slow" {
			for _, p := range s.Procs {
				if p.Proc == "server" && p.RSSBytes > 0 {
					rss = append(rss, rssSample{T: s.T, Bytes: p.RSSBytes})
				}
			}
		}
	}
	if len(rss) >= 4 {
		h := len(rss) / 2
		var first, last int64
		for _, s := range rss[:h] {
			first = max(first, s.Bytes)
		}
		for _, s := range rss[h:] {
			last = max(last, s.Bytes)
		}
		bytesOf := func(s rssSample) int64 { return s.Bytes }
		res.RSSFirstHalfMaxMiB, res.RSSLastHalfMaxMiB = mib(first), mib(last)
		res.RSSLastOverFirst = ratio(float64(last), float64(first))
		res.RSSSlope = slope(rss, bytesOf) * 60 / (1 << 20)
		res.RSSLastHalfSlope = slope(rss[h:], bytesOf) * 60 / (1 << 20)
		res.RSSFlat = res.RSSLastOverFirst <= loadFlatGoal
	}
	return res, nil
}

// fast: a coordinator with peers A (up) and B (started half-way).
func (b *bpBench) fast(ctx context.Context) (*bpFastResult, error) {
	o := b.o
	res := &bpFastResult{StepMs: msOf(o.fastStep), PeerWorkers: 1, BReady: -1}
	r := newBPRunner(b, "fast")
	defer r.stop()
	a, err := r.startServer(ctx, "peer A", b.serverArgs(1, "")...)
	if err != nil {
		return nil, err
	}
	bAddr, err := reserveLoopbackAddr()
	if err != nil {
		return nil, err
	}
	coord, err := r.startServer(ctx, "coordinator", b.serverArgs(0, "", "--peers", a.p.addr+","+bAddr)...)
	if err != nil {
		return nil, err
	}
	r.setTarget(coord)
	if err := waitScalePeers(ctx, coord.metrics, 1, 20*time.Second); err != nil {
		return nil, err
	}
	if err := r.startTrainers(ctx, &bpTrainer{name: "trainer", dataset: "bench"}); err != nil {
		return nil, err
	}
	r.startSampler(ctx)
	if err := r.phase(ctx, "A alone", o.seconds, []time.Duration{o.fastStep}, nil); err != nil {
		return nil, err
	}
	err = r.phase(ctx, "A+B", o.seconds, []time.Duration{o.fastStep}, func() error {
		p, err := r.startServer(ctx, "peer B", b.serverArgs(1, "", "--listen", bAddr)...)
		if err == nil {
			res.BStarted = r.event("peer B started")
			if p.p.addr != bAddr {
				err = fmt.Errorf("peer B listens on %s, not on the reserved %s", p.p.addr, bAddr)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	res.Run = r.finish()
	before, after := res.Run.Phases[0], res.Run.Phases[1]
	steady := steadySamples(res.Run.Samples, before)
	res.StallBefore = medianOf(steady, func(s bpSample) (float64, bool) { return s.Jobs[0].Stall, s.Jobs[0].Published })
	res.RecommendedBefore = medianOf(steady, recommendedOf)
	res.MakersBefore = medianOf(steady, func(s bpSample) (float64, bool) { return s.PeersReady, true })
	res.ImagesPerSecBefore = before.Jobs[0].ImagesPerSec
	res.CoresBefore = medianOf(steady, allCores)
	res.MachineBefore = medianOf(steady, machineCores)
	if perMaker := res.ImagesPerSecBefore / float64(o.batch) / math.Max(res.MakersBefore, 1); perMaker > 0 && o.fastStep > 0 {
		res.ImpliedBefore = math.Ceil(1.1 / o.fastStep.Seconds() / perMaker)
	}
	for _, s := range res.Run.Samples {
		if s.Phase == after.Name && s.PeersReady >= 2 {
			res.BReady = s.T
			break
		}
	}
	var afterS []bpSample
	if res.BReady >= 0 {
		res.JoinSeconds = round2(res.BReady - res.BStarted)
		res.AfterFrom = round2(res.BReady + bpTelemetryWindow.Seconds())
		for _, s := range res.Run.Samples {
			if s.Phase == after.Name && s.T >= res.AfterFrom {
				afterS = append(afterS, s)
			}
		}
		if len(afterS) < 2 { // a short run: from B's readiness on
			res.AfterFrom = res.BReady
			afterS = afterS[:0]
			for _, s := range res.Run.Samples {
				if s.Phase == after.Name && s.T >= res.AfterFrom {
					afterS = append(afterS, s)
				}
			}
		}
	}
	res.AfterSamples = len(afterS)
	res.StallAfter = medianOf(afterS, func(s bpSample) (float64, bool) { return s.Jobs[0].Stall, s.Jobs[0].Published })
	res.RecommendedAfter = medianOf(afterS, recommendedOf)
	res.MakersAfter = medianOf(afterS, func(s bpSample) (float64, bool) { return s.PeersReady, true })
	res.ImagesPerSecAfter = medianOf(afterS, func(s bpSample) (float64, bool) { return s.Jobs[0].ImagesPerSec, s.Jobs[0].Published })
	res.CoresAfter = medianOf(afterS, allCores)
	res.MachineAfter = medianOf(afterS, machineCores)
	res.BLeases = after.Leases["peer B"]
	res.UnderTarget = len(afterS) > 0 && res.StallAfter <= o.stallTarget
	return res, nil
}

// two: two trainers of different steps on one server, per schedule.
func (b *bpBench) two(ctx context.Context) (*bpTwoResult, error) {
	o := b.o
	res := &bpTwoResult{ServerWorkers: o.twoWorkers, Floor: 1.0 / 4}
	res.StallAvailable = serveHasFlag(ctx, o.exe, "schedule")
	schedules := []string{"fifo", "stall"}
	if !res.StallAvailable {
		schedules = schedules[:1]
		fmt.Fprintln(os.Stderr, "bench backpressure: two: stoker serve has no --schedule: stall scheduling is not available in this build; running fifo only")
	}
	for _, sch := range schedules {
		s, err := b.twoOnce(ctx, sch, res.StallAvailable)
		if s != nil {
			s.AboveFloor = s.MinShare >= res.Floor
			res.Schedules = append(res.Schedules, *s)
		}
		if err != nil {
			return res, fmt.Errorf("schedule %s: %w", sch, err)
		}
	}
	return res, nil
}

func (b *bpBench) twoOnce(ctx context.Context, schedule string, withFlag bool) (*bpTwoSchedule, error) {
	o := b.o
	r := newBPRunner(b, "two "+schedule)
	defer r.stop()
	extra := []string{"--dataset", "jobA=" + o.data, "--dataset", "jobB=" + o.data}
	if withFlag {
		extra = append(extra, "--schedule", schedule)
	}
	srv, err := r.startServer(ctx, "server", b.serverArgs(o.twoWorkers, "", extra...)...)
	if err != nil {
		return nil, err
	}
	r.setTarget(srv)
	ta := &bpTrainer{name: "A " + shortDur(o.twoSteps[0]), dataset: "jobA"}
	tb := &bpTrainer{name: "B " + shortDur(o.twoSteps[1]), dataset: "jobB"}
	if err := r.startTrainers(ctx, ta, tb); err != nil {
		return nil, err
	}
	r.startSampler(ctx)
	if err := r.phase(ctx, schedule, o.seconds, o.twoSteps, nil); err != nil {
		return nil, err
	}
	s := &bpTwoSchedule{Schedule: schedule, Flag: withFlag, Run: r.finish()}
	ph := s.Run.Phases[0]
	total := int64(0)
	for _, j := range ph.Jobs {
		total += j.Images
	}
	s.MinShare = 1
	for _, j := range ph.Jobs {
		tj := bpTwoJob{Job: j.Job, StepMs: j.StepMs, Images: j.Images, ImagesPerSec: j.ImagesPerSec,
			Share: ratio(float64(j.Images), float64(total)), GPUBusy: j.GPUBusy, Stall: j.Stall, Window: j.Window}
		s.Jobs = append(s.Jobs, tj)
		s.TotalGPUBusy += tj.GPUBusy
		s.MinShare = min(s.MinShare, tj.Share)
	}
	s.ServerCores = ph.ServerCores
	return s, nil
}

// serveHasFlag reports whether `stoker serve -h` lists --name.
func serveHasFlag(ctx context.Context, exe, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, exe, "serve", "-h").CombinedOutput()
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "-"+name {
			return true
		}
	}
	return false
}

// reserveLoopbackAddr is a loopback address for a server to listen on
// later (localnet.FreePortOn: not one the other servers' sockets may take
// meanwhile).
func reserveLoopbackAddr() (string, error) {
	port, err := freeport.On("127.0.0.1")
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}
