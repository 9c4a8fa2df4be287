package source

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts the requests of remote stores, labelled by store (its
// URL without a prefix's path: scheme://bucket).
type Metrics struct {
	requests  *prometheus.CounterVec   // store, op, outcome
	retries   *prometheus.CounterVec   // store, reason
	throttles *prometheus.CounterVec   // store
	bytes     *prometheus.CounterVec   // store
	seconds   *prometheus.HistogramVec // store, op
}

// NewMetrics registers the store metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_store_requests_total",
			Help: "Requests to object stores, by store, operation (get, list, head, put) and outcome (ok, throttled, error, timeout, changed, not_found, denied, invalid, no_host, protocol).",
		}, []string{"store", "op", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_store_retries_total",
			Help: "Requests to object stores tried again, by store and the previous try's outcome (throttled, error, timeout).",
		}, []string{"store", "reason"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_store_throttles_total",
			Help: "Requests an object store answered with slow down (503 SlowDown, 429), by store.",
		}, []string{"store"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_store_bytes_total",
			Help: "Bytes read from object stores, by store.",
		}, []string{"store"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stoker_store_request_seconds",
			Help:    "Time of one try of a request to an object store, to its last byte, by store and operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"store", "op"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.retries, m.throttles, m.bytes, m.seconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// StoreMetrics is one store's share of Metrics; nil counts nothing.
type StoreMetrics struct {
	m     *Metrics
	store string
}

// ForStore is the share of m of the store named store (scheme://bucket);
// nil when m is.
func (m *Metrics) ForStore(store string) *StoreMetrics {
	if m == nil {
		return nil
	}
	return &StoreMetrics{m: m, store: store}
}

// Observe counts one try of a request: its operation (get, list, head,
// put), its outcome (the outcome label: ok, throttled, error, ...), how
// long it took and the bytes it read.
func (s *StoreMetrics) Observe(op, outcome string, d time.Duration, bytes int64) {
	if s == nil {
		return
	}
	s.m.requests.WithLabelValues(s.store, op, outcome).Inc()
	s.m.seconds.WithLabelValues(s.store, op).Observe(d.Seconds())
	if bytes > 0 {
		s.m.bytes.WithLabelValues(s.store).Add(float64(bytes))
	}
	if outcome == OutcomeThrottled {
		s.m.throttles.WithLabelValues(s.store).Inc()
	}
}

// Retry counts a request tried again after a try whose outcome was
// reason.
func (s *StoreMetrics) Retry(reason string) {
	if s == nil {
		return
	}
	s.m.retries.WithLabelValues(s.store, reason).Inc()
}

// OutcomeThrottled is the outcome of a try the store answered with slow
// down, which Observe counts in stoker_store_throttles_total as well.
const OutcomeThrottled = "throttled"
