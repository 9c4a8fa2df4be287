package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// TestRemoteMemory: a server with a dataset in object storage gives the
// byte cache 1/8 and the read-ahead 1/16 of its memory budget, one of
// local datasets none; a coefficient cache that would leave batches less
// than half is refused, saying why.
func TestRemoteMemory(t *testing.T) {
	local := Config{Datasets: map[string]string{"a": "/data/a"}, MemoryBudget: 1 << 30}
	remote := Config{Datasets: map[string]string{"a": "/data/a", "b": "s3://bucket/b"}, MemoryBudget: 1 << 30}
	if c, r := remoteMemory(local); c != 0 || r != 0 {
		t.Errorf("local datasets: byte cache %d, read-ahead %d; want none", c, r)
	}
	if c, r := remoteMemory(remote); c != 1<<27 || r != 1<<26 {
		t.Errorf("a remote dataset: byte cache %d, read-ahead %d; want 1/8 and 1/16", c, r)
	}
	local.Workers, remote.Workers = 1, 1
	if err := checkRemoteMemory(remote.withDefaults()); err != nil {
		t.Errorf("a remote dataset, the default coefficient cache: %v", err)
	}
	local.CoefBudget, remote.CoefBudget = 1<<29-1<<27, 1<<29-1<<27
	if err := checkRemoteMemory(local.withDefaults()); err != nil {
		t.Errorf("local datasets, coef budget %d: %v", local.CoefBudget, err)
	}
	err := checkRemoteMemory(remote.withDefaults())
	if err == nil || !strings.Contains(err.Error(), "batches need the rest") || !strings.Contains(err.Error(), "byte cache") {
		t.Errorf("a remote dataset, coef budget %d: %v; want a refusal naming the byte cache", remote.CoefBudget, err)
	}
}

// TestRemoteReads: the Fetchers of a server's remote datasets share its
// byte cache (memory and --cache-dir) and its read-ahead budget; their
// counters are exported; closing them ends their read-ahead.
func TestRemoteReads(t *testing.T) {
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "shard.tar"), []byte(strings.Repeat("0123456789", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	cfg := Config{Datasets: map[string]string{"b": "s3://bucket/b"}, MemoryBudget: 1 << 30, CacheDir: cacheDir, CacheBudget: 1 << 20,
		CacheKeyFile: filepath.Join(t.TempDir(), "key")}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := newRemoteReads(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if r.budget.Limit() != 1<<26 {
		t.Errorf("read-ahead budget %d, want 1/16 of the memory budget", r.budget.Limit())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newRemoteCollector(r))
	st, err := source.Open(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := r.ranges(st).(source.Direct); !ok {
		t.Errorf("a local directory's datasets read through %T, want source.Direct", r.ranges(st))
	}
	if _, ok := (*remoteReads)(nil).ranges(st).(source.Direct); !ok {
		t.Error("without remote datasets, not source.Direct")
	}
	f1, f2 := r.fetcher(st), r.fetcher(st)
	var obj source.Object
	st.List(context.Background(), "", func(o source.Object) error { obj = o; return nil })
	rg := source.Range{Obj: obj, Off: 10, Len: 100}
	f1.Prefetch([]source.Range{rg})
	if _, err := f1.Read(context.Background(), rg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f2.Read(context.Background(), rg, nil); err != nil { // the same range: from the shared cache
		t.Fatal(err)
	}
	r.close()
	cs, fs := r.stats()
	if cs.MemoryHits != 1 || cs.DiskRanges != 1 || fs.Ready+fs.Waited+fs.Direct != 1 || fs.Held != 0 {
		t.Errorf("cache %+v, fetchers %+v: want 1 memory hit, 1 range on disk, 1 read from the store, nothing held", cs, fs)
	}
	if got := valueOf(t, reg, "stoker_byte_cache_ranges", "disk"); got != 1 {
		t.Errorf("stoker_byte_cache_ranges{tier=disk} %v, want 1", got)
	}
	if _, err := os.Stat(cacheDir); err != nil {
		t.Errorf("--cache-dir not made: %v", err)
	}
	// No remote dataset: nothing made, and the metrics read zero.
	cfg.Datasets = map[string]string{"a": data}
	if r, err := newRemoteReads(cfg, log); r != nil || err != nil {
		t.Errorf("local datasets only: %v, %v; want nil", r, err)
	}
	reg = prometheus.NewRegistry()
	reg.MustRegister(newRemoteCollector(nil))
	if n, err := testutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Errorf("metrics of a server without remote datasets: %d series, %v", n, err)
	}
}

// valueOf is the value of the series name{tier=tier} gathered from reg.
func valueOf(t *testing.T, reg *prometheus.Registry, name, tier string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == name && l.GetName() == "tier" && l.GetValue() == tier {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{tier=%q}", name, tier)
	return 0
}

// TestCoefCacheDefault: the coefficient cache is on by default, a quarter
// of the memory budget, on a server that decodes and whose budget makes it
// worth having; a budget given is kept, a negative one is none.
func TestCoefCacheDefault(t *testing.T) {
	for _, c := range []struct {
		budget, memory int64
		workers        int
		want           int64
	}{
		{0, 8 << 30, 2, 2 << 30},
		{0, 256 << 20, 2, 64 << 20},
		{0, 255 << 20, 2, 0}, // a quarter under MinDefaultCoefBudget
		{0, 8 << 30, 0, 0},   // a coordinator that does not decode
		{-1, 8 << 30, 2, 0},  // none, asked for
		{1000, 8 << 30, 2, 1000},
		{1000, 8 << 30, 0, 1000}, // given: kept (and unused without workers)
	} {
		cfg := Config{CoefBudget: c.budget, MemoryBudget: c.memory, Workers: c.workers}.withDefaults()
		if cfg.coefCache != c.want {
			t.Errorf("coef budget %d, memory budget %d, %d workers: a cache of %d bytes, want %d", c.budget, c.memory, c.workers, cfg.coefCache, c.want)
		}
	}
}

// TestPartnerCacheDefault: the partner cache is on by default, a
// sixteenth of the memory budget, on a server that decodes and whose
// budget makes it worth having; a budget given is kept, a negative one is
// none; it is taken out of the batches' budget.
func TestPartnerCacheDefault(t *testing.T) {
	for _, c := range []struct {
		budget, memory int64
		workers        int
		want           int64
	}{
		{0, 8 << 30, 2, 512 << 20},
		{0, 1 << 30, 2, 64 << 20},
		{0, 1<<30 - 16, 2, 0}, // a sixteenth under MinDefaultPartnerBudget
		{0, 8 << 30, 0, 0},    // a coordinator that does not decode
		{-1, 8 << 30, 2, 0},   // none, asked for
		{1000, 8 << 30, 2, 1000},
	} {
		cfg := Config{PartnerBudget: c.budget, MemoryBudget: c.memory, Workers: c.workers}.withDefaults()
		if cfg.partnerCache != c.want {
			t.Errorf("partner budget %d, memory budget %d, %d workers: a cache of %d bytes, want %d", c.budget, c.memory, c.workers, cfg.partnerCache, c.want)
		}
	}
	cfg := Config{Datasets: map[string]string{"a": "/data/a"}, MemoryBudget: 1 << 30, CoefBudget: 1 << 28, PartnerBudget: 1<<28 + 1}.withDefaults()
	if err := checkRemoteMemory(cfg); err == nil || !strings.Contains(err.Error(), "partner budget") {
		t.Errorf("coef and partner caches over half of the memory budget: %v; want a refusal naming the partner budget", err)
	}
}
