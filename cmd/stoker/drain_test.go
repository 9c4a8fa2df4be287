package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/client"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestDrainWorker drains one of two workers (one that holds leases, both
// stopped while the coordinator says which, so that it still holds them
// when the SIGTERM comes) of a coordinator with --workers 0 a third into
// an epoch, with
// `stoker drain --pid` as the pod's preStop hook does (SIGTERM, then wait
// for the exit). The worker drains: it answers new leases with UNAVAILABLE,
// finishes those it holds, sends them and exits on its own, long before
// its 60 s --grace. The epoch completes exactly once and in order, and no
// lease of the drained worker failed (none was thrown away and made
// again).
func TestDrainWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads a stopped process' pending signals from /proc")
	}
	ctx := processTest(t, 5*time.Minute)
	data := writeDataset(t, faultSamples, faultClasses, 0)
	workers := make([]*serveProc, 2)
	for i := range workers {
		// Paced (--bench-rate, the bytes unchanged) so that a worker still
		// holds leases when the hook's SIGTERM comes: unpaced, a batch
		// takes ~15 ms, and the coordinator's few leases were all made
		// while the trainer, paused for the hook, took none.
		workers[i] = launchServe(t, serveConfig{name: fmt.Sprintf("worker%d", i), dataset: data, workers: 1,
			args: []string{"--grace", "60s", "--bench-rate", "20"}})
	}
	for _, w := range workers {
		w.waitReady(t, ctx)
	}
	coord := startServe(t, ctx, serveConfig{name: "coordinator", dataset: data, peers: peerList(workers...)})
	waitPeersReady(t, ctx, coord, 2)

	spec := testJob(faultBatch, 13)
	nb := faultSamples / faultBatch
	hookDone := make(chan error, 1)
	var (
		victim   *serveProc
		termAt   time.Time
		failedAt float64 // the victim's lease failures, other than draining, at SIGTERM
		dropAt   float64
		lostAt   float64
	)
	// Failures of the victim's leases other than turned away: "draining"
	// (the drain's answer) and "busy" (the worker's lease limit, reached in
	// the normal course, more often on a loaded machine) are not failures.
	notDrain := func(ms map[string]float64) float64 {
		victims := `maker="` + victim.addr + `"`
		return sumSeries(ms, "stoker_lease_failures_total", victims) -
			sumSeries(ms, "stoker_lease_failures_total", victims, `reason="draining"`) -
			sumSeries(ms, "stoker_lease_failures_total", victims, `reason="busy"`)
	}
	res := consumeEpoch(t, ctx, coord.addr, spec, consumeOpts{
		throttle: 2 * time.Millisecond,
		after: func(n int) {
			if n < nb/3 || victim != nil {
				return
			}
			// The trainer takes nothing while this runs. Both workers
			// stopped, what they hold stays held; the one the coordinator
			// sees holding the most leases is the victim (none: the next
			// batch tries again), the other goes on.
			v, held := holdingWorker(t, ctx, coord, workers)
			if v == nil {
				return
			}
			victim = v
			ms, err := coord.metrics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			failedAt, dropAt = notDrain(ms), sumSeries(ms, "stoker_results_dropped_total")
			lostAt = sumSeries(ms, "stoker_lease_hedges_total", `outcome="lost"`)
			// As the pod's preStop hook does: stoker drain signals the
			// server and waits for it to exit. Its SIGTERM waits, pending,
			// for the victim to go on: it comes to a worker that holds
			// leases, whatever the time the hook's process takes to start
			// on a loaded machine; and the trainer waits for the worker's
			// drain to begin, so the epoch cannot end before it.
			termAt = time.Now()
			hook := exec.CommandContext(ctx, stokerBinary(t), "drain", "--pid", strconv.Itoa(victim.cmd.Process.Pid), "--timeout", "2m")
			if err := hook.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { hookDone <- hook.Wait() }()
			waitPending(t, ctx, victim, syscall.SIGTERM)
			victim.cont(t)
			waitLog(t, ctx, victim, "work stream draining")
			t.Logf("drained %s after %d of %d batches, with %d leases in flight on it as the coordinator saw them", victim.addr, n, nb, held)
		},
	})
	if victim == nil {
		t.Fatalf("no worker held a lease from batch %d to the epoch's end: none was drained", nb/3)
	}
	checkEpoch(t, res, spec, faultSamples)

	// It exits on its own, not cut by its grace period (the log says
	// which): the wait's bound, past the grace, only turns a hang into a
	// failure.
	select {
	case <-victim.exited:
	case <-time.After(hangGuard):
		t.Fatalf("%s still running %v after SIGTERM (its --grace is 60 s)", victim.addr, hangGuard)
	}
	took := time.Since(termAt)
	select {
	case err := <-hookDone:
		if err != nil {
			t.Errorf("stoker drain: %v, want exit 0 once the server is gone", err)
		}
	case <-time.After(hangGuard):
		t.Errorf("stoker drain still waiting %v after the server exited", hangGuard)
	}
	if victim.waitErr != nil {
		t.Errorf("%s exited with %v after SIGTERM", victim.addr, victim.waitErr)
	}
	t.Logf("%s exited %v after stoker drain", victim.addr, took.Round(time.Millisecond))
	if len(victim.findLogs("grace period over, closing open streams", nil)) > 0 {
		t.Errorf("%s was cut by its grace period, not drained", victim.addr)
	}

	// It finished what it held: its log says how many leases were in
	// flight when the drain began and how many batches it sent after.
	var inFlight, finished, turned float64
	for _, r := range victim.findLogs("work stream draining", nil) {
		v, _ := r["in_flight"].(float64)
		inFlight += v
	}
	drained := victim.findLogs("work stream drained", nil)
	for _, r := range drained {
		f, _ := r["finished"].(float64)
		a, _ := r["turned_away"].(float64)
		finished, turned = finished+f, turned+a
	}
	t.Logf("%s: %v leases in flight at the drain, %v batches finished and sent after it, %v new leases turned away", victim.addr, inFlight, finished, turned)
	if len(drained) != 1 {
		t.Errorf("%s logged %d drained Work streams, want 1", victim.addr, len(drained))
	}
	if inFlight == 0 {
		t.Errorf("no lease was in flight on %s at SIGTERM: the drain was not exercised", victim.addr)
	}
	if finished+turned < inFlight {
		t.Errorf("%s: %v leases in flight at the drain, only %v answered", victim.addr, inFlight, finished+turned)
	}
	if finished == 0 {
		t.Errorf("%s sent no batch after SIGTERM", victim.addr)
	}

	// The coordinator lost none of them: no lease of the victim failed
	// (other than turned away for the drain or as busy), no result was
	// dropped but a hedge's the coordinator cancelled, its first lease
	// having made the batch (while both workers were stopped for the hook,
	// their leases grew slow and the coordinator hedged them on the
	// other: on a loaded machine the victim may hold such hedges when the
	// drain begins, finish them, and see them dropped as lost).
	ms := logLeases(t, ctx, coord)
	if got := notDrain(ms); got != failedAt {
		t.Errorf("%v leases of %s failed after SIGTERM (reasons other than draining): made again elsewhere", got-failedAt, victim.addr)
	}
	lost := sumSeries(ms, "stoker_lease_hedges_total", `outcome="lost"`) - lostAt
	if got := sumSeries(ms, "stoker_results_dropped_total") - dropAt; got > lost {
		t.Errorf("the coordinator dropped %v results after SIGTERM, %v hedges it cancelled: %v results of leases it had not cancelled", got, lost, got-lost)
	} else if got > 0 {
		t.Logf("the coordinator dropped %v results after SIGTERM, each a hedge it cancelled (%v lost)", got, lost)
	}
	// Every lease the worker turned away, the coordinator counts as
	// turned away by the drain (not failed); it may count more: a lease it
	// sent as the worker ended the stream, which the worker never read, is
	// failed by the Peer with the stream's draining status (and made
	// elsewhere, as the checks above show).
	if got := sumSeries(ms, "stoker_lease_failures_total", `maker="`+victim.addr+`"`, `reason="draining"`); got < turned {
		t.Errorf("the coordinator counts %v leases turned away by the drain, %s turned %v away", got, victim.addr, turned)
	}
}

// holdingWorker stops every worker (SIGSTOP: what each holds stays held,
// and answers nothing), asks the coordinator's Status for its makers'
// leases in flight, and lets go on (SIGCONT) all but the one holding the
// most: it returns that one, stopped, and its leases; nil when none holds
// a lease.
func holdingWorker(t *testing.T, ctx context.Context, coord *serveProc, workers []*serveProc) (*serveProc, uint32) {
	t.Helper()
	for _, w := range workers {
		w.stop(t)
	}
	c, err := client.New(coord.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The coordinator counts a lease in flight until it has read its
	// result: results a worker sent before it stopped may still wait in
	// the coordinator's socket on a loaded machine, and the worker no
	// longer holds those leases. The workers stopped, nothing more comes:
	// read the coordinator's view until three reads in a row agree (it has
	// read what was sent), so that the count is of leases the worker had
	// not answered.
	var st *pb.StatusResponse
	for prev, same := "", 0; same < 3; {
		if st, err = c.Status(ctx); err != nil {
			t.Fatalf("coordinator status: %v", err)
		}
		var key strings.Builder
		for _, j := range st.GetJobs() {
			for _, m := range j.GetMakers() {
				fmt.Fprintf(&key, "%s=%d ", m.GetName(), m.GetInFlight())
			}
		}
		if key.String() == prev {
			same++
		} else {
			prev, same = key.String(), 0
		}
		select {
		case <-ctx.Done():
			t.Fatalf("coordinator status: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond): // a read's pace, no bound: the loop ends on agreement
		}
	}
	var victim *serveProc
	var most uint32
	for _, w := range workers {
		var n uint32
		for _, j := range st.GetJobs() {
			for _, m := range j.GetMakers() {
				if m.GetName() == w.addr {
					n += m.GetInFlight()
				}
			}
		}
		if n > most {
			victim, most = w, n
		}
	}
	for _, w := range workers {
		if w != victim {
			w.cont(t)
		}
	}
	return victim, most
}

// waitPending waits until signal sig is pending for p (stopped: Linux's
// /proc/PID/status, SigPnd or ShdPnd).
func waitPending(t *testing.T, ctx context.Context, p *serveProc, sig syscall.Signal) {
	t.Helper()
	bit := uint64(1) << (sig - 1)
	path := fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("waiting for %v pending for %s: %v", sig, p.addr, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); ok && (k == "SigPnd" || k == "ShdPnd") && err == nil && m&bit != 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%v never pending for %s", sig, p.addr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitLog waits until p logs a record of message msg (the test's deadline
// fails it).
func waitLog(t *testing.T, ctx context.Context, p *serveProc, msg string) {
	t.Helper()
	for len(p.findLogs(msg, nil)) == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%s never logged %q", p.addr, msg)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
