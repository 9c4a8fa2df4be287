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
)

// TestStoreDown: a batch fails (so its lease is tried again, and the job
// ends UNAVAILABLE after maxAttempts) only when every sample failed and
// the store was why; a batch with good samples, or whose samples are bad
// data, goes out as ever.
func TestStoreDown(t *testing.T) {
	down := fmt.Errorf("%w: s3://bucket: a/1.jpg: gave up after 6 tries; last: SlowDown", source.ErrUnavailable)
	corrupt := fmt.Errorf("%w: bad huffman code", pipeline.ErrCorrupt)
	for _, tc := range []struct {
		name string
		b    pipeline.Batch
		fail bool
	}{
		{"all failed, store down", pipeline.Batch{N: 0, Errors: []pipeline.SampleError{{Name: "a/1.jpg", Err: down}, {Name: "a/2.jpg", Err: down}}}, true},
		{"all failed, one store down", pipeline.Batch{N: 0, Errors: []pipeline.SampleError{{Name: "a/1.jpg", Err: corrupt}, {Name: "a/2.jpg", Err: down}}}, true},
		{"all failed, bad data", pipeline.Batch{N: 0, Errors: []pipeline.SampleError{{Name: "a/1.jpg", Err: corrupt}}}, false},
		{"some made", pipeline.Batch{N: 1, Errors: []pipeline.SampleError{{Name: "a/2.jpg", Err: down}}}, false},
		{"empty", pipeline.Batch{}, false},
	} {
		err := storeDown(&tc.b)
		if (err != nil) != tc.fail {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, source.ErrUnavailable) || codeOf(err) != codes.Unavailable || !strings.Contains(err.Error(), "s3://bucket") ||
			!strings.Contains(err.Error(), "SlowDown") {
			t.Errorf("%s: %v (code %v): want UNAVAILABLE naming the store and its last answer", tc.name, err, codeOf(err))
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
		!strings.Contains(err.Error(), "--store-timeout") || !strings.Contains(err.Error(), "--lease-timeout") {
		t.Errorf("a late lease on a bucket: %v; want the deadline, the store and the flags", err)
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
