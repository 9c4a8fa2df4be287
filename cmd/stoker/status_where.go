package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Where each job's input stalls, as `stoker status` prints it below its
// table and `stoker status --watch` in its frames: the verdict, the
// trainer's wall time (its step, its wait), the delivery's share of it,
// and the making time split by stage. docs/ARCHITECTURE.md (Flow control)
// says what each share is a share of.

// printWhere prints, for each job whose server judges it (JobStatus.verdict;
// an older server does not), its verdict and its shares.
func printWhere(w io.Writer, st *stokerv1.StatusResponse) {
	first := true
	for _, j := range st.GetJobs() {
		if j.GetVerdict() == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nwhere the input stalls (the last 3 s):")
			first = false
		}
		fmt.Fprintf(w, "%s  %s\n", j.GetId(), j.GetVerdict())
		fmt.Fprintf(w, "  trainer   %s    delivery  %s\n", trainerFigures(j), deliveryFigures(j))
		if ms := j.GetMaking(); ms != nil {
			fmt.Fprintf(w, "  making    %s\n", makingFigures(ms))
		}
	}
}

// trainerFigures is the trainer's wall time: its step and its wait, and
// its GPU's idle share.
func trainerFigures(j *stokerv1.JobStatus) string {
	gpu := "n/a"
	if j.GetGpuIdleRatio() >= 0 {
		gpu = figure("%.0f%%", 100*j.GetGpuIdleRatio())
	}
	return fmt.Sprintf("step %s  wait %s  gpu idle %s", figure("%.0f%%", 100*j.GetTrainerStepRatio()),
		figure("%.0f%%", 100*j.GetInputStallRatio()), gpu)
}

// deliveryFigures is the send loop's share of wall time and the made
// batches' credit wait.
func deliveryFigures(j *stokerv1.JobStatus) string {
	return fmt.Sprintf("sending %s  credit wait %s", figure("%.0f%%", 100*j.GetSendRatio()), figure("%.0f%%", 100*j.GetCreditWaitRatio()))
}

// makingStage is one stage of the making time as status names it.
type makingStage struct {
	name  string
	share func(*stokerv1.MakingShares) float64
}

var makingStageNames = []makingStage{
	{"core wait", (*stokerv1.MakingShares).GetQueue},
	{"read", (*stokerv1.MakingShares).GetRead},
	{"decode", (*stokerv1.MakingShares).GetDecode},
	{"transform", (*stokerv1.MakingShares).GetTransform},
	{"peer", (*stokerv1.MakingShares).GetPeer},
	{"network", (*stokerv1.MakingShares).GetNetwork},
}

// makingFigures is the making time per batch and its shares by stage.
func makingFigures(ms *stokerv1.MakingShares) string {
	return figure("%.2f", ms.GetSecondsPerBatch()) + " s a batch: " + strings.Join(stageShares(ms, makingStageNames), ", ")
}

// stageShares are the stages' shares of ms, each as "name N%".
func stageShares(ms *stokerv1.MakingShares, stages []makingStage) []string {
	var out []string
	for _, s := range stages {
		out = append(out, s.name+" "+figure("%.0f%%", 100*s.share(ms)))
	}
	return out
}

// makerLine is one maker as a job measured it, short: batches per second,
// leases in flight, busy share, and a peer's lease time and network share.
func makerLine(m *stokerv1.MakerStatus) string {
	s := fmt.Sprintf("%s %s/s ×%d busy %s", m.GetName(), figure("%.1f", m.GetBatchesPerSecond()), m.GetInFlight(),
		figure("%.0f%%", 100*m.GetBusyRatio()))
	if m.GetName() != "local" && m.GetLeaseSeconds() > 0 {
		s += fmt.Sprintf(" %.2fs", m.GetLeaseSeconds())
		if n := m.GetNetworkShare(); !math.IsNaN(n) {
			s += " net " + figure("%.0f%%", 100*n)
		}
	}
	switch {
	case m.GetUnavailable() != "":
		s += " (" + m.GetUnavailable() + ")"
	case !m.GetReady():
		s += " down"
	}
	return s
}
