package server

import (
	"context"
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

// storeWait names the store a lease's samples are read from when the lease
// ran out of time (err wraps context.DeadlineExceeded) on a dataset in
// object storage. A store that holds requests, answering nothing, fails a
// read only after --store-timeout × --store-attempts, longer by default
// than --lease-timeout: the lease's deadline comes first, again and again,
// and without this the job would end with a bare "context deadline
// exceeded" that says nothing of the store or what to do. err otherwise.
func storeWait(ds pipeline.Dataset, err error) error {
	sd, ok := ds.(interface{ Store() source.Store })
	if !ok || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	url := sd.Store().String()
	if !source.IsRemote(url) {
		return err
	}
	return fmt.Errorf("%w: the batch's samples are read from %s, which gave no answer in time or is slow: "+
		"is it up and reachable? (a store that holds requests fails a read only after --store-timeout × --store-attempts; "+
		"keep that under --lease-timeout for its own error to reach the trainer)", err, url)
}
