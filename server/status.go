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
			resp.Jobs = append(resp.Jobs, js)
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
