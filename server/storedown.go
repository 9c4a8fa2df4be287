package server

import (
	"errors"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// errStoreDown fails a batch every sample of which failed, at least one
// because the store did not answer (source.ErrUnavailable, after the
// store's own retries). Sent as a batch of N = 0 it would look like bad
// data and the job would go on forever against a store that is down;
// failed, its lease is tried again on a maker (the store may be back),
// and after maxAttempts the job ends with UNAVAILABLE naming the store and
// its last answer.
var errStoreDown = errors.New("every sample of the batch failed: the store did not answer")

// storeDown is errStoreDown, wrapping the store's error, when b (made)
// is such a batch; nil otherwise.
func storeDown(b *pipeline.Batch) error {
	if b.N != 0 || len(b.Errors) == 0 {
		return nil
	}
	for _, e := range b.Errors {
		if errors.Is(e.Err, source.ErrUnavailable) {
			return fmt.Errorf("%w: %s: %w", errStoreDown, e.Name, e.Err)
		}
	}
	return nil
}
