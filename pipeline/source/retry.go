package source

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
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

func (p Policy) withDefaults() Policy {
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
	p = p.withDefaults()
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

// backoff is the wait before try n (n >= 2).
func (p Policy) backoff(n int) time.Duration {
	ceil := p.BaseDelay << min(n-2, 30)
	if ceil <= 0 || ceil > p.MaxDelay {
		ceil = p.MaxDelay
	}
	return rand.N(ceil)
}

// retryBudget is the tokens retries draw on.
type retryBudget struct {
	mu     sync.Mutex
	tokens int
	max    int
}

func newRetryBudget(n int) *retryBudget { return &retryBudget{tokens: n, max: n} }

// take spends cost tokens, or says there are not enough.
func (b *retryBudget) take(cost int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < cost {
		return false
	}
	b.tokens -= cost
	return true
}

// refund gives n tokens back after a success.
func (b *retryBudget) refund(n int) {
	b.mu.Lock()
	b.tokens = min(b.max, b.tokens+n)
	b.mu.Unlock()
}

// retrier runs requests under a Policy and counts them.
type retrier struct {
	p      Policy
	budget *retryBudget
	m      *storeMetrics // nil: not counted
	store  string
}

func newRetrier(p Policy, m *Metrics, store string) *retrier {
	p = p.withDefaults()
	return &retrier{p: p, budget: newRetryBudget(p.Budget), m: m.forStore(store), store: store}
}

// do runs try until it succeeds, fails for good, or the policy gives up.
// Each try gets a context with the request deadline. op names the request
// kind in metrics; what names the object in messages. The error of a
// request that gave up wraps ErrUnavailable and says what the store
// answered last.
func (r *retrier) do(ctx context.Context, op, what string, try func(ctx context.Context) (int64, error)) error {
	var last error
	for n := 1; ; n++ {
		if n > 1 {
			t := time.NewTimer(r.p.backoff(n))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		tctx, cancel := context.WithTimeout(ctx, r.p.RequestTimeout)
		start := time.Now()
		bytes, err := try(tctx)
		timedOut := err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if err != nil && ctx.Err() != nil {
			return ctx.Err() // the caller gave up: neither the store's failure nor a retry
		}
		k := classify(err, timedOut)
		r.m.observe(op, k, time.Since(start), bytes)
		switch k {
		case kindOK:
			r.budget.refund(1)
			return nil
		case kindChanged:
			var ae *answerError
			if errors.As(err, &ae) {
				return fmt.Errorf("%s: %s: %w", r.store, clip(what, 256), ae) // without the provider's layers
			}
			if errors.Is(err, ErrChanged) {
				return err
			}
			return fmt.Errorf("%w: %s: %v", ErrChanged, what, err)
		case kindNotFound:
			if op == "get" {
				// A read names an object as it was listed or indexed:
				// gone since, it changed (Store.ReadRange), as a
				// directory's says too.
				return fmt.Errorf("%w: %s is gone: %s", ErrChanged, what, describe(err))
			}
			return fmt.Errorf("%s: %w: %s", what, ErrNotExist, describe(err))
		case kindDenied:
			return fmt.Errorf("%s: %w: %s", what, ErrDenied, describe(err))
		case kindInvalid:
			// Wrapped (an answer, never a context error): explainOpen reads
			// S3's region from it.
			return fmt.Errorf("%s: %w", what, described{err})
		case kindNoHost:
			return fmt.Errorf("%w: %s: %s: %w", ErrUnavailable, r.store, what, err)
		case kindProtocol:
			// Said without the provider's layers around it.
			var ae *answerError
			if errors.As(err, &ae) {
				err = ae
			}
			return fmt.Errorf("%s: %s: %w", r.store, clip(what, 256), err)
		}
		last = errors.New(describe(err))
		if timedOut {
			last = fmt.Errorf("no answer within %s: %w", r.p.RequestTimeout, err)
		}
		cost := r.p.RetryCost
		if timedOut {
			cost *= 2
		}
		if n >= r.p.Attempts {
			return fmt.Errorf("%w: %s: %s: gave up after %d tries; last: %v", ErrUnavailable, r.store, what, n, last)
		}
		if !r.budget.take(cost) {
			return fmt.Errorf("%w: %s: %s: retry budget spent (the store is failing most requests); last: %v", ErrUnavailable, r.store, what, last)
		}
		r.m.retry(k)
	}
}
