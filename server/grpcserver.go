package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/pipeline/ops"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// GRPCServer builds the gRPC server for s from its Config, the one place
// where that is done (for stoker serve and for tests): TLS or mutual TLS,
// the token check on every method but health, keepalive enforcement and
// message limits; FeedService, WorkService, health and reflection
// registered. The health server is returned so that a drain can report
// NOT_SERVING.
func (s *Server) GRPCServer(extra ...grpc.ServerOption) (*grpc.Server, *health.Server, error) {
	opts := append(grpcOptions(), grpc.ChainUnaryInterceptor(s.unaryAuth), grpc.ChainStreamInterceptor(s.streamAuth))
	if s.cfg.TLSCert != "" {
		tc, err := serverTLS(s.cfg.TLSCert, s.cfg.TLSKey, s.cfg.TLSClientCA)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	gs := grpc.NewServer(append(opts, extra...)...)
	// A transform nested thousands deep is refused as the client's error
	// (INVALID_ARGUMENT), not the codec's INTERNAL.
	gs.RegisterService(rpc.MapDecodeErrors(&stokerv1.FeedService_ServiceDesc, depthHint), s)
	gs.RegisterService(rpc.MapDecodeErrors(&stokerv1.WorkService_ServiceDesc, depthHint), s)
	hs := health.NewServer() // SERVING for "": the datasets are open
	hs.SetServingStatus(stokerv1.FeedService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(stokerv1.WorkService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	return gs, hs, nil
}

// depthHint is what a client whose request is nested too deep to decode
// is told to keep to.
var depthHint = fmt.Sprintf("a transform's containers (RandomApply, RandomChoice, RandomOrder) nest at most %d deep", ops.MaxNesting)

// serverTLS loads the server's certificate and, for mutual TLS, the CA its
// clients' certificates must chain to.
func serverTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pool, err := certPool(clientCA)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// peerTLS is the TLS a coordinator dials its peers with: their CA, and this
// server's certificate as a client certificate when it has one.
func peerTLS(ca, certFile, keyFile string) (*tls.Config, error) {
	pool, err := certPool(ca)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func certPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: no PEM certificate in %s", file)
	}
	return pool, nil
}

// grpcOptions are the grpc.Server options the Feed service is meant to run
// under: keepalive enforcement, a small receive limit, Stop waiting for
// handlers, and flow-control windows sized for multi-megabyte batches.
func grpcOptions() []grpc.ServerOption {
	return append(rpc.ServerBuffers(),
		// Batches' pixels are sent without being copied into protobuf
		// messages (rpc.OutChunk); every other message is protobuf's.
		grpc.ForceServerCodecV2(rpc.Codec),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             10 * time.Second,
			PermitWithoutStream: true,
		}),
		// Ping idle connections so a trainer that vanished without a FIN
		// releases its streams (and its per-client slots) within a minute.
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    30 * time.Second,
			Timeout: 20 * time.Second,
		}),
		grpc.MaxRecvMsgSize(maxRecvMsgBytes),
		// Stop waits for Feed handlers to return, so that Server.Close
		// after it never pulls the executor from under a running stream.
		grpc.WaitForHandlers(true),
		// Starting values, not yet measured: a window of two chunks per
		// stream and several streams per connection, so that one round
		// trip of latency does not throttle a multi-megabyte batch.
		// Setting them also turns off BDP estimation.
		grpc.InitialWindowSize(8<<20),
		grpc.InitialConnWindowSize(32<<20),
	)
}
