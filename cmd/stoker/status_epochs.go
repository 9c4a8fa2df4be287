package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/stoker-dev/stoker/client"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// followEpochs is `stoker status --epochs`: it asks the server for its
// status every `every` and, each time one of its jobs ends an epoch (its
// epoch moves on, or the job ends), prints what that epoch needed. It
// returns nil when the server stops answering after it answered once (the
// batch job's end), or when ctx ends.
func followEpochs(ctx context.Context, w io.Writer, c *client.Client, every, timeout time.Duration) error {
	var ew epochWatch
	answered := false
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := c.Status(cctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !answered:
			return err
		case err != nil:
			for _, line := range ew.finish() {
				fmt.Fprintln(w, line)
			}
			return nil
		}
		answered = true
		for _, line := range ew.observe(st) {
			fmt.Fprintln(w, line)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// epochWatch remembers each job's last status, to tell what an epoch
// needed once it is over.
type epochWatch struct {
	last map[string]*stokerv1.JobStatus
}

// observe takes the server's status and returns a line for each job
// whose epoch moved on since the last status (about that epoch, from the
// last status seen in it) or that is gone (its last epoch).
func (w *epochWatch) observe(st *stokerv1.StatusResponse) []string {
	if w.last == nil {
		w.last = map[string]*stokerv1.JobStatus{}
	}
	var lines []string
	seen := map[string]bool{}
	for _, j := range st.GetJobs() {
		seen[j.GetId()] = true
		if prev := w.last[j.GetId()]; prev != nil && j.GetEpoch() > prev.GetEpoch() {
			lines = append(lines, epochNeeded(prev, ""))
		}
		w.last[j.GetId()] = j
	}
	for _, id := range slices.Sorted(maps.Keys(w.last)) {
		if !seen[id] {
			lines = append(lines, epochNeeded(w.last[id], ", its last"))
			delete(w.last, id)
		}
	}
	return lines
}

// finish returns the lines of the jobs still listed when the server went
// away (at a batch job's end, the coordinator may stop before the
// follower sees its job gone): their last epoch, so far.
func (w *epochWatch) finish() []string {
	var lines []string
	for _, id := range slices.Sorted(maps.Keys(w.last)) {
		lines = append(lines, epochNeeded(w.last[id], ", its last"))
	}
	w.last = nil
	return lines
}

// epochNeeded is the line for job j's epoch, from its status near the
// epoch's end: the workers (one per worker node, as the Slurm recipe runs
// them) the advisor's recommendation amounts to. The recommendation
// counts makers, the coordinator's own executor ("local") as one, so the
// workers are one fewer where the coordinator decodes.
func epochNeeded(j *stokerv1.JobStatus, note string) string {
	local, ready := 0, 0
	for _, m := range j.GetMakers() {
		switch {
		case m.GetName() == "local":
			local = 1
		case m.GetReady():
			ready++
		}
	}
	head := fmt.Sprintf("stoker: job %s epoch %d%s: ", j.GetId(), j.GetEpoch(), note)
	rec := j.GetWorkersRecommended()
	if math.IsNaN(rec) || rec <= 0 {
		return head + fmt.Sprintf("no advice yet (%s); %d workers were ready", j.GetAdvice(), ready)
	}
	makers := int(math.Ceil(rec))
	nodes := max(0, makers-local)
	own := ""
	if local == 1 {
		own = ", the coordinator's own cores one of them"
	}
	return head + fmt.Sprintf("this job would have needed %d worker nodes (%d makers recommended%s; %d workers were ready; %s)",
		nodes, makers, own, ready, j.GetAdvice())
}
