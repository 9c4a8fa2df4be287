package makers

import (
	"context"
	"errors"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// storeWait names the store a lease's samples are read from when the lease
// ran out of time (err wraps context.DeadlineExceeded) on a dataset in
// object storage. A store that holds requests, answering nothing, fails a
// read only after --store-timeout × --store-attempts, longer by default
// than --lease-timeout: the lease's deadline comes first, again and again,
// and without this the job would end with a bare "context deadline
// exceeded" that says nothing of the store or what to do. err otherwise.
func storeWait(ds dataset.Dataset, err error) error {
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
		"keep that under --lease-timeout for its own error to reach the trainer)%s", err, url, resumeHint)
}

// resumeHint ends the error of a batch that failed by its store's fault:
// the job that ends with it lost nothing, and the trainer can go on from
// where it stopped once the store is back.
const resumeHint = "; every batch delivered before is whole (nothing was padded for the store's failure): once the store answers, " +
	"resume the epoch where it stopped (Python: loader.load_state_dict(state), with the state_dict() taken before the error; " +
	"Go: client.WithResume)"

// storeErr is err, a batch's failure, with resumeHint when its store was
// at fault (source.IsStoreFault) or gave no answer in time (storeWait).
func storeErr(ds dataset.Dataset, err error) error {
	if source.IsStoreFault(err) {
		return fmt.Errorf("%w%s", err, resumeHint)
	}
	return storeWait(ds, err)
}
