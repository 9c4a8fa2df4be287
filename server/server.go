package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Server implements stokerv1.FeedService (trainers) and
// stokerv1.WorkService (other servers' coordinators) over the datasets of
// its Config. Its jobs' batches are made by its makers: the local executor,
// shared by all streams, and the peers of Config.Peers.
type Server struct {
	stokerv1.UnimplementedFeedServiceServer
	stokerv1.UnimplementedWorkServiceServer

	cfg      Config
	log      *slog.Logger
	m        *metrics
	exec     *pipeline.Executor // nil with Workers 0
	makers   *makers
	disc     *discovery
	datasets map[string]pipeline.Dataset
	names    []string // sorted

	streamID atomic.Uint64
	mu       sync.Mutex
	perHost  map[string]int // open streams by client host
}

var (
	_ stokerv1.FeedServiceServer = (*Server)(nil)
	_ stokerv1.WorkServiceServer = (*Server)(nil)
)

// New validates cfg, opens its datasets, starts the executor and peer
// discovery, and registers the metrics on reg. peerDial are the dial
// options for peers (credentials). Close the Server when the gRPC server
// has stopped.
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer, peerDial ...grpc.DialOption) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		log:      log,
		m:        m,
		datasets: make(map[string]pipeline.Dataset, len(cfg.Datasets)),
		names:    slices.Sorted(maps.Keys(cfg.Datasets)),
		perHost:  make(map[string]int),
	}
	for _, name := range s.names {
		ds, err := pipeline.Open(cfg.Datasets[name])
		if err != nil {
			s.closeDatasets()
			return nil, fmt.Errorf("dataset %s: %w", name, err)
		}
		s.datasets[name] = ds
		log.Info("dataset open", "dataset", name, "format", formatOf(ds), "size", ds.Len(),
			"classes", len(ds.Classes()), "fingerprint", ds.Fingerprint())
	}
	s.makers = newMakers()
	if cfg.Workers > 0 {
		s.exec = pipeline.NewExecutor(cfg.Workers)
		s.makers.add(&localMaker{exec: s.exec, slots: maxWindow})
	}
	if t, _ := parsePeers(cfg.Peers); t.static != nil || t.host != "" {
		s.disc = s.startDiscovery(t, peerDial)
	}
	return s, nil
}

// Close stops discovery, the peers and the executor, and closes the
// datasets. Call it after the gRPC server has stopped: streams still
// running would fail.
func (s *Server) Close() error {
	if s.disc != nil {
		s.disc.close()
	}
	if s.exec != nil {
		s.exec.Close()
	}
	return s.closeDatasets()
}

func (s *Server) closeDatasets() error {
	var errs []error
	for _, ds := range s.datasets {
		errs = append(errs, ds.Close())
	}
	return errors.Join(errs...)
}

// ListDatasets implements stokerv1.FeedServiceServer.
func (s *Server) ListDatasets(context.Context, *stokerv1.ListDatasetsRequest) (*stokerv1.ListDatasetsResponse, error) {
	resp := &stokerv1.ListDatasetsResponse{}
	for _, name := range s.names {
		ds := s.datasets[name]
		resp.Datasets = append(resp.Datasets, &stokerv1.DatasetInfo{
			Name:        name,
			Size:        uint64(ds.Len()),
			Classes:     ds.Classes(),
			Fingerprint: ds.Fingerprint(),
			Format:      formatOf(ds),
		})
	}
	return resp, nil
}

// formatOf names a dataset's on-disk format as DatasetInfo.format does.
func formatOf(ds pipeline.Dataset) string {
	switch ds.(type) {
	case *pipeline.ImageFolder:
		return "imagefolder"
	case *pipeline.WebDataset:
		return "webdataset"
	}
	return "unknown"
}

// acquireStream counts a stream against its client's limit. The returned
// function releases it.
func (s *Server) acquireStream(ctx context.Context) (release func(), err error) {
	host := clientHost(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.perHost[host]; n >= s.cfg.MaxStreamsPerClient {
		return nil, status.Errorf(codes.ResourceExhausted, "client %s has %d open Feed streams, the limit is %d", host, n, s.cfg.MaxStreamsPerClient)
	}
	s.perHost[host]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.perHost[host]--; s.perHost[host] <= 0 {
			delete(s.perHost, host)
		}
	}, nil
}

// clientHost is the peer's host, without its port: one machine is one
// client, however many connections it opens.
func clientHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	a := p.Addr.String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}
