package client_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/server"
)

// TestWithMaxSampleErrors: a corrupt file passes under the server's
// default bound (padded, listed in the batch's errors), and ends the job
// with DATA_LOSS naming it under WithMaxSampleErrors(0, 0).
func TestWithMaxSampleErrors(t *testing.T) {
	dir := makeDataset(t, []string{"a", "b"}, 4)
	if err := os.WriteFile(filepath.Join(dir, "b", "zz.jpg"), []byte("not a JPEG"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Datasets: map[string]string{"tiny": dir}, Workers: 1}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	gs, _, err := srv.GRPCServer()
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, serve(t, gs))
	failed := 0
	for _, b := range drain(t, c.Loader(spec(3), client.WithEpochs(1))) {
		failed += len(b.Errors)
	}
	if failed != 1 {
		t.Errorf("the default bound: %d sample errors over the epoch, want the corrupt file's 1", failed)
	}
	l := c.Loader(spec(3), client.WithEpochs(1), client.WithMaxSampleErrors(0, 0))
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		_, err = l.Next(ctx)
		if err != nil {
			break
		}
	}
	if err == io.EOF || status.Code(err) != codes.DataLoss || !strings.Contains(err.Error(), "b/zz.jpg") ||
		!strings.Contains(err.Error(), "max_sample_errors (0)") {
		t.Errorf("WithMaxSampleErrors(0, 0): %v; want DATA_LOSS naming the file and the bound", err)
	}
}
