package source

import "time"

// Defaults of a Fetcher's options. At 30 ms a request (a store in another
// place), 128 requests in flight carry about 4,000 a second: 4,000 samples
// in a global shuffle, many more where adjacent ones coalesce.
const (
	DefaultReadAhead   = 256 << 20
	DefaultMaxInFlight = 128
	DefaultMaxGap      = 64 << 10
	DefaultMaxRequest  = 8 << 20
	DefaultUnusedAfter = time.Minute
	DefaultMaxHints    = 1 << 16
)

// FetchOption configures a Fetcher.
type FetchOption func(*fetchOptions)

type fetchOptions struct {
	cache          *Cache
	budget         *Budget
	maxInFlight    int
	maxGap, maxReq int64
	unused         time.Duration
	maxHints       int
}

// WithCache has the Fetcher read from and fill c (default: no cache).
func WithCache(c *Cache) FetchOption { return func(o *fetchOptions) { o.cache = c } }

// WithBudget has the Fetcher take its read-ahead bytes from b, which other
// Fetchers may share (default: a Budget of its own of DefaultReadAhead
// bytes).
func WithBudget(b *Budget) FetchOption { return func(o *fetchOptions) { o.budget = b } }

// WithMaxInFlight bounds the Fetcher's read-ahead requests in flight
// (default DefaultMaxInFlight).
func WithMaxInFlight(n int) FetchOption { return func(o *fetchOptions) { o.maxInFlight = n } }

// WithCoalesce sets how hinted ranges of one object are read as one
// request: when at most maxGap bytes apart, up to maxRequest bytes a
// request (defaults DefaultMaxGap, DefaultMaxRequest; maxRequest is at
// most the budget). A hinted range longer than maxRequest is not read
// ahead.
func WithCoalesce(maxGap, maxRequest int64) FetchOption {
	return func(o *fetchOptions) { o.maxGap, o.maxReq = maxGap, maxRequest }
}

// WithUnusedAfter sets how long bytes read ahead may go unread, and a
// hint not started may wait, before they are dropped (default
// DefaultUnusedAfter).
func WithUnusedAfter(d time.Duration) FetchOption { return func(o *fetchOptions) { o.unused = d } }

// WithMaxHints bounds the hinted ranges waiting for a request (default
// DefaultMaxHints); hints past it are dropped.
func WithMaxHints(n int) FetchOption { return func(o *fetchOptions) { o.maxHints = n } }
