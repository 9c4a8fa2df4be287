package server

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// maxMixSamples bounds a mix's epoch (JobSpec.mix_samples): a trillion
// positions is far more than any epoch, and keeps positions' arithmetic
// far from overflowing.
const maxMixSamples = 1 << 40

// mixOf is spec's mix of the server's datasets (nil, nil when spec names
// one dataset): the mixed dataset, and each part's share of an epoch.
// Its errors are INVALID_ARGUMENT naming what is wrong.
func (s *Server) mixOf(spec *stokerv1.JobSpec, shuffle shuffleChoice) (*pipeline.Mixed, []MixShare, error) {
	mix := spec.GetMix()
	if len(mix) == 0 {
		return nil, nil, nil
	}
	switch {
	case spec.GetDataset() != "":
		return nil, nil, status.Errorf(codes.InvalidArgument, "the job names dataset %q and a mix of %d: name one dataset, or leave dataset empty for the mix",
			truncate(spec.GetDataset(), 64), len(mix))
	case len(mix) > pipeline.MaxMixParts:
		return nil, nil, status.Errorf(codes.InvalidArgument, "a mix of %d datasets: the limit is %d", len(mix), pipeline.MaxMixParts)
	case !shuffle.on:
		return nil, nil, status.Error(codes.InvalidArgument, "a mix draws its samples in a shuffled order: it needs shuffle=True "+
			"(or the block shuffle, which mixes whole shards)")
	case spec.GetRepeats() > 1:
		return nil, nil, status.Error(codes.InvalidArgument, "repeats with a mix is not supported: mix first, or repeat one dataset")
	case spec.GetMixSamples() > maxMixSamples:
		return nil, nil, status.Errorf(codes.InvalidArgument, "mix_samples %d: the limit is %d", spec.GetMixSamples(), uint64(maxMixSamples))
	}
	parts := make([]pipeline.MixPart, len(mix))
	for i, m := range mix {
		name := m.GetDataset()
		if len(name) > maxDatasetName {
			return nil, nil, status.Errorf(codes.InvalidArgument, "dataset name of %d bytes in the mix: the limit is %d", len(name), maxDatasetName)
		}
		ds, ok := s.datasets[name]
		if !ok {
			return nil, nil, status.Errorf(codes.InvalidArgument, "the mix names unknown dataset %q; known: %s", truncate(name, 64), strings.Join(s.names, ", "))
		}
		parts[i] = pipeline.MixPart{Name: name, DS: ds, Weight: m.GetWeight()}
	}
	mixed, err := pipeline.NewMixed(parts)
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%v", strings.TrimPrefix(err.Error(), pipeline.ErrUnsupported.Error()+": "))
	}
	starts := mixed.Starts()
	shares := make([]MixShare, len(parts))
	for i := range parts {
		shares[i] = MixShare{Start: starts[i], Size: starts[i+1] - starts[i]}
	}
	n := spec.GetMixSamples()
	if n == 0 {
		n = uint64(mixed.Len())
	}
	if shuffle.window > 0 {
		// Shard-level mixing: the weights share the epoch's shards.
		var shards uint64
		for i, part := range parts {
			sh, ok := part.DS.(pipeline.Sharded)
			if !ok {
				return nil, nil, status.Errorf(codes.InvalidArgument, "dataset %q of the mix is not sharded (each sample an object or a file of its own): "+
					"the block shuffle mixes whole shards; mix it with the global shuffle (shuffle=True)", part.Name)
			}
			if err := checkShardStarts(sh.ShardStarts(), part.DS.Len()); err != nil {
				return nil, nil, status.Errorf(codes.FailedPrecondition, "dataset %q: %v", part.Name, err)
			}
			shares[i].Shards = sh.ShardStarts()
			shards += uint64(len(shares[i].Shards))
		}
		// mix_samples in shards: as many as hold about that many samples.
		n = max(1, (n*shards+uint64(mixed.Len())/2)/uint64(mixed.Len()))
		if n > maxMixShardDraws {
			return nil, nil, status.Errorf(codes.InvalidArgument, "mix_samples %d draws %d shards under the block shuffle: the limit is %d",
				spec.GetMixSamples(), n, maxMixShardDraws)
		}
	}
	for i, q := range pipeline.MixQuotas(parts, n) {
		shares[i].Quota = q
	}
	return mixed, shares, nil
}

// maxMixShardDraws bounds a block-shuffled mix's shard draws an epoch: an
// epoch's plan holds two words a draw.
const maxMixShardDraws = 1 << 24

// specName is what a job's data is called in logs: its dataset's name,
// or its mix's.
func specName(spec *stokerv1.JobSpec) string {
	if len(spec.GetMix()) > 0 {
		return mixName(spec)
	}
	return truncate(spec.GetDataset(), 64)
}

// mixName is what a mix is called in logs and messages.
func mixName(spec *stokerv1.JobSpec) string {
	var b strings.Builder
	b.WriteString("mix(")
	for i, m := range spec.GetMix() {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%s:%g", truncate(m.GetDataset(), 32), m.GetWeight())
		if b.Len() > 200 {
			b.WriteString(",...")
			break
		}
	}
	b.WriteString(")")
	return b.String()
}

// mixShuffleOf is a mix's shuffle: the global one, or the block shuffle
// (shards of every dataset in windows of shuffle_window), with no shard
// starts of its own (the plan lays out the drawn shards).
func mixShuffleOf(spec *stokerv1.JobSpec) (shuffleChoice, error) {
	c := shuffleChoice{on: spec.GetShuffle()}
	w, err := blockWindowOf(spec)
	if c.on {
		c.window = w
	}
	return c, err
}
