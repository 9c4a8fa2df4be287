package source

// FetchStats is what a Fetcher has done and holds.
type FetchStats struct {
	// Ready and Waited count Reads answered by a read-ahead done and by
	// one in flight (waited for); Direct those read from the store then
	// (cache hits aside): no read-ahead, or a failed one. Failed counts
	// hinted ranges whose read-ahead failed.
	Ready, Waited, Failed, Direct int64
	// Requests counts read-ahead requests sent.
	Requests int64
	// Dropped counts hinted ranges not read ahead (too long, or too many
	// hints waiting), Expired those dropped unread after the unused age.
	Dropped, Expired int64
	// Held is the bytes read ahead (or being read) and not yet consumed;
	// Hinted the ranges waiting for a request.
	Held   int64
	Hinted int
}

// Stats returns the Fetcher's counters.
func (f *Fetcher) Stats() FetchStats {
	f.mu.Lock()
	held, hinted := f.held, f.nqueued
	f.mu.Unlock()
	return FetchStats{Ready: f.ready.Load(), Waited: f.waited.Load(), Failed: f.failed.Load(), Direct: f.direct.Load(),
		Requests: f.requests.Load(), Dropped: f.dropped.Load(), Expired: f.expired.Load(), Held: held, Hinted: hinted}
}

// groupList is an intrusive list of groups, oldest first.
type groupList struct{ head, tail *group }
