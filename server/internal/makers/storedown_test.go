package makers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// storeOf is a dataset read from a store that only has a name.
type storeOf struct {
	dataset.Dataset
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
		ds   dataset.Dataset
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
