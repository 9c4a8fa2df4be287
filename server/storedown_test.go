package server

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/source"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStoreFaultCodes: a batch that failed by its store's fault (the
// pipeline's Fill error, wrapped by the coordinator's last attempt) ends
// the job UNAVAILABLE, or PERMISSION_DENIED for refused credentials,
// keeping the store's name and last answer; bad data keeps its own code.
func TestStoreFaultCodes(t *testing.T) {
	down := fmt.Errorf("1 of the batch's 2 samples could not be read from their store: %w",
		fmt.Errorf("%w: s3://bucket: a/1.jpg: gave up after 6 tries; last: SlowDown", source.ErrUnavailable))
	denied := fmt.Errorf("a/1.jpg: %w: InvalidAccessKeyId", source.ErrDenied)
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{down, codes.Unavailable},
		{fmt.Errorf("%w: batch 3 failed 8 times; last: %w", coord.ErrBatchFailed, down), codes.Unavailable},
		{denied, codes.PermissionDenied},
		{fmt.Errorf("%w: batch 3 failed 8 times; last: %w", coord.ErrBatchFailed, denied), codes.PermissionDenied},
		{fmt.Errorf("%w: bad huffman code", errs.Corrupt), codes.DataLoss},
	} {
		st := toStatus(tc.err)
		if got := codeOf(tc.err); got != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, got, tc.code)
		}
		if tc.code != codes.DataLoss && !strings.Contains(st.Error(), "a/1.jpg") {
			t.Errorf("%v: the status lost the message", st)
		}
	}
}

// TestWorkStoreFaultNotDraining: a peer's lease that failed by its store's
// fault reaches the coordinator as the lease's own failure (tried again,
// counted), never as UNAVAILABLE, which on a Work stream says the worker
// drains and takes it out of the pool for good; a closed executor still
// says UNAVAILABLE.
func TestWorkStoreFaultNotDraining(t *testing.T) {
	var h workHost
	down := fmt.Errorf("1 of the batch's 2 samples could not be read from their store: %w",
		fmt.Errorf("%w: s3://bucket: a/1.jpg: gave up after 6 tries; last: connection refused", source.ErrUnavailable))
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{down, codes.Unknown},
		{fmt.Errorf("a/1.jpg: %w: InvalidAccessKeyId", source.ErrDenied), codes.PermissionDenied},
		{pipeline.ErrClosed, codes.Unavailable},
	} {
		st, _ := status.FromError(h.Status(tc.err))
		if st.Code() != tc.code || st.Message() != tc.err.Error() {
			t.Errorf("%v: %v %q; want %v with the message kept", tc.err, st.Code(), st.Message(), tc.code)
		}
	}
}

// TestPeerStoreOutage: a peer whose store fails its first leases (the
// store's fault, not the samples') is tried again and stays in the pool:
// once its store answers, it makes the rest of the epoch, whole, with no
// sample error. (Sent as UNAVAILABLE, a store fault would have marked the
// peer draining, and the job would have lost its only maker.)
func TestPeerStoreOutage(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, false)
	var failed atomic.Int64
	outage := func(_ dataset.Dataset, _ int, make MakeFunc) MakeFunc {
		return func(ctx context.Context, epoch uint64, indices []int64, place []int, b *pipeline.Batch) error {
			if failed.Add(1) <= 3 {
				return fmt.Errorf("1 of the batch's %d samples could not be read from their store: %w", len(indices),
					fmt.Errorf("%w: s3://bkt: a/1.jpg: gave up after 6 tries; last: connection refused", source.ErrUnavailable))
			}
			return make(ctx, epoch, indices, place, b)
		}
	}
	worker := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, Making: outage})
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: worker.addr})
	waitPeers(t, coord, 1)
	want := startServer(t, Config{Datasets: map[string]string{"tiny": root}}).collect(t, smallJob("tiny", 4))
	got := coord.collect(t, smallJob("tiny", 4))
	if failed.Load() <= 3 {
		t.Fatalf("the peer was asked %d times: the outage was not met", failed.Load())
	}
	sameBatches(t, "after the peer's store came back", want.batches, got.batches)
	for _, b := range got.batches {
		if len(b.hdr.GetErrors()) > 0 {
			t.Errorf("batch %d: sample errors %v", b.hdr.GetNumber(), b.hdr.GetErrors())
		}
	}
}
