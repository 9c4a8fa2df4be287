package server

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// The shares of MemoryBudget that a server with a dataset in object
// storage gives its byte cache's memory tier and its read-ahead, before
// batches get theirs. A server of local datasets only gives none.
const (
	byteCacheShare = 8  // 1/8 of MemoryBudget
	readAheadShare = 16 // 1/16
)

// remoteMemory is what MemoryBudget gives the byte cache and the
// read-ahead: nothing without a remote dataset.
func remoteMemory(cfg Config) (cache, readAhead int64) {
	for _, path := range cfg.Datasets {
		if source.IsRemote(path) {
			return cfg.MemoryBudget / byteCacheShare, cfg.MemoryBudget / readAheadShare
		}
	}
	return 0, 0
}

// remoteReads is what the server's datasets in object storage read their
// samples through: one Fetcher per dataset (a Fetcher reads one store,
// and each dataset is its own store), all sharing one byte Cache and one
// read-ahead Budget, so that together they hold one share of
// --memory-budget however many datasets there are, and each dataset's
// requests in flight are bounded apart (a slow store does not hold up
// another's read-ahead).
type remoteReads struct {
	cache  *source.Cache
	budget *source.Budget

	mu       sync.Mutex
	fetchers []*source.Fetcher
}

// newRemoteReads makes the byte cache (memory, and CacheDir's disk tier)
// and the read-ahead budget; nil when no dataset is remote.
func newRemoteReads(cfg Config, log *slog.Logger) (*remoteReads, error) {
	mem, ahead := remoteMemory(cfg)
	if mem == 0 && ahead == 0 {
		if cfg.CacheDir != "" {
			log.Warn("--cache-dir is unused: no dataset is in object storage", "cache_dir", cfg.CacheDir)
		}
		return nil, nil
	}
	opts := []source.CacheOption{source.WithMemory(mem)}
	if cfg.CacheDir != "" {
		key, err := cacheKey(cfg, log)
		if err != nil {
			return nil, err
		}
		opts = append(opts, source.WithDisk(cfg.CacheDir, cfg.CacheBudget))
		if key != nil {
			opts = append(opts, source.WithDiskKey(key))
		}
	}
	c, err := source.NewCache(opts...)
	if err != nil {
		return nil, err
	}
	st := c.Stats()
	log.Info("byte cache", "memory", mem, "read_ahead", ahead, "cache_dir", cfg.CacheDir,
		"disk_budget", cfg.CacheBudget, "disk_bytes", st.DiskBytes, "disk_ranges", st.DiskRanges)
	return &remoteReads{cache: c, budget: source.NewBudget(ahead)}, nil
}

// cacheKey is the key --cache-dir's entries are proven with: the
// --cache-key-file's (an error when it cannot be read or made), else the
// default file's, else nil (a key of this process alone), said in the
// log: entries of an earlier run are then read from the store again.
func cacheKey(cfg Config, log *slog.Logger) ([]byte, error) {
	if cfg.CacheKeyFile != "" {
		key, err := source.LoadCacheKey(cfg.CacheKeyFile, cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("--cache-key-file: %w", err)
		}
		return key, nil
	}
	file, err := source.DefaultCacheKeyFile()
	if err == nil {
		var key []byte
		if key, err = source.LoadCacheKey(file, cfg.CacheDir); err == nil {
			return key, nil
		}
	}
	log.Warn("no key file for --cache-dir's entries: a key of this process proves them, so an earlier run's are read from the store again "+
		"(give --cache-key-file, a file outside --cache-dir that only this user can read)", "err", err)
	return nil, nil
}

// ranges is what a dataset opened on st reads its samples through
// (dataset.WithRanges takes it): a Fetcher for a store in object storage,
// sharing the server's byte cache and read-ahead budget; Direct for a
// local directory (one with a manifest), whose cache is the kernel's page
// cache and whose reads need no read-ahead. r may be nil (no remote
// dataset).
func (r *remoteReads) ranges(st source.Store) source.Ranges {
	if r == nil || !source.IsRemote(st.String()) {
		return source.Direct{Store: st}
	}
	return r.fetcher(st)
}

// fetcher returns a new Fetcher over st, for one remote dataset: what
// its constructor reads samples through (as a source.Ranges), closed with
// the server.
func (r *remoteReads) fetcher(st source.Store) *source.Fetcher {
	f := source.NewFetcher(st, source.WithCache(r.cache), source.WithBudget(r.budget))
	r.mu.Lock()
	r.fetchers = append(r.fetchers, f)
	r.mu.Unlock()
	return f
}

// close stops the Fetchers' read-ahead; before the datasets' stores close.
func (r *remoteReads) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	fs := r.fetchers // kept: their counters stay
	r.mu.Unlock()
	for _, f := range fs {
		f.Close()
	}
}

// stats sums the Fetchers' counters.
func (r *remoteReads) stats() (source.CacheStats, source.FetchStats) {
	if r == nil {
		return source.CacheStats{}, source.FetchStats{}
	}
	var fs source.FetchStats
	r.mu.Lock()
	for _, f := range r.fetchers {
		s := f.Stats()
		fs.Ready += s.Ready
		fs.Waited += s.Waited
		fs.Direct += s.Direct
		fs.Failed += s.Failed
		fs.Requests += s.Requests
		fs.Dropped += s.Dropped
		fs.Expired += s.Expired
		fs.Held += s.Held
	}
	r.mu.Unlock()
	return r.cache.Stats(), fs
}

// remoteCollector exports the byte cache's and the read-ahead's counters
// (zero on a server with no remote dataset: the series exist either way).
type remoteCollector struct {
	r                                    *remoteReads
	hits, misses, bytes, ranges, refused *prometheus.Desc
	evictions, forged                    *prometheus.Desc
	aheadBytes, aheadReads               *prometheus.Desc
	aheadRequests, aheadDropped          *prometheus.Desc
}

func newRemoteCollector(r *remoteReads) *remoteCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &remoteCollector{r: r,
		hits:          d("stoker_byte_cache_hits_total", "Reads of remote datasets' samples answered by the byte cache, by tier (memory, disk).", "tier"),
		misses:        d("stoker_byte_cache_misses_total", "Reads of remote datasets' samples the byte cache did not answer (read ahead or read from the store)."),
		bytes:         d("stoker_byte_cache_bytes", "Bytes the byte cache holds, by tier (memory: within --memory-budget; disk: within --cache-budget).", "tier"),
		ranges:        d("stoker_byte_cache_ranges", "Sample ranges the byte cache holds, by tier.", "tier"),
		refused:       d("stoker_byte_cache_refused_total", "Ranges read from a store and not admitted to a tier: it was full (admitted while there is room, then kept).", "tier"),
		evictions:     d("stoker_byte_cache_evictions_total", "Disk-tier entries removed: found damaged (or written under another key) when read, or over --cache-budget at start."),
		forged:        d("stoker_byte_cache_forged_total", "Disk-tier entries whose MAC under the cache key was wrong when read (changed on disk since written: damaged, or forged by someone who can write --cache-dir): removed, their ranges read from the store again."),
		aheadBytes:    d("stoker_read_ahead_bytes", "Bytes read ahead (or being read) for remote datasets and not yet consumed."),
		aheadReads:    d("stoker_read_ahead_reads_total", "Reads of remote datasets' samples not answered by the byte cache, by outcome: ready (read ahead), waited (its read-ahead was in flight), missed (none: read from the store then).", "outcome"),
		aheadRequests: d("stoker_read_ahead_requests_total", "Read-ahead requests sent to stores (coalesced: one may carry many samples)."),
		aheadDropped:  d("stoker_read_ahead_dropped_total", "Samples hinted and not read ahead, by reason: full (too many hints waiting, or longer than a request), expired (unread too long), failed (the request failed; read again directly).", "reason"),
	}
}

func (c *remoteCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.misses, c.bytes, c.ranges, c.refused, c.evictions, c.forged,
		c.aheadBytes, c.aheadReads, c.aheadRequests, c.aheadDropped} {
		ch <- d
	}
}

func (c *remoteCollector) Collect(ch chan<- prometheus.Metric) {
	cs, fs := c.r.stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter(c.hits, cs.MemoryHits, "memory")
	counter(c.hits, cs.DiskHits, "disk")
	counter(c.misses, cs.Misses)
	gauge(c.bytes, cs.MemoryBytes, "memory")
	gauge(c.bytes, cs.DiskBytes, "disk")
	gauge(c.ranges, cs.MemoryRanges, "memory")
	gauge(c.ranges, cs.DiskRanges, "disk")
	counter(c.refused, cs.MemoryRefused, "memory")
	counter(c.refused, cs.DiskRefused, "disk")
	counter(c.evictions, cs.DiskEvictions)
	counter(c.forged, cs.DiskForged)
	gauge(c.aheadBytes, fs.Held)
	counter(c.aheadReads, fs.Ready, "ready")
	counter(c.aheadReads, fs.Waited, "waited")
	counter(c.aheadReads, fs.Direct, "missed")
	counter(c.aheadRequests, fs.Requests)
	counter(c.aheadDropped, fs.Dropped, "full")
	counter(c.aheadDropped, fs.Expired, "expired")
	counter(c.aheadDropped, fs.Failed, "failed")
}

// checkRemoteMemory refuses a configuration whose coefficient cache,
// partner cache, byte cache and read-ahead leave batches less than half of
// MemoryBudget.
func checkRemoteMemory(cfg Config) error {
	cache, ahead := remoteMemory(cfg)
	if taken := cfg.coefCache + cfg.partnerCache + cache + ahead; taken > cfg.MemoryBudget/2 {
		return fmt.Errorf("coef budget %d, partner budget %d and, for datasets in object storage, the byte cache (%d: 1/%d of --memory-budget) and read-ahead (%d: 1/%d) take %d bytes, more than half of the memory budget %d: batches need the rest (lower --coef-budget or --partner-budget, or raise --memory-budget)",
			cfg.coefCache, cfg.partnerCache, cache, byteCacheShare, ahead, readAheadShare, taken, cfg.MemoryBudget)
	}
	return nil
}
