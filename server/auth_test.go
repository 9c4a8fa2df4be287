package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/plan"
)

// writeFile writes data as name in a new temporary directory and returns
// its path.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeJSON writes doc's JSON as name (writeFile).
func writeJSON(t *testing.T, name string, doc any) string {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, name, string(b))
}

// dial connects to addr with opts (plaintext when none).
func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// callAll calls every method of both services once on conn under ctx and
// returns each one's status code.
func callAll(ctx context.Context, conn *grpc.ClientConn) map[string]codes.Code {
	feed, work := pb.NewFeedServiceClient(conn), pb.NewWorkServiceClient(conn)
	got := map[string]codes.Code{}
	_, err := feed.ListDatasets(ctx, &pb.ListDatasetsRequest{})
	got["ListDatasets"] = status.Code(err)
	_, err = feed.DescribeJob(ctx, &pb.DescribeJobRequest{Job: smallJob("tiny", 8).GetJob()})
	got["DescribeJob"] = status.Code(err)
	if s, err := feed.Feed(ctx); err != nil {
		got["Feed"] = status.Code(err)
	} else {
		s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: smallJob("tiny", 8)}})
		_, err = s.Recv()
		got["Feed"] = status.Code(err)
	}
	if s, err := work.Work(ctx); err != nil {
		got["Work"] = status.Code(err)
	} else {
		_, err = s.Recv()
		got["Work"] = status.Code(err)
	}
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	got["Health"] = status.Code(err)
	return got
}

func TestAuthEveryMethod(t *testing.T) {
	tokens := writeFile(t, "tokens", "# trainers\n\n  alpha  \nbeta\n")
	e := newEnv(t, Config{AuthTokens: tokens})
	conn := dial(t, e.addr)
	for _, tc := range []struct {
		name  string
		token string
		want  codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"wrong token", "gamma", codes.Unauthenticated},
		{"comment is no token", "# trainers", codes.Unauthenticated},
		{"good token", "alpha", codes.OK},
		{"second token", "beta", codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			if tc.token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.token)
			}
			for method, code := range callAll(ctx, conn) {
				want := tc.want
				if method == "Health" {
					want = codes.OK // probes need no token
				}
				if code != want {
					t.Errorf("%s: %v, want %v", method, code, want)
				}
			}
		})
	}
	// The refusal says nothing of which tokens exist.
	_, err := pb.NewFeedServiceClient(conn).ListDatasets(context.Background(), &pb.ListDatasetsRequest{})
	if msg := status.Convert(err).Message(); strings.Contains(msg, "alpha") || strings.Contains(msg, "beta") {
		t.Errorf("refusal %q names a token", msg)
	}

	// Reload: beta goes, gamma comes; a bad file keeps the old tokens.
	os.WriteFile(tokens, []byte("gamma\n"), 0o600)
	if err := e.srv.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tokens, []byte("# nothing\n"), 0o600)
	if err := e.srv.ReloadTokens(); err == nil {
		t.Error("a file with no token was accepted")
	}
	for tok, want := range map[string]codes.Code{"beta": codes.Unauthenticated, "gamma": codes.OK} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
		if _, err := pb.NewFeedServiceClient(conn).ListDatasets(ctx, &pb.ListDatasetsRequest{}); status.Code(err) != want {
			t.Errorf("after reload, %s: %v, want %v", tok, err, want)
		}
	}
}

// testCA makes a CA and, signed by it, a certificate for 127.0.0.1 usable
// by servers and clients. It returns the PEM files.
func testCA(t *testing.T) (caFile, certFile, keyFile string) {
	t.Helper()
	ca := newTestPKI(t)
	certFile, keyFile = ca.issue("stoker")
	return ca.file, certFile, keyFile
}

// testPKI is a test CA: file is its certificate's PEM file; issue signs
// certificates for 127.0.0.1, usable by servers and clients.
type testPKI struct {
	t      *testing.T
	key    *ecdsa.PrivateKey
	cert   *x509.Certificate
	file   string
	serial int64
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stoker test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	return &testPKI{t: t, key: caKey, cert: ca, serial: 1,
		file: writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))}
}

// issue makes a certificate of subject CN=cn signed by the CA and returns
// its PEM files.
func (p *testPKI) issue(cn string) (certFile, keyFile string) {
	t := p.t
	t.Helper()
	p.serial++
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile = writeFile(t, cn+".pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, cn+".key", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}

func TestTLSAndMutualTLS(t *testing.T) {
	ca, cert, key := testCA(t)
	pool, _ := certPool(ca)
	clientCert, _ := tls.LoadX509KeyPair(cert, key)
	withTLS := func(certs ...tls.Certificate) grpc.DialOption {
		return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: certs}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	e := newEnv(t, Config{TLSCert: cert, TLSKey: key})
	if _, err := pb.NewFeedServiceClient(dial(t, e.addr, withTLS())).ListDatasets(ctx, &pb.ListDatasetsRequest{}); err != nil {
		t.Errorf("TLS: %v", err)
	}
	if _, err := pb.NewFeedServiceClient(dial(t, e.addr)).ListDatasets(ctx, &pb.ListDatasetsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext to a TLS server: %v, want Unavailable", err)
	}

	m := newEnv(t, Config{TLSCert: cert, TLSKey: key, TLSClientCA: ca})
	if _, err := pb.NewFeedServiceClient(dial(t, m.addr, withTLS())).ListDatasets(ctx, &pb.ListDatasetsRequest{}); err == nil {
		t.Error("mTLS without a client certificate was accepted")
	}
	if _, err := pb.NewFeedServiceClient(dial(t, m.addr, withTLS(clientCert))).ListDatasets(ctx, &pb.ListDatasetsRequest{}); err != nil {
		t.Errorf("mTLS with a client certificate: %v", err)
	}

	// Peers over mutual TLS with tokens: the coordinator presents its
	// certificate and its peer token.
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	tokens := writeFile(t, "tokens", "peer-secret\n")
	worker := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, TLSCert: cert, TLSKey: key, TLSClientCA: ca, AuthTokens: tokens})
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: worker.addr, PeerCA: ca, TLSCert: cert, TLSKey: key, PeerTokenFile: tokens})
	ep := coord.collectTLS(t, withTLS(), smallJob("tiny", 8))
	checkOnce(t, ep, plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 8}))
}

// collectTLS is collect over a connection of its own.
func (e *testEnv) collectTLS(t *testing.T, opt grpc.DialOption, open *pb.OpenJob) epoch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	stream, err := pb.NewFeedServiceClient(dial(t, e.addr, opt)).Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: open}})
	ep, err := readEpoch(stream)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestRevokedTokenCutsStreams: a reload that removes a token ends the
// Feed and Work streams opened with it, a Feed stream between epochs
// included, with UNAUTHENTICATED saying why; streams of the tokens kept go
// on.
func TestRevokedTokenCutsStreams(t *testing.T) {
	tokens := writeFile(t, "tokens", "alpha\nbeta\n")
	e := newEnv(t, Config{AuthTokens: tokens})
	conn := dial(t, e.addr)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	feed := func(tok string, credits uint32) pb.FeedService_FeedClient {
		s, err := pb.NewFeedServiceClient(conn).Feed(as(tok))
		if err != nil {
			t.Fatal(err)
		}
		open := smallJob("tiny", 8)
		open.Epochs, open.Credits = 0, credits // epoch after epoch
		if err := s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: open}}); err != nil {
			t.Fatal(err)
		}
		if m, err := s.Recv(); err != nil || m.GetJob() == nil {
			t.Fatalf("first message %v, %v; want JobInfo", m, err)
		}
		return s
	}
	// One stream mid-epoch, one that read its epoch to the end and waits
	// for credit for the next (a Python loader's kept stream).
	mid := feed("alpha", 1)
	between := feed("alpha", 1000)
	for {
		m, err := between.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetEnd() != nil {
			break
		}
	}
	work, err := pb.NewWorkServiceClient(conn).Work(as("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := work.Recv(); err != nil || m.GetWorker() == nil {
		t.Fatalf("Work: %v, %v; want WorkerInfo", m, err)
	}
	kept := feed("beta", 1)

	os.WriteFile(tokens, []byte("beta\n"), 0o600)
	if err := e.srv.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		recv func() error
	}{
		{"Feed mid-epoch", func() error { _, err := mid.Recv(); return err }},
		{"Feed between epochs", func() error { _, err := between.Recv(); return err }},
		{"Work", func() error { _, err := work.Recv(); return err }},
	} {
		var err error
		for err == nil { // what was sent before the cut, then the status
			err = c.recv()
		}
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "removed") {
			t.Errorf("%s: %v; want Unauthenticated saying its token was removed", c.name, err)
		}
	}
	// beta's stream goes on: it reads batches as it grants credit.
	for range 3 {
		m, err := kept.Recv()
		if err != nil {
			t.Fatalf("the kept token's stream: %v", err)
		}
		if m.GetBatch() != nil {
			kept.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1}}})
		}
	}
	e.srv.tokenStreams.mu.Lock()
	n := len(e.srv.tokenStreams.open)
	e.srv.tokenStreams.mu.Unlock()
	if n != 1 {
		t.Errorf("%d streams registered, want beta's 1", n)
	}
}
