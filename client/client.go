package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/rpc"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// maxRecvMsgBytes is the client's receive limit: chunks are at most about
// 4 MiB (server.MaxChunkBytes), and a header with its batch's fields at
// most rpc.MaxHeaderBytes.
const maxRecvMsgBytes = rpc.MaxHeaderBytes

// Client is a trainer's connection to a stoker server's FeedService: one
// gRPC connection, shared by its Loaders and calls. It is safe for
// concurrent use.
type Client struct {
	target string
	conn   *grpc.ClientConn
	feed   stokerv1.FeedServiceClient
}

// New connects to the stoker server at target ("host:port" or any gRPC
// target, such as "dns:///name:port"; a host without a port is on stoker's
// port 7070, never gRPC's default 443). It returns at once: the connection
// is made on the first call. The connection is plaintext unless WithTLS or
// WithDialOptions says otherwise, pings the server every 10 s without
// traffic, accepts messages of up to 8 MiB, and has flow-control windows of
// 8 MiB per stream and 32 MiB per connection, so that a multi-megabyte batch
// is not throttled by round trips.
//
// A token (WithToken) is refused over plaintext to an address that is not
// loopback unless WithInsecureToken is given: New fails when the connection
// is certainly plaintext (neither WithTLS nor WithDialOptions given), and a
// call fails with codes.Unauthenticated when it finds the transport
// insecure.
func New(target string, opts ...Option) (*Client, error) {
	target = rpc.WithDefaultPort(target)
	var o options
	for _, f := range opts {
		f(&o)
	}
	dial := []grpc.DialOption{rpc.Plaintext()}
	if o.tls != nil {
		cfg, err := tlsConfig(o.tls)
		if err != nil {
			return nil, fmt.Errorf("client %s: %w", target, err)
		}
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	if o.token != "" {
		plainOK := o.insecureToken || rpc.IsLoopback(target)
		if !plainOK && o.tls == nil && len(o.dial) == 0 {
			return nil, fmt.Errorf("client %s: %w", target, rpc.ErrPlainToken(target))
		}
		dial = append(dial, grpc.WithPerRPCCredentials(rpc.TokenCredentials(o.token, target, plainOK)))
	}
	dial = append(dial, rpc.Keepalive(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgBytes)),
		grpc.WithInitialWindowSize(8<<20), grpc.WithInitialConnWindowSize(32<<20))
	dial = append(dial, rpc.DialBuffers()...)
	dial = append(dial, o.dial...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", target, err)
	}
	return &Client{target: target, conn: conn, feed: stokerv1.NewFeedServiceClient(conn)}, nil
}

// Close closes the connection: the client's Loaders' streams end with
// codes.Canceled.
func (c *Client) Close() error {
	return c.conn.Close()
}

// Target is the target the client was made for (with the default port
// added to a host without one).
func (c *Client) Target() string { return c.target }

// ListDatasets names the datasets the server serves.
func (c *Client) ListDatasets(ctx context.Context) ([]*stokerv1.DatasetInfo, error) {
	resp, err := c.feed.ListDatasets(ctx, &stokerv1.ListDatasetsRequest{})
	if err != nil {
		return nil, explain(c.target, err)
	}
	return resp.GetDatasets(), nil
}

// Describe validates spec and returns the JobInfo of its epoch, after
// consumed positions of the epoch's order (elastic resume; 0 normally),
// without making any batch.
func (c *Client) Describe(ctx context.Context, spec *stokerv1.JobSpec, epoch, consumed uint64) (*stokerv1.JobInfo, error) {
	resp, err := c.feed.DescribeJob(ctx, &stokerv1.DescribeJobRequest{Job: spec, Epoch: epoch, Consumed: consumed})
	if err != nil {
		return nil, explain(c.target, err)
	}
	if resp.GetInfo() == nil {
		return nil, status.Error(codes.Internal, "DescribeJob answered without a JobInfo")
	}
	return resp.GetInfo(), nil
}

// Status returns the server's jobs, as stoker status prints them.
func (c *Client) Status(ctx context.Context) (*stokerv1.StatusResponse, error) {
	resp, err := c.feed.Status(ctx, &stokerv1.StatusRequest{})
	if err != nil {
		return nil, explain(c.target, err)
	}
	return resp, nil
}

// tlsConfig loads WithTLS's files.
func tlsConfig(f *tlsFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA: no PEM certificate in %s", f.ca)
		}
	}
	if f.cert != "" || f.key != "" {
		if f.cert == "" || f.key == "" {
			return nil, errors.New("TLS client certificate: give both the certificate and its key")
		}
		cert, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
