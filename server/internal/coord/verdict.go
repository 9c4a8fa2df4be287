package coord

import (
	"fmt"
	"math"
)

// The verdict: what limits a job now, as a classification of the shares
// stages.go measures (no figure of time is compared with a constant). In
// order:
//
//  1. No figure yet (no batch delivered, or the window still holds the
//     job's start): "starting". Nothing delivered while made batches wait
//     for credit: "idle".
//  2. The trainer is not starved (starvation, as the controller reads it,
//     within --stall-target), and not blocked (holding credit while
//     nothing was delivered in the whole window: a trainer reports a wait
//     only once it ends): "trainer". Its GPU's idle share, when known,
//     says whether the GPU is busy or the trainer's own CPU work holds it.
//  3. Starved, and the send loop was sending at least half of the time:
//     "delivery" (the network to the trainer).
//  4. Starved, and no batch made in the window: "making" (makers stuck or
//     failing).
//  5. Starved, and peers' leases are most of the making time: the peer
//     with the largest share of it is named, "network" when most of its
//     lease time is not its making, "peer" otherwise.
//  6. Starved, on the local executor: the largest of its read, decode and
//     transform shares names it, "read", "decode" or "transform", with the
//     executor's goroutines.

// Bottleneck words, JobStatus.bottleneck.
const (
	bnStarting  = "starting"
	bnIdle      = "idle"
	bnTrainer   = "trainer"
	bnDelivery  = "delivery"
	bnMaking    = "making"
	bnNetwork   = "network"
	bnPeer      = "peer"
	bnRead      = "read"
	bnDecode    = "decode"
	bnTransform = "transform"
)

// majority is the share a stage or a group of stages must have to be
// named: more than the rest together.
const majority = 0.5

// gpuBusy is the GPU idle share under which the GPU counts as busy (the
// controller's "saturated").
const gpuBusy = 0.05

// verdictInput is what the verdict reads of one job.
type verdictInput struct {
	begun     bool // a batch was delivered
	starting  bool // the window still holds the job's start
	credit    bool // the trainer holds credit: it may take a batch now
	delivered int  // batches delivered in the window
	buffered  int  // made batches waiting for the trainer
	target    float64
	starved   float64 // starvation, as the controller reads it
	stall     float64 // the trainer's wait share
	gpuIdle   float64
	gpuOK     bool
	sending   float64 // the send loop's share of wall time
	waited    float64 // made batches' credit wait over wall time
	bytes     float64 // bytes per second delivered
	making    *MakingShares
	makers    []makerFigures // the peers that made batches in the window
	workers   int            // the local executor's goroutines
}

// makerFigures is one peer's part of the making time.
type makerFigures struct {
	name    string
	share   float64 // of the job's making time
	lease   float64 // seconds a batch
	network float64 // share of its lease time not making; NaN unknown
}

// verdict classifies the job's bottleneck: a word and one line saying it.
func verdict(in verdictInput) (bottleneck, line string) {
	blocked := in.delivered == 0 && in.credit
	switch {
	case !in.begun || in.starting:
		return bnStarting, "starting: no verdict until the trainer has taken batches for a few seconds"
	case in.delivered == 0 && in.buffered > 0 && in.waited >= majority:
		return bnIdle, fmt.Sprintf("the trainer is not taking batches: %d made batches wait for its credit", in.buffered)
	case in.starved <= in.target && !blocked:
		return trainerVerdict(in)
	case in.sending >= majority:
		return bnDelivery, fmt.Sprintf("delivery-bound: sending takes %s of the time (%.0f MB/s): the network to the trainer",
			pct(in.sending), in.bytes/1e6)
	case in.making == nil:
		return bnMaking, "the trainer waits and no batch was made in the last seconds: makers stuck or failing (stoker_lease_failures_total)"
	}
	ms := in.making
	if ms.Peer+ms.Network > majority {
		return peerVerdict(in)
	}
	cores := fmt.Sprintf("%d local cores", in.workers)
	if in.workers == 1 {
		cores = "1 local core"
	}
	switch read, decode, transform := ms.Read, ms.Decode, ms.Transform; {
	case read > decode && read >= transform:
		return bnRead, fmt.Sprintf("reading is slow: the store or disk (%s of the local work is reading)", pct(read/(read+decode+transform)))
	case transform > decode:
		return bnTransform, fmt.Sprintf("transform-bound on %s (ColorJitter, Normalize): add peers or cores", cores)
	}
	return bnDecode, fmt.Sprintf("decode-bound on %s: add peers or cores", cores)
}

// trainerVerdict is the verdict on a job whose trainer is not starved.
func trainerVerdict(in verdictInput) (string, string) {
	switch {
	case !in.gpuOK:
		return bnTrainer, fmt.Sprintf("the trainer is the bottleneck: it waits for input %s of its time", pct(in.stall))
	case in.gpuIdle < gpuBusy:
		return bnTrainer, "the trainer is the bottleneck: the GPU is busy"
	}
	return bnTrainer, fmt.Sprintf("the trainer is the bottleneck, not its input: its GPU idles %s (its own CPU work?)", pct(in.gpuIdle))
}

// peerVerdict names the peer with the largest share of the making time.
func peerVerdict(in verdictInput) (string, string) {
	var top makerFigures
	for _, m := range in.makers {
		if m.share > top.share {
			top = m
		}
	}
	if top.name == "" {
		return bnPeer, "waiting for peers' leases"
	}
	if !math.IsNaN(top.network) && top.network > majority {
		return bnNetwork, fmt.Sprintf("network-bound to peer %s: %s of its lease time is the network", top.name, pct(top.network))
	}
	return bnPeer, fmt.Sprintf("waiting for peers' leases: peer %s is slow (%.2f s a batch)", top.name, top.lease)
}

// pct formats a share as a whole percentage.
func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*clamp01(x)) }
