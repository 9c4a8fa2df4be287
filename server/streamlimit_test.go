package server

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// dialFrom is dial with creds over a connection of its own whose local
// address is ip (127.0.0.0/8 is all loopback on Linux: each address is
// another host to the server).
func dialFrom(t *testing.T, addr, ip string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return dial(t, addr, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
}

// holdFeed opens on conn a Feed stream that stays open (no credits) and
// returns the error of its first message: nil when the server took it
// (JobInfo).
func holdFeed(t *testing.T, ctx context.Context, conn *grpc.ClientConn) error {
	t.Helper()
	s, err := pb.NewFeedServiceClient(conn).Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open := smallJob("tiny", 8)
	open.Credits = 0
	s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: open}}) // io.EOF when refused first: Recv says why
	m, err := s.Recv()
	if err == nil && m.GetJob() == nil {
		t.Fatalf("first message %v, want JobInfo", m)
	}
	return err
}

// holdWork opens on conn a Work stream and returns the error of its first
// message: nil when the server took it (WorkerInfo).
func holdWork(t *testing.T, ctx context.Context, conn *grpc.ClientConn) error {
	t.Helper()
	s, err := pb.NewWorkServiceClient(conn).Work(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Recv()
	if err == nil && m.GetWorker() == nil {
		t.Fatalf("first message %v, want WorkerInfo", m)
	}
	return err
}

// wantRefused checks that err is RESOURCE_EXHAUSTED with every one of
// want in its message.
func wantRefused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("%s: %v, want ResourceExhausted", what, err)
		return
	}
	for _, w := range want {
		if msg := status.Convert(err).Message(); !strings.Contains(msg, w) {
			t.Errorf("%s: %q does not say %q", what, msg, w)
		}
	}
}

// TestStreamLimitPerClient: --max-streams-per-client (and
// --max-work-streams-per-client) count a client as rpc.LimitID does. With
// no client certificate a client is its host: more connections from one
// host get no more streams, another host is another client. Over mutual
// TLS a client is its certificate's subject: two certificates on one host
// (trainers behind one NAT) are two clients, and one certificate is one
// client from any host and over any number of connections.
func TestStreamLimitPerClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	t.Run("by host", func(t *testing.T) {
		e := newEnv(t, Config{MaxStreamsPerClient: 2, MaxWorkStreamsPerClient: 1})
		plain := insecure.NewCredentials()
		for i := range 2 {
			if err := holdFeed(t, ctx, dialFrom(t, e.addr, "127.0.0.1", plain)); err != nil {
				t.Fatalf("stream %d from 127.0.0.1: %v", i, err)
			}
		}
		err := holdFeed(t, ctx, dialFrom(t, e.addr, "127.0.0.1", plain))
		wantRefused(t, "a third connection from 127.0.0.1", err,
			"client host 127.0.0.1 has 2 open Feed streams", "the limit is 2 per client", "--max-streams-per-client")
		if err := holdFeed(t, ctx, dialFrom(t, e.addr, "127.0.0.2", plain)); err != nil {
			t.Errorf("a stream from another host: %v", err)
		}
		if got := testutil.ToFloat64(e.srv.m.refusals.WithLabelValues("max_streams_per_client")); got != 1 {
			t.Errorf("refusals{max_streams_per_client} = %v, want 1", got)
		}

		// Work streams are counted apart, by the same client.
		if err := holdWork(t, ctx, dialFrom(t, e.addr, "127.0.0.1", plain)); err != nil {
			t.Fatalf("Work stream from 127.0.0.1: %v", err)
		}
		err = holdWork(t, ctx, dialFrom(t, e.addr, "127.0.0.1", plain))
		wantRefused(t, "a second Work connection from 127.0.0.1", err,
			"client host 127.0.0.1 has 1 open Work streams", "--max-work-streams-per-client")
		if err := holdWork(t, ctx, dialFrom(t, e.addr, "127.0.0.2", plain)); err != nil {
			t.Errorf("a Work stream from another host: %v", err)
		}
	})

	t.Run("by certificate", func(t *testing.T) {
		ca := newTestPKI(t)
		srvCert, srvKey := ca.issue("stoker")
		e := newEnv(t, Config{MaxStreamsPerClient: 1, TLSCert: srvCert, TLSKey: srvKey, TLSClientCA: ca.file})
		pool, err := certPool(ca.file)
		if err != nil {
			t.Fatal(err)
		}
		as := func(cn string) credentials.TransportCredentials {
			cert, key := ca.issue(cn)
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			return credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})
		}
		a, b := as("trainer-a"), as("trainer-b")
		if err := holdFeed(t, ctx, dialFrom(t, e.addr, "127.0.0.1", a)); err != nil {
			t.Fatalf("trainer-a's stream: %v", err)
		}
		// One certificate from another host, over another connection, is
		// still the same client.
		err = holdFeed(t, ctx, dialFrom(t, e.addr, "127.0.0.2", a))
		wantRefused(t, "trainer-a's second stream, from another host", err,
			"client certificate CN=trainer-a has 1 open Feed streams", "the limit is 1 per client", "--max-streams-per-client")
		// Another certificate on the same host is another client.
		if err := holdFeed(t, ctx, dialFrom(t, e.addr, "127.0.0.1", b)); err != nil {
			t.Errorf("trainer-b's stream from trainer-a's host: %v", err)
		}
	})
}
