package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/source"
	"github.com/stoker-dev/stoker/server/internal/coord"
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
		{fmt.Errorf("%w: bad huffman code", pipeline.ErrCorrupt), codes.DataLoss},
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

// storeOf is a dataset read from a store that only has a name.
type storeOf struct {
	pipeline.Dataset
	url string
}

func (d storeOf) Store() source.Store { return namedStore{url: d.url} }

type namedStore struct {
	source.Store
	url string
}

func (s namedStore) String() string { return s.url }

// TestStoreWait: a lease that ran out of time on a dataset in object
// storage says which store its samples wait for and what to do; one
// cancelled, or on a local dataset, keeps its error as it was.
func TestStoreWait(t *testing.T) {
	late := fmt.Errorf("lease: %w", context.DeadlineExceeded)
	err := storeWait(storeOf{url: "s3://bucket/train"}, late)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "s3://bucket/train") ||
		!strings.Contains(err.Error(), "--store-timeout") || !strings.Contains(err.Error(), "--lease-timeout") ||
		!strings.Contains(err.Error(), "loader.load_state_dict(state)") {
		t.Errorf("a late lease on a bucket: %v; want the deadline, the store, the flags and how to resume", err)
	}
	down := fmt.Errorf("%w: s3://bucket: a/1.jpg: gave up after 2 tries; last: connection reset", source.ErrUnavailable)
	if err := storeErr(storeOf{url: "s3://bucket/train"}, down); !errors.Is(err, source.ErrUnavailable) ||
		!strings.Contains(err.Error(), "connection reset; every batch delivered before is whole") ||
		!strings.Contains(err.Error(), "loader.load_state_dict(state)") {
		t.Errorf("a store fault: %v; want the store's error and how to resume", err)
	}
	for _, tc := range []struct {
		name string
		ds   pipeline.Dataset
		err  error
	}{
		{"cancelled", storeOf{url: "s3://bucket/train"}, context.Canceled},
		{"a local directory with a manifest", storeOf{url: "/data/train"}, late},
		{"not from a store", nil, late},
	} {
		if got := storeWait(tc.ds, tc.err); got != tc.err {
			t.Errorf("%s: %v, want %v as it was", tc.name, got, tc.err)
		}
	}
}
