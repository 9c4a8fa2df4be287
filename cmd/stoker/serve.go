package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// runServe is `stoker serve`: flags into a server.Config, then the gRPC
// server, the metrics endpoint and the signal handling around server.New.
func runServe(args []string) error {
	ctx := cmdContext() // first, so that a signal never finds the default handler
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	cfg := server.Config{Datasets: map[string]string{}}
	fs.Func("dataset", "NAME=PATH: serve the dataset at PATH as NAME (repeatable)", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		if _, dup := cfg.Datasets[name]; !ok || dup {
			return fmt.Errorf("want a new NAME=PATH, got %q", v)
		}
		cfg.Datasets[name] = path
		return nil
	})
	listen := fs.String("listen", "127.0.0.1:7070", "gRPC listen address (port 0: any free port)")
	addrFile := fs.String("addr-file", "", "write the bound gRPC address to this file once listening")
	metricsAddr := fs.String("metrics", "", "serve Prometheus /metrics on this address (empty: off)")
	fs.IntVar(&cfg.Workers, "workers", runtime.NumCPU(), "decode goroutines on this machine, shared by all streams and peers' leases; 0: decode nothing here, peers make every batch")
	fs.IntVar(&cfg.Window, "window", 0, "leases one job has in flight at once; 0: two per ready maker (local executor, each peer), at least 4")
	fs.StringVar(&cfg.Peers, "peers", "", "servers to lease batches to: ADDR,ADDR,... or dns:///NAME:PORT (re-resolved; a Kubernetes headless Service works as is)")
	fs.DurationVar(&cfg.LeaseTimeout, "lease-timeout", server.DefaultLeaseTimeout, "how long a maker may take for one batch before its lease goes to another")
	fs.DurationVar(&cfg.PeerRefresh, "peer-refresh", 5*time.Second, "how often a dns:/// --peers name is resolved again")
	fs.Int64Var(&cfg.MaxBatchBytes, "max-batch-bytes", server.DefaultMaxBatchBytes, "refuse jobs whose batches are larger")
	fs.IntVar(&cfg.MaxStreamsPerClient, "max-streams-per-client", server.DefaultMaxStreamsPerClient, "open Feed streams allowed per client host")
	grace := fs.Duration("grace", 10*time.Second, "on SIGINT/SIGTERM, how long open streams may finish before they are cut")
	logFormat := fs.String("log-format", "text", "log lines as text or json")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "debug, info, warn or error")
	fs.Parse(args)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	spareP(cfg.Workers)

	opts := &slog.HandlerOptions{Level: level}
	log := slog.New(slog.NewTextHandler(os.Stderr, opts))
	switch *logFormat {
	case "json":
		log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	case "text":
	default:
		return fmt.Errorf("serve: --log-format %q: want text or json", *logFormat)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := server.New(cfg, log, reg)
	if err != nil {
		return err
	}
	defer srv.Close() // after the gRPC server has stopped (defers run last-in first-out)

	gs := grpc.NewServer(server.GRPCOptions()...)
	stokerv1.RegisterFeedServiceServer(gs, srv)
	stokerv1.RegisterWorkServiceServer(gs, srv)
	hs := health.NewServer() // SERVING for "" by default: the datasets are open
	hs.SetServingStatus(stokerv1.FeedService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(stokerv1.WorkService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)

	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(lis) }()
	if *metricsAddr != "" {
		mlis, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			gs.Stop()
			return err
		}
		hsrv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), ReadHeaderTimeout: 10 * time.Second}
		defer hsrv.Close()
		go func() { errc <- hsrv.Serve(mlis) }()
		log.Info("metrics", "addr", mlis.Addr().String())
	}
	addr := lis.Addr().String()
	if *addrFile != "" {
		if err := writeFileAtomic(*addrFile, addr+"\n"); err != nil {
			gs.Stop()
			return err
		}
	}
	log.Info("listening", "addr", addr, "workers", cfg.Workers, "datasets", len(cfg.Datasets), "peers", cfg.Peers)

	select {
	case <-ctx.Done():
	case err := <-errc:
		gs.Stop()
		return err
	}
	// Drain: health says NOT_SERVING so balancers move away, open streams
	// get the grace period to finish their epoch, then are cut.
	log.Info("stopping", "grace", *grace)
	hs.Shutdown()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(*grace):
		log.Warn("grace period over, closing open streams")
		gs.Stop()
		<-stopped
	}
	log.Info("stopped")
	return nil
}

// writeFileAtomic writes data to path through a rename, so that a reader
// polling for the file never sees it half-written.
func writeFileAtomic(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addr-*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(data)
	if err = errors.Join(err, tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
