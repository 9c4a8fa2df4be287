package server

import (
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
