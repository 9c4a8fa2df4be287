package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stoker-dev/stoker/internal/progress"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/source"
	_ "github.com/stoker-dev/stoker/pipeline/source/bucket" // source.Open reaches s3://, gs:// and azblob://
	"github.com/stoker-dev/stoker/server/internal/job"
)

// openDataset opens Config.Datasets[name]: a local path, or an
// object-storage URL read through a store whose requests are counted in
// m, from its manifest (Config.Manifests[name], else the one beside the
// data) when it has one, its samples read through ranges(store) (the
// server's byte cache and read-ahead: remoteReads.ranges). An open that
// fails (a missing bucket, refused credentials, a manifest that does not
// check) names the URL and the store's answer; serve exits with it. A
// long listing or scan logs its progress.
//
// A listing (and the index built from it) may hold listBytes of memory,
// counted as it grows: past it the open fails, naming the size and
// suggesting a manifest made by `stoker index`. An annotations file's
// parse may take annBytes at its peak: a COCO file whose size predicts
// more (dataset.COCOParseFactor) is refused before it is read.
func openDataset(ctx context.Context, cfg Config, name string, m *source.Metrics, ranges func(source.Store) source.Ranges,
	listBytes, annBytes int64, log *slog.Logger) (dataset.Dataset, error) {
	log = log.With("dataset", name)
	// A start without a manifest lists the dataset and reads its shards:
	// minutes for a large one, said every few seconds with the rate and
	// an ETA (nothing for a quick one; the open's own line says how long).
	pr := progress.NewLog(log, "opening dataset")
	defer pr.Done()
	opts := []dataset.SourceOption{
		dataset.WithStoreOptions(source.WithMetrics(m), source.WithPolicy(cfg.storePolicy())),
		dataset.WithRanges(ranges),
		dataset.WithLog(log),
		dataset.WithIndexOptions(dataset.IndexOptions{Progress: func(p dataset.IndexProgress) { pr.Report(p.Update()) },
			MaxBytes: listBytes,
			OverHint: fmt.Sprintf("the share of --memory-budget (%d) a listing may take; index it once with `stoker index %s` "+
				"(or `--out FILE` for a read-only bucket, then serve with --manifest %s=FILE): a server that opens a dataset from its manifest does not list it",
				cfg.MemoryBudget, cfg.Datasets[name], name)}),
		dataset.WithAnnotationsBudget(annBytes),
	}
	if loc := cfg.Manifests[name]; loc != "" {
		opts = append(opts, dataset.WithManifest(loc))
	}
	if ext, ok := dataset.MemberAnnotations(cfg.Annotations[name]); ok {
		ds, err := dataset.OpenSource(ctx, cfg.Datasets[name], opts...)
		if err != nil {
			return nil, err
		}
		tds, err := dataset.WithMemberTargets(ds, ext)
		if err != nil {
			ds.Close()
			return nil, err
		}
		return tds, nil
	}
	if ann := cfg.Annotations[name]; ann != "" {
		ds, err := dataset.OpenAnnotatedSource(ctx, cfg.Datasets[name], ann, opts...)
		if err != nil {
			return nil, err
		}
		log.Info("annotations read", "file", ann, "images", ds.Len(), "classes", len(ds.Classes()),
			"bytes", ds.(interface{ AnnotationBytes() int64 }).AnnotationBytes())
		return ds, nil
	}
	return dataset.OpenSource(ctx, cfg.Datasets[name], opts...)
}

// storePolicy is the retry policy of the datasets' stores: the default
// with StoreTimeout and StoreAttempts where set.
func (c Config) storePolicy() source.Policy {
	p := source.DefaultPolicy()
	if c.StoreTimeout > 0 {
		p.RequestTimeout = c.StoreTimeout
	}
	if c.StoreAttempts > 0 {
		p.Attempts = c.StoreAttempts
	}
	return p
}

// annotationErrors is what is wrong with Config.Annotations: each names a
// dataset of the same name; a YOLO dataset's on a disk, without a manifest.
func (c Config) annotationErrors() []error {
	var errs []error
	for name, loc := range c.Annotations {
		path, ok := c.Datasets[name]
		_, member := dataset.MemberAnnotations(loc)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("annotations for %q: no such dataset (give --dataset %s=DIR too, the directory of its images)", name, name))
		case loc == "":
			errs = append(errs, fmt.Errorf("annotations for %q: empty path", name))
		case (strings.Contains(path, "://") && !source.IsRemote(path)) || (strings.Contains(loc, "://") && !source.IsRemote(loc)):
			errs = append(errs, fmt.Errorf("annotations for %q: unsupported URL scheme (want s3://, gs://, azblob:// or a local path)", name))
		case c.Manifests[name] != "" && !member && !source.IsRemote(path) && (strings.HasSuffix(strings.ToLower(loc), ".yaml") || strings.HasSuffix(strings.ToLower(loc), ".yml")):
			errs = append(errs, fmt.Errorf("dataset %q: --manifest and a YOLO dataset on a disk: its label files are read from the disk at start, so it has no manifest (one in a bucket has); give only --annotations", name))
		}
	}
	return errs
}

// datasetErrors is what Validate finds wrong with the datasets' names and
// paths and the manifests given for them.
func (c Config) datasetErrors() []error {
	var errs []error
	for name, path := range c.Datasets {
		if name == "" || strings.ContainsAny(name, "=/\\ \t\n") {
			errs = append(errs, fmt.Errorf("dataset name %q: want a non-empty name without '=', '/', '\\' or spaces", name))
		}
		if path == "" {
			errs = append(errs, fmt.Errorf("dataset %q: empty path", name))
		}
	}
	for name, loc := range c.Manifests {
		if _, ok := c.Datasets[name]; !ok {
			errs = append(errs, fmt.Errorf("manifest for %q: no such dataset (give --dataset %s=PATH|URL too)", name, name))
		}
		if loc == "" {
			errs = append(errs, fmt.Errorf("manifest for %q: empty path", name))
		}
	}
	return errs
}

// openDatasets opens the configured datasets, within ctx. The caller
// closes those opened when it fails.
func (s *Server) openDatasets(ctx context.Context, reg prometheus.Registerer) error {
	storeMetrics, err := source.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	for _, name := range s.names {
		// A listing may take what batches leave of the budget (the
		// process's own quarter): it is done before any batch is made.
		// An annotations file's parse may take what the batch budget has
		// left (its garbage is gone before a batch is made; what it keeps,
		// AnnotationBytes, is taken out of the budget below).
		ds, err := openDataset(ctx, s.cfg, name, storeMetrics, s.remote.ranges, s.budget.Limit()/3, s.budget.Limit()-s.budget.InUse(), s.log)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", name, err)
		}
		if a, ok := ds.(interface{ AnnotationBytes() int64 }); ok {
			// The parsed annotations live as long as the server: taken out
			// of the batch budget for good.
			if n := a.AnnotationBytes(); !s.budget.Try(n) {
				ds.Close()
				return fmt.Errorf("dataset %s: its annotations take %d bytes in memory, more than the batch budget has (%d): raise --memory-budget", name, n, s.budget.Limit()-s.budget.InUse())
			}
		}
		if capped, ok := ds.(interface{ SetMaxFileSize(int64) }); ok && s.cfg.MaxFileSize > 0 {
			capped.SetMaxFileSize(s.cfg.MaxFileSize)
		}
		s.datasets[name] = ds
		s.log.Info("dataset open", "dataset", name, "format", job.Format(ds), "size", ds.Len(),
			"classes", len(ds.Classes()), "fingerprint", ds.Fingerprint())
	}
	return nil
}
