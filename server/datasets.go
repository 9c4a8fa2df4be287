package server

import (
	"context"
	"log/slog"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// openDataset opens Config.Datasets[name]: a local path, or an
// object-storage URL read through a store whose requests are counted in
// m, from its manifest (Config.Manifests[name], else the one beside the
// data) when it has one, its samples read through ranges(store) (the
// server's byte cache and read-ahead: remoteReads.ranges). An open that
// fails (a missing bucket, refused credentials, a manifest that does not
// check) names the URL and the store's answer; serve exits with it.
func openDataset(ctx context.Context, cfg Config, name string, m *source.Metrics, ranges func(source.Store) source.Ranges,
	log *slog.Logger) (pipeline.Dataset, error) {
	opts := []pipeline.SourceOption{
		pipeline.WithStoreOptions(source.WithMetrics(m)),
		pipeline.WithRanges(ranges),
		pipeline.WithLog(log.With("dataset", name)),
	}
	if loc := cfg.Manifests[name]; loc != "" {
		opts = append(opts, pipeline.WithManifest(loc))
	}
	return pipeline.OpenSource(ctx, cfg.Datasets[name], opts...)
}
