package bench

// `stoker bench store --fields`: what captions and metadata beside the
// pixels cost. The same image-text job from the bucket, with the fields
// and without, in interleaved rounds: images per CPU second of the server
// (images/s per core: it decodes on --workers goroutines, 1 by default),
// and with --peers the same through a relaying coordinator, whose CPU per
// image is what relaying the fields costs it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stoker-dev/stoker/client"
)

// fieldConfigs are --fields's configurations, in the order each round
// runs them: the bucket without the fields and with them, then (peers >
// 0) the relay without and with.
func fieldConfigs(url string, env []string, peers int) []storeConfig {
	cs := []storeConfig{
		{Name: "bucket", Dataset: url, env: env},
		{Name: "bucket, fields", Dataset: url, env: env, Fields: true},
	}
	if peers > 0 {
		relay := fmt.Sprintf("relay (%s)", configName(peers))
		cs = append(cs,
			storeConfig{Name: relay, Dataset: url, env: env, Peers: peers},
			storeConfig{Name: relay + ", fields", Dataset: url, env: env, Peers: peers, Fields: true})
	}
	return cs
}

// checkBatchFields checks that bt carries the fields the job asked for
// (none without), a value for every sample, and, with both "json" and
// "__key__" (the shards' .json names its key), that each sample's
// metadata is its own.
func checkBatchFields(bt *client.Batch, names []string) error {
	if len(names) == 0 {
		if len(bt.Fields) != 0 {
			return fmt.Errorf("batch %d: fields %v, none asked for", bt.Number, bt.Fields)
		}
		return nil
	}
	n := len(bt.Indices)
	for _, f := range names {
		vs, ok := bt.Fields[f]
		if !ok || len(vs) != n || slices.ContainsFunc(vs, func(v []byte) bool { return v == nil }) {
			return fmt.Errorf("batch %d: field %q has %d values (present: %v) for %d samples, want one each", bt.Number, f, len(vs), ok, n)
		}
	}
	if slices.Contains(names, "json") && slices.Contains(names, "__key__") {
		for i, key := range bt.Fields["__key__"] {
			if !bytes.Contains(bt.Fields["json"][i], fmt.Appendf(nil, `"key":%q`, key)) {
				return fmt.Errorf("batch %d slot %d: key %q beside the .json %.120q", bt.Number, i, key, bt.Fields["json"][i])
			}
		}
	}
	return nil
}

// fieldRatios are the fields' targets, each from the medians over the
// rounds, per epoch.
type fieldRatios struct {
	// PerCoreFieldsOverNone: images per CPU second of the server with the
	// fields over without (target >= 0.95).
	PerCoreFieldsOverNone []float64 `json:"images_per_cpu_s_fields_over_none"`
	// ImagesPerSecFieldsOverNone: images/s, the same (reported).
	ImagesPerSecFieldsOverNone []float64 `json:"images_per_sec_fields_over_none"`
	// CoordCPUFieldsOverNone: with peers, the coordinator's CPU per image
	// with the fields over without (target <= 1.05).
	CoordCPUFieldsOverNone []float64 `json:"coordinator_cpu_fields_over_none,omitempty"`
	// PeerCPUFieldsOverNone: the peers' CPU per image, the same
	// (reported).
	PeerCPUFieldsOverNone []float64 `json:"peer_cpu_fields_over_none,omitempty"`
	// Later: the same figures over epochs 2..N of each run pooled (with
	// --epochs 3 or more): more images, so less noise, for the epochs
	// that read the byte cache rather than the bucket.
	Later *fieldRatios `json:"later_epochs_pooled,omitempty"`
}

// fieldRatios computes them with cell (a configuration's epoch's median
// of a figure).
func (r *storeReport) fieldRatios(cell func(config string, epoch int, f func(storeEpoch) float64) float64) *fieldRatios {
	x := fieldRatiosOf(r.Configs, r.Epochs, cell)
	if r.Epochs >= 3 {
		pooled := func(config string, _ int, f func(storeEpoch) float64) float64 {
			var xs []float64
			for _, run := range r.Runs {
				var sum storeEpoch
				for _, ep := range run.Epochs[1:] {
					sum.Images += ep.Images
					sum.Seconds += ep.Seconds
					sum.CPU += ep.CPU
					sum.PeerCPU += ep.PeerCPU
				}
				if run.Config == config {
					xs = append(xs, f(sum))
				}
			}
			return median(xs)
		}
		x.Later = fieldRatiosOf(r.Configs, 1, pooled)
	}
	return x
}

// fieldRatiosOf computes the ratios of epochs 1..epochs with cell.
func fieldRatiosOf(cs []storeConfig, epochs int, cell func(config string, epoch int, f func(storeEpoch) float64) float64) *fieldRatios {
	perCPU := func(e storeEpoch) float64 { return float64(e.Images) / e.CPU }
	x := &fieldRatios{}
	for e := range epochs {
		x.PerCoreFieldsOverNone = append(x.PerCoreFieldsOverNone, cell(cs[1].Name, e, perCPU)/cell(cs[0].Name, e, perCPU))
		x.ImagesPerSecFieldsOverNone = append(x.ImagesPerSecFieldsOverNone,
			cell(cs[1].Name, e, storeEpoch.imagesPerSec)/cell(cs[0].Name, e, storeEpoch.imagesPerSec))
		if len(cs) == 4 {
			x.CoordCPUFieldsOverNone = append(x.CoordCPUFieldsOverNone,
				cell(cs[3].Name, e, storeEpoch.cpuPerImage)/cell(cs[2].Name, e, storeEpoch.cpuPerImage))
			x.PeerCPUFieldsOverNone = append(x.PeerCPUFieldsOverNone,
				cell(cs[3].Name, e, storeEpoch.peerCPUPerImage)/cell(cs[2].Name, e, storeEpoch.peerCPUPerImage))
		}
	}
	return x
}

func (x *fieldRatios) print(w io.Writer, r *storeReport) {
	fmt.Fprintf(w, "fields %v, transform %s\n", r.Fields, r.Transform)
	for e := range x.PerCoreFieldsOverNone {
		fmt.Fprintf(w, "epoch %d: images per server CPU second, fields over none: %.3f (target >= 0.95); images/s: %.3f\n",
			e+1, x.PerCoreFieldsOverNone[e], x.ImagesPerSecFieldsOverNone[e])
		if e < len(x.CoordCPUFieldsOverNone) {
			fmt.Fprintf(w, "epoch %d: the relay's coordinator CPU per image, fields over none: %.3f (target <= 1.05); its peers': %.3f\n",
				e+1, x.CoordCPUFieldsOverNone[e], x.PeerCPUFieldsOverNone[e])
		}
	}
	if l := x.Later; l != nil {
		fmt.Fprintf(w, "epochs 2..%d pooled: images per server CPU second, fields over none: %.3f (target >= 0.95); images/s: %.3f\n",
			r.Epochs, l.PerCoreFieldsOverNone[0], l.ImagesPerSecFieldsOverNone[0])
		if len(l.CoordCPUFieldsOverNone) > 0 {
			fmt.Fprintf(w, "epochs 2..%d pooled: the relay's coordinator CPU per image, fields over none: %.3f (target <= 1.05); its peers': %.3f\n",
				r.Epochs, l.CoordCPUFieldsOverNone[0], l.PeerCPUFieldsOverNone[0])
		}
	}
}

// roundOrder is the order of round's runs: configs as they are, but with
// --fields, each pair (without the fields, with them) reversed every
// other round, so that neither always runs first.
func (b *storeBench) roundOrder(configs []storeConfig, round int) []storeConfig {
	if b.o.fields == nil || round%2 == 1 {
		return configs
	}
	out := slices.Clone(configs)
	for i := 0; i+1 < len(out); i += 2 {
		out[i], out[i+1] = out[i+1], out[i]
	}
	return out
}

// storeSnap is a scaleSnap with each process's CPU time to the
// nanosecond: an epoch of 1,000 photos costs a server under a second,
// which /proc/PID/stat's 10 ms ticks measure to 1-2% and a coordinator's
// tenth of it to 10%.
type storeSnap struct {
	scaleSnap
	threads []time.Duration
}

// snapStore reads every process's threads' CPU, then snapScale's
// figures.
func snapStore(ctx context.Context, procs []*scaleProc) (storeSnap, error) {
	var s storeSnap
	for _, p := range procs {
		d, err := threadsCPU(p.cmd.Process.Pid)
		if err != nil {
			return s, fmt.Errorf("%s: %w", p.name, err)
		}
		s.threads = append(s.threads, d)
	}
	var err error
	s.scaleSnap, err = snapScale(ctx, procs)
	return s, err
}

// threadsCPU sums the CPU time of process pid's threads, from each one's
// /proc/PID/task/TID/schedstat (its first figure: nanoseconds on a CPU).
// A thread that has exited is not counted: Go keeps its threads, but for
// one locked to a goroutine that ends.
func threadsCPU(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // exited since the listing
		}
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) != 3 {
			return 0, fmt.Errorf("thread %s: schedstat %q", t.Name(), b)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("thread %s: schedstat %q: %w", t.Name(), b, err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}
