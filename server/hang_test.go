package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestNoSilentHang: a coordinator that decodes nothing (--workers 0) and
// whose only peer refuses it (it has no token for a worker that requires
// one) fails the trainer's stream with UNAVAILABLE naming the peer and why,
// after a few lease timeouts, instead of leaving it waiting forever.
func TestNoSilentHang(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	worker := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, AuthTokens: tokens})
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: worker.addr, LeaseTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := readEpoch(coord.feedStream(t, ctx, smallJob("tiny", 4)))
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), worker.addr) || !strings.Contains(st.Message(), "--lease-timeout") || !strings.Contains(st.Message(), "Unauthenticated") {
		t.Fatalf("got %v; want UNAVAILABLE naming the peer %s, why (Unauthenticated) and the wait", err, worker.addr)
	}
	if ctx.Err() != nil {
		t.Fatal("the test's deadline, not the coordinator, ended the wait")
	}
	t.Logf("the trainer was told: %s", st.Message())
}
