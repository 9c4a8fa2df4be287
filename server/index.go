package server

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/server/internal/limits"
)

// decoderIndex is the local executor's decoder index (index.Index):
// bounded by Config.IndexBudget, loaded from and saved to Config.IndexDir.
type decoderIndex struct {
	ix   *index.Index
	path string // "" without IndexDir
	fp   string
	log  *slog.Logger
}

// openIndex makes the executor's decoder index, loaded from IndexDir when
// that holds one for these datasets; nil when IndexBudget is negative. A
// file that does not check (corrupt, truncated, too large, another
// version, other data) is ignored with a warning: the index starts cold.
// A loaded file's checkpoints are only believed once a decode confirms
// them (index.Index.Load); one whose entries disagree with their JPEGs
// is dropped whole, with a warning.
func openIndex(cfg Config, datasets map[string]dataset.Dataset, log *slog.Logger, reg prometheus.Registerer) (*decoderIndex, error) {
	budget := cfg.IndexBudget
	if budget < 0 {
		return nil, nil
	}
	if budget == 0 {
		budget = cfg.MemoryBudget / 16
	}
	d := &decoderIndex{ix: index.New(budget), log: log}
	d.ix.OnFileDropped(func(name string, entries int, reason string) {
		log.Warn("decoder index file dropped: it disagrees with the data", "path", name, "entries", entries, "reason", reason)
	})
	if cfg.IndexDir != "" {
		if err := os.MkdirAll(cfg.IndexDir, 0o755); err != nil {
			return nil, fmt.Errorf("--index-dir: %w", err)
		}
		var all []dataset.Dataset
		for _, ds := range datasets {
			all = append(all, ds)
		}
		d.fp = pipeline.IndexFingerprint(all...)
		d.path = index.Path(cfg.IndexDir, d.fp)
		t0 := time.Now()
		n, err := d.ix.LoadFile(d.path, d.fp)
		if err != nil {
			log.Warn("decoder index file ignored: starting cold", "path", d.path, "err", err)
		} else if n > 0 {
			st := d.ix.Stats()
			log.Info("decoder index loaded", "path", d.path, "files", n, "bytes", st.Bytes, "took", time.Since(t0).Round(time.Millisecond))
		}
	}
	if err := registerIndexMetrics(reg, d.ix); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return d, nil
}

// save writes the index to IndexDir, if there is one.
func (d *decoderIndex) save() {
	if d == nil || d.path == "" {
		return
	}
	t0 := time.Now()
	if err := d.ix.SaveFile(d.path, d.fp); err != nil {
		d.log.Warn("decoder index not saved", "path", d.path, "err", err)
		return
	}
	st := d.ix.Stats()
	d.log.Info("decoder index saved", "path", d.path, "files", st.Entries, "bytes", st.Bytes, "took", time.Since(t0).Round(time.Millisecond))
}

func registerIndexMetrics(reg prometheus.Registerer, ix *index.Index) error {
	stat := func(f func(index.Stats) float64) func() float64 {
		return func() float64 { return f(ix.Stats()) }
	}
	return registerAll(reg, []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_index_bytes", Help: "Memory held by the decoder index (--index-budget)."},
			stat(func(s index.Stats) float64 { return float64(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_index_files", Help: "Files the decoder index holds checkpoints of."},
			stat(func(s index.Stats) float64 { return float64(s.Entries) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_index_hits_total", Help: "Baseline JPEG decodes that found their file's decoder index."},
			stat(func(s index.Stats) float64 { return float64(s.Hits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_index_misses_total", Help: "Baseline JPEG decodes that found none (first decodes, evicted files)."},
			stat(func(s index.Stats) float64 { return float64(s.Misses) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_index_evictions_total", Help: "Decoder indexes dropped to stay within --index-budget."},
			stat(func(s index.Stats) float64 { return float64(s.Evicted) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_index_mcus_decoded_total", Help: "MCUs entropy-decoded by decodes with the index (see stoker_index_mcus_total)."},
			stat(func(s index.Stats) float64 { return float64(s.MCUsDecoded) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_index_mcus_total", Help: "MCUs in the scans of decodes with the index."},
			stat(func(s index.Stats) float64 { return float64(s.MCUsTotal) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_index_bad_total", Help: "Decoder indexes dropped because they did not fit their JPEG or disagreed with it (the sample decoded right regardless)."},
			stat(func(s index.Stats) float64 { return float64(s.Bad + s.Stale) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_index_files_dropped_total", Help: "Decoder index files (--index-dir) not used: refused at load, or dropped whole when an entry disagreed with its JPEG."},
			stat(func(s index.Stats) float64 { return float64(s.FilesDropped) })),
	})
}

func registerCoefMetrics(reg prometheus.Registerer, c *codec.CoefCache) error {
	stat := func(f func(codec.CoefStats) float64) func() float64 {
		return func() float64 { return f(c.Stats()) }
	}
	return registerAll(reg, []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_coef_cache_bytes", Help: "Memory held by the coefficient cache (--coef-budget)."},
			stat(func(s codec.CoefStats) float64 { return float64(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_coef_cache_files", Help: "Files the coefficient cache holds coefficients of."},
			stat(func(s codec.CoefStats) float64 { return float64(s.Entries) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_coef_cache_mcus_total", Help: "MCUs inverse-transformed by decodes with the coefficient cache."},
			stat(func(s codec.CoefStats) float64 { return float64(s.MCUsWanted) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_coef_cache_mcus_hit_total", Help: "Of those, MCUs whose coefficients were copied from the cache (not entropy-decoded)."},
			stat(func(s codec.CoefStats) float64 { return float64(s.MCUsHit) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_coef_cache_refused_total", Help: "Decodes of files not admitted to the coefficient cache: --coef-budget was spent."},
			stat(func(s codec.CoefStats) float64 { return float64(s.Refused) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_coef_cache_transcoded_files", Help: "Progressive JPEGs the coefficient cache holds as their lossless sequential transcode (decoded through the fast path from then on)."},
			stat(func(s codec.CoefStats) float64 { return float64(s.TranscodedFiles) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_coef_cache_transcoded_bytes", Help: "Memory of those transcodes (part of stoker_coef_cache_bytes)."},
			stat(func(s codec.CoefStats) float64 { return float64(s.TranscodedBytes) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_coef_cache_transcode_hits_total", Help: "Decodes of progressive JPEGs made from their transcode."},
			stat(func(s codec.CoefStats) float64 { return float64(s.TranscodeHits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_coef_cache_transcode_fallbacks_total", Help: "Progressive JPEGs not transcoded (the transcode failed, or their coefficients are not all coded to full precision, or it was over its bound or the budget): decoded as progressive."},
			stat(func(s codec.CoefStats) float64 { return float64(s.TranscodeFallbacks) })),
	})
}

// DefaultPartnerBudget is the partner cache a server with workers decode
// goroutines has on this machine by default (limits.DefaultPartnerBudget).
func DefaultPartnerBudget(workers int) int64 { return limits.DefaultPartnerBudget(workers) }

func registerPartnerMetrics(reg prometheus.Registerer, c *cv.PartnerCache) error {
	stat := func(f func(cv.PartnerStats) float64) func() float64 {
		return func() float64 { return f(c.Stats()) }
	}
	return registerAll(reg, []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_partner_cache_bytes", Help: "Memory held by the partner cache (--partner-budget): the images the YOLO family's multi-image ops load_image'd."},
			stat(func(s cv.PartnerStats) float64 { return float64(s.Bytes) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_partner_cache_hits_total", Help: "Images a multi-image op took from the partner cache (not decoded)."},
			stat(func(s cv.PartnerStats) float64 { return float64(s.Hits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_partner_cache_misses_total", Help: "Images a multi-image op decoded (not in the partner cache)."},
			stat(func(s cv.PartnerStats) float64 { return float64(s.Misses) })),
	})
}

// registerAll registers cs on reg, stopping at the first error.
func registerAll(reg prometheus.Registerer, cs []prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
