package source

import (
	"math/rand/v2"
	"time"
)

// Policy is how a remote store retries: each request has a deadline, is
// tried at most Attempts times with exponential backoff and full jitter
// between tries (AWS's "exponential backoff and jitter"), and retries
// draw on a budget shared by every request of the store, so that a store
// that fails everything is not hammered with Attempts times the load: once
// the budget is spent, a failure is final at its first try until
// successes refill it (aws-sdk-go-v2's retry.NewStandard does the same).
type Policy struct {
	// Attempts is the most tries per request, >= 1 (default 6).
	Attempts int
	// BaseDelay and MaxDelay bound the backoff: before try n (n >= 2) the
	// wait is uniform in [0, min(MaxDelay, BaseDelay·2^(n-2))) (defaults
	// 100 ms, 5 s).
	BaseDelay, MaxDelay time.Duration
	// RequestTimeout is one try's deadline, from sending the request to
	// its last byte read (default 30 s): a stalled transfer fails at it
	// and is retried.
	RequestTimeout time.Duration
	// Budget is the retry budget in tokens (default 500); a retry costs
	// RetryCost (default 5), one after a timeout twice that, and a success
	// gives one back, up to Budget.
	Budget, RetryCost int
}

// DefaultPolicy is the policy of a store opened without WithPolicy.
func DefaultPolicy() Policy {
	return Policy{Attempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second,
		RequestTimeout: 30 * time.Second, Budget: 500, RetryCost: 5}
}

// WithDefaults is p with each field that is not set (zero or less) at
// DefaultPolicy's.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.Attempts < 1 {
		p.Attempts = d.Attempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = d.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = d.MaxDelay
	}
	if p.RequestTimeout <= 0 {
		p.RequestTimeout = d.RequestTimeout
	}
	if p.Budget <= 0 {
		p.Budget = d.Budget
	}
	if p.RetryCost <= 0 {
		p.RetryCost = d.RetryCost
	}
	return p
}

// MaxWait is the longest one request can take to fail when every try
// stalls until its deadline: Attempts·RequestTimeout plus the longest
// backoffs, sum over n = 2..Attempts of min(MaxDelay, BaseDelay·2^(n-2)).
// DefaultPolicy's: 6·30 s + 3.1 s = 3m3.1s. (Once the retry budget is
// spent, a request fails at its first try: RequestTimeout.)
func (p Policy) MaxWait() time.Duration {
	p = p.WithDefaults()
	w := time.Duration(p.Attempts) * p.RequestTimeout
	for n := 2; n <= p.Attempts; n++ {
		ceil := p.BaseDelay << min(n-2, 30)
		if ceil <= 0 || ceil > p.MaxDelay {
			ceil = p.MaxDelay
		}
		w += ceil
	}
	return w
}

// Backoff is the wait before try n (n >= 2): uniform in [0, min(MaxDelay,
// BaseDelay·2^(n-2))).
func (p Policy) Backoff(n int) time.Duration {
	ceil := p.BaseDelay << min(n-2, 30)
	if ceil <= 0 || ceil > p.MaxDelay {
		ceil = p.MaxDelay
	}
	return rand.N(ceil)
}
