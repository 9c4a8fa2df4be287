package bucket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/pipeline/source"
)

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
	p      source.Policy
	budget *retryBudget
	m      *source.StoreMetrics // nil: not counted
	store  string
}

func newRetrier(p source.Policy, m *source.Metrics, store string) *retrier {
	p = p.WithDefaults()
	return &retrier{p: p, budget: newRetryBudget(p.Budget), m: m.ForStore(store), store: store}
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
			t := time.NewTimer(r.p.Backoff(n))
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
		r.m.Observe(op, k.String(), time.Since(start), bytes)
		switch k {
		case kindOK:
			r.budget.refund(1)
			return nil
		case kindChanged:
			var ae *answerError
			if errors.As(err, &ae) {
				return fmt.Errorf("%s: %s: %w", r.store, clip(what, 256), ae) // without the provider's layers
			}
			if errors.Is(err, source.ErrChanged) {
				return err
			}
			return fmt.Errorf("%w: %s: %v", source.ErrChanged, what, err)
		case kindNotFound:
			if op == "get" {
				// A read names an object as it was listed or indexed:
				// gone since, it changed (Store.ReadRange), as a
				// directory's says too.
				return fmt.Errorf("%w: %s is gone: %s", source.ErrChanged, what, describe(err))
			}
			return fmt.Errorf("%s: %w: %s", what, source.ErrNotExist, describe(err))
		case kindDenied:
			return fmt.Errorf("%s: %w: %s", what, source.ErrDenied, describe(err))
		case kindInvalid:
			// Wrapped (an answer, never a context error): explainOpen reads
			// S3's region from it.
			return fmt.Errorf("%s: %w", what, described{err})
		case kindNoHost:
			return fmt.Errorf("%w: %s: %s: %w", source.ErrUnavailable, r.store, what, err)
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
			return fmt.Errorf("%w: %s: %s: gave up after %d tries; last: %v", source.ErrUnavailable, r.store, what, n, last)
		}
		if !r.budget.take(cost) {
			return fmt.Errorf("%w: %s: %s: retry budget spent (the store is failing most requests); last: %v", source.ErrUnavailable, r.store, what, last)
		}
		r.m.Retry(k.String())
	}
}
