package server

import (
	"context"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/internal/version"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
)

// Status implements stokerv1.FeedServiceServer: each job's last published
// status (its controller publishes every half second), and the makers.
func (s *Server) Status(context.Context, *stokerv1.StatusRequest) (*stokerv1.StatusResponse, error) {
	resp := &stokerv1.StatusResponse{Version: version.String()}
	if s.exec != nil {
		resp.Workers = uint32(s.exec.Workers())
	}
	resp.PeersReady = uint32(s.peersReady())
	s.active.Range(func(_, v any) bool {
		if js := v.(*coord.Coordinator).Status(); js != nil {
			resp.Jobs = append(resp.Jobs, jobStatus(js))
		}
		return true
	})
	slices.SortFunc(resp.Jobs, func(a, b *stokerv1.JobStatus) int { return strings.Compare(a.GetId(), b.GetId()) })
	return resp, nil
}

// peersReady counts the peers that take leases now: connected, their
// worker not draining, and not quarantined.
func (s *Server) peersReady() int {
	n := 0
	ms, _ := s.makers.Snapshot()
	for _, m := range ms {
		if _, ok := m.(*peerMaker); ok && m.Ready() && s.verify.Why(m) == nil {
			n++
		}
	}
	return n
}

// jobStatus is a coordinator's status on the wire.
func jobStatus(s *coord.Status) *stokerv1.JobStatus {
	js := &stokerv1.JobStatus{
		Id: s.ID, Dataset: s.Dataset, Rank: uint32(s.Rank), WorldSize: uint32(s.WorldSize), Epoch: s.Epoch,
		ImagesPerSecond: s.ImagesPerSecond, BytesPerSecond: s.BytesPerSecond, InputStallRatio: s.InputStallRatio,
		GpuIdleRatio: s.GPUIdleRatio, Window: uint32(s.Window), WindowMin: uint32(s.WindowMin), WindowMax: uint32(s.WindowMax),
		Buffered: uint32(s.Buffered), WorkersRecommended: s.WorkersRecommended, Advice: s.Advice,
		StarvationSignal: s.StarvationSignal, Starvation: s.Starvation, Shuffle: s.Shuffle,
		TrainerStepRatio: s.TrainerStepRatio, SendRatio: s.SendRatio, CreditWaitRatio: s.CreditWaitRatio,
		Bottleneck: s.Bottleneck, Verdict: s.Verdict,
		PredictedCpuSecondsPerSample: s.PredictedCPU, WorstCpuSecondsPerSample: s.WorstCPU, CpuSecondsPerSample: s.MeasuredCPU,
	}
	for _, m := range s.Makers {
		js.Makers = append(js.Makers, &stokerv1.MakerStatus{
			Name: m.Name, BatchesPerSecond: m.BatchesPerSecond, InFlight: uint32(m.InFlight), Ready: m.Ready,
			BusyBatchesPerSecond: m.BusyBatchesPerSecond, BusyRatio: m.BusyRatio, Unavailable: m.Unavailable,
			BackoffSeconds: m.BackoffSeconds, FailuresInARow: uint32(m.FailuresInARow), LeaseSeconds: m.LeaseSeconds,
			NetworkShare: m.NetworkShare,
		})
	}
	if ms := s.Making; ms != nil {
		js.Making = &stokerv1.MakingShares{
			Queue: ms.Queue, Read: ms.Read, Decode: ms.Decode, Transform: ms.Transform, Peer: ms.Peer, Network: ms.Network,
			SecondsPerBatch: ms.SecondsPerBatch, Batches: uint32(ms.Batches),
		}
	}
	return js
}

// epochEnd is a coordinator's end of an epoch on the wire.
func epochEnd(e *coord.EpochEnd) *stokerv1.EpochEnd {
	return &stokerv1.EpochEnd{Epoch: e.Epoch, Batches: e.Batches, Samples: e.Samples, SampleErrors: e.SampleErrors}
}
