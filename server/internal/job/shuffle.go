package job

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/plan"
)

// The block shuffle's window, in shards (JobSpec.shuffle_window). A maker
// reads about a window of shards' bytes ahead of its batches (a window's
// samples are mixed, so its last batch may need any of them): 4 shards of
// WebDataset's usual 100 MB to 1 GB keep that within a server's memory
// budget while mixing thousands of samples.
const (
	defaultShuffleWindow = 4
	MaxShuffleWindow     = 1024
)

// shuffleChoice is a job's validated shuffle: how its epochs are ordered.
type shuffleChoice struct {
	on     bool
	starts []int // block shuffle: the dataset's shard starts; nil for the global one
	window int   // block shuffle: shards per window
}

// shuffleOf validates spec's shuffle against ds.
func shuffleOf(spec *stokerv1.JobSpec, name string, ds dataset.Dataset) (shuffleChoice, error) {
	c := shuffleChoice{on: spec.GetShuffle()}
	w, err := blockWindowOf(spec)
	if w == 0 || err != nil {
		return c, err
	}
	if !c.on {
		return c, nil // shuffle_mode only says how a shuffled epoch is ordered
	}
	sh, ok := ds.(dataset.Sharded)
	if !ok {
		return c, status.Errorf(codes.InvalidArgument, "dataset %q is not sharded (%s): each sample is an object of its own, so the global shuffle reads no more objects than a block shuffle would; use the global shuffle (Python: shuffle=True, not \"block\"; a JobSpec: shuffle_mode left unset)",
			name, Format(ds))
	}
	c.starts, c.window = sh.ShardStarts(), w
	if err := plan.CheckShardStarts(c.starts, ds.Len()); err != nil {
		return c, status.Errorf(codes.FailedPrecondition, "dataset %q: %v", name, err)
	}
	return c, nil
}

// blockWindowOf is spec's block shuffle's window in shards (its default
// for 0), or 0 when spec's shuffle_mode is not the block shuffle.
func blockWindowOf(spec *stokerv1.JobSpec) (int, error) {
	switch spec.GetShuffleMode() {
	case stokerv1.ShuffleMode_SHUFFLE_MODE_UNSPECIFIED, stokerv1.ShuffleMode_SHUFFLE_MODE_GLOBAL:
		return 0, nil
	case stokerv1.ShuffleMode_SHUFFLE_MODE_BLOCK:
	default:
		return 0, status.Errorf(codes.InvalidArgument, "unknown shuffle_mode %d", spec.GetShuffleMode())
	}
	w := int(spec.GetShuffleWindow())
	if w == 0 {
		w = defaultShuffleWindow
	}
	if w > MaxShuffleWindow {
		return 0, status.Errorf(codes.InvalidArgument, "shuffle_window %d: want 1..%d shards (0: %d); a window holds about that many shards' bytes in memory, and a window of all the shards shuffles like the global shuffle",
			w, MaxShuffleWindow, defaultShuffleWindow)
	}
	return w, nil
}

// String is how Status shows the shuffle.
func (c shuffleChoice) String() string {
	switch {
	case !c.on:
		return "sequential"
	case c.window > 0:
		return fmt.Sprintf("block W=%d", c.window)
	}
	return "global"
}

// maxMixSamples bounds a mix's epoch (JobSpec.mix_samples): a trillion
// positions is far more than any epoch, and keeps positions' arithmetic
// far from overflowing.
const maxMixSamples = 1 << 40

// mixOf is spec's mix of env's datasets (nil, nil when spec names
// one dataset): the mixed dataset, and each part's share of an epoch.
// Its errors are INVALID_ARGUMENT naming what is wrong.
func mixOf(spec *stokerv1.JobSpec, shuffle shuffleChoice, env Env) (*dataset.Mixed, []plan.MixShare, error) {
	mix := spec.GetMix()
	if len(mix) == 0 {
		return nil, nil, nil
	}
	switch {
	case spec.GetDataset() != "":
		return nil, nil, status.Errorf(codes.InvalidArgument, "the job names dataset %q and a mix of %d: name one dataset, or leave dataset empty for the mix",
			Truncate(spec.GetDataset(), 64), len(mix))
	case len(mix) > dataset.MaxMixParts:
		return nil, nil, status.Errorf(codes.InvalidArgument, "a mix of %d datasets: the limit is %d", len(mix), dataset.MaxMixParts)
	case !shuffle.on:
		return nil, nil, status.Error(codes.InvalidArgument, "a mix draws its samples in a shuffled order: it needs shuffle=True "+
			"(or the block shuffle, which mixes whole shards)")
	case spec.GetRepeats() > 1:
		return nil, nil, status.Error(codes.InvalidArgument, "repeats with a mix is not supported: mix first, or repeat one dataset")
	case spec.GetMixSamples() > maxMixSamples:
		return nil, nil, status.Errorf(codes.InvalidArgument, "mix_samples %d: the limit is %d", spec.GetMixSamples(), uint64(maxMixSamples))
	}
	parts := make([]dataset.MixPart, len(mix))
	for i, m := range mix {
		name := m.GetDataset()
		if len(name) > maxDatasetName {
			return nil, nil, status.Errorf(codes.InvalidArgument, "dataset name of %d bytes in the mix: the limit is %d", len(name), maxDatasetName)
		}
		ds, ok := env.Datasets[name]
		if !ok {
			return nil, nil, status.Errorf(codes.InvalidArgument, "the mix names unknown dataset %q; known: %s", Truncate(name, 64), strings.Join(env.Names, ", "))
		}
		if g := groupedOf(ds); g != nil {
			// A mix draws samples, and would serve a record's images apart.
			return nil, nil, status.Errorf(codes.Unimplemented, "dataset %q of the mix has records of several images (%d images in %d records): a mix of it is not served",
				name, ds.Len(), g.Records())
		}
		parts[i] = dataset.MixPart{Name: name, DS: ds, Weight: m.GetWeight()}
	}
	mixed, err := dataset.NewMixed(parts)
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%v", strings.TrimPrefix(err.Error(), errs.Unsupported.Error()+": "))
	}
	starts := mixed.Starts()
	shares := make([]plan.MixShare, len(parts))
	for i := range parts {
		shares[i] = plan.MixShare{Start: starts[i], Size: starts[i+1] - starts[i]}
	}
	n := spec.GetMixSamples()
	if n == 0 {
		n = uint64(mixed.Len())
	}
	if shuffle.window > 0 {
		// Shard-level mixing: the weights share the epoch's shards.
		var shards uint64
		for i, part := range parts {
			sh, ok := part.DS.(dataset.Sharded)
			if !ok {
				return nil, nil, status.Errorf(codes.InvalidArgument, "dataset %q of the mix is not sharded (each sample an object or a file of its own): "+
					"the block shuffle mixes whole shards; mix it with the global shuffle (shuffle=True)", part.Name)
			}
			if err := plan.CheckShardStarts(sh.ShardStarts(), part.DS.Len()); err != nil {
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
	for i, q := range dataset.MixQuotas(parts, n) {
		shares[i].Quota = q
	}
	return mixed, shares, nil
}

// maxMixShardDraws bounds a block-shuffled mix's shard draws an epoch: an
// epoch's plan holds two words a draw.
const maxMixShardDraws = 1 << 24

// SpecName is what a job's data is called in logs: its dataset's name,
// or its mix's.
func SpecName(spec *stokerv1.JobSpec) string {
	if len(spec.GetMix()) > 0 {
		return mixName(spec)
	}
	return Truncate(spec.GetDataset(), 64)
}

// mixName is what a mix is called in logs and messages.
func mixName(spec *stokerv1.JobSpec) string {
	var b strings.Builder
	b.WriteString("mix(")
	for i, m := range spec.GetMix() {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%s:%g", Truncate(m.GetDataset(), 32), m.GetWeight())
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

// Format names a dataset's on-disk format as DatasetInfo.format does.
func Format(ds dataset.Dataset) string {
	switch d := ds.(type) {
	case *dataset.ImageFolder:
		return "imagefolder"
	case *dataset.WebDataset:
		return "webdataset"
	case interface{ Layout() string }:
		return d.Layout()
	}
	return "unknown"
}
