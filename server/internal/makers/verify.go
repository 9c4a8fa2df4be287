package makers

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/ragged"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/job"
)

// Peers are verified, not trusted. An authenticated peer can still hand
// back wrong batches (a bug, another decoder, a lie): the coordinator checks
// every peer batch's labels and indices against its own plan and dataset,
// and re-makes a random fraction of its samples itself and compares bytes
// (batch k is a pure function of (job, epoch, k), so it can). A peer whose
// batch does not match is quarantined: no job leases to it again while it
// stays in the peer set, and its batches not yet delivered that were not
// checked byte for byte are made again elsewhere.

// maxPeerReason bounds a peer's reason for a sample's failure, as it is
// passed on to the trainer.
const maxPeerReason = 256

// errMismatch marks a peer batch that is not what the plan and the dataset
// say it must be: the coordinator quarantines its peer.
var errMismatch = coord.ErrMismatch

// DefaultVerifyFraction is the share of peers' samples re-made and
// compared: about one sample in 200, a few percent of a core on a
// coordinator relaying thousands of images a second.
const DefaultVerifyFraction = 0.005

// Verifier re-makes samples of peers' batches on this server's executor (or
// on one of its own with one goroutine when this server decodes nothing),
// and keeps the server's quarantine: the coordinators' coord.Verifier.
type Verifier struct {
	fraction float64
	log      *slog.Logger

	mu   sync.Mutex
	exec *pipeline.Executor // the server's, or own (closed by Close)
	own  bool
	q    *pipeline.Queue
	// quarantined: makers whose batches did not match, and why.
	quarantined map[coord.Maker]error
	// trusts: how far each peer is into its strict start.
	trusts map[coord.Maker]*trust
	poke   func() // wakes the coordinators
}

// NewVerifier re-makes fraction of peers' samples on exec (nil: an
// executor of its own, of one goroutine, at first use), logging to log;
// poke wakes the coordinators when a maker is quarantined.
func NewVerifier(fraction float64, exec *pipeline.Executor, log *slog.Logger, poke func()) *Verifier {
	return &Verifier{fraction: fraction, exec: exec, log: log, quarantined: make(map[coord.Maker]error), trusts: make(map[coord.Maker]*trust), poke: poke}
}

// queue is the executor queue samples are re-made on, opened at first use.
func (v *Verifier) queue() *pipeline.Queue {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.q == nil {
		if v.exec == nil {
			v.exec, v.own = pipeline.NewExecutor(1), true
		}
		v.q = v.exec.Queue("verify")
	}
	return v.q
}

// Close closes the verifier's queue (and its executor, when its own).
func (v *Verifier) Close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.q != nil {
		v.q.Close()
	}
	if v.own {
		v.exec.Close()
	}
}

var _ coord.Verifier = (*Verifier)(nil)

// Quarantine takes m out of every job's makers, for reason.
func (v *Verifier) Quarantine(m coord.Maker, reason error) {
	v.mu.Lock()
	_, already := v.quarantined[m]
	if !already {
		v.quarantined[m] = reason
	}
	v.mu.Unlock()
	if !already {
		v.log.Error("peer quarantined: its batch did not match what this coordinator makes; no job leases to it while it stays in the peer set",
			"maker", m.Name(), "err", reason)
		v.poke()
	}
}

// Why is m's quarantine's reason, nil when it is not quarantined.
func (v *Verifier) Why(m coord.Maker) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.quarantined[m]
}

// Forget drops what is kept of a maker that left the peer set.
func (v *Verifier) Forget(m coord.Maker) {
	v.mu.Lock()
	delete(v.quarantined, m)
	delete(v.trusts, m)
	v.mu.Unlock()
}

// Verification starts strict: a peer's first strictBatches batches, each
// time it connects (a new peer, or one whose Work stream came up again),
// have every slot compared, and then the share of slots compared halves
// every strictHalfLife batches until it is the configured fraction (about
// 35 batches at the default 0.5%). Counted in batches' worth of samples:
// a part of a batch (cache affinity) counts as its share of one. A peer that lies from its first batch is
// caught in it; one that waits out the strict start is caught, lying in
// one sample per batch, after about 1/fraction batches. The strict start
// costs about 9 batches re-made per peer and connection.
const (
	strictBatches  = 4
	strictHalfLife = 4
)

// strictRate is the share of slots compared in a peer's lease that starts
// after k whole batches' worth of samples (from 0) since it connected, for
// a configured fraction f.
func strictRate(k int, f float64) float64 {
	if k < strictBatches {
		return 1
	}
	return max(f, math.Exp2(-float64(k-strictBatches+1)/strictHalfLife))
}

// trust is what the verifier knows of a peer: the batches' worth of
// samples picked for since its Work stream last came up.
type trust struct {
	conn    uint64
	batches float64
}

// connected is a maker whose Work stream can come up again: Connection
// changes each time it does.
type connected interface{ Connection() uint64 }

// rate is the share of peer m's next lease's slots to compare, counting
// the lease, share of a batch.
func (v *Verifier) rate(m coord.Maker, share float64) float64 {
	var conn uint64
	if c, ok := m.(connected); ok {
		conn = c.Connection()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	t := v.trusts[m]
	if t == nil || t.conn != conn {
		t = &trust{conn: conn}
		v.trusts[m] = t
	}
	k := int(t.batches)
	t.batches += share
	return strictRate(k, v.fraction)
}

// Pick chooses the slots of a lease of n samples (of a batch of batch) to
// peer m that its batch
// is verified by, byte for byte: each with probability the peer's rate
// now (strictRate). Slots, not samples: a pad copy of a sample is a slot
// of its own, and can be chosen as any other. They are chosen before the
// batch comes, so that the peer keeps their pixels aside as they arrive
// (lease.Lease.Keep): the batch itself may be made in a ring slot its
// trainer can write.
func (v *Verifier) Pick(m coord.Maker, n, batch int) []int {
	if v.fraction <= 0 {
		return nil
	}
	p := v.rate(m, float64(n)/float64(max(batch, n, 1)))
	var keep []int
	for slot := range n {
		if p >= 1 || rand.Float64() < p {
			keep = append(keep, slot)
		}
	}
	return keep
}

// Verify checks a peer's batch b for lease l of job j: its indices and
// labels exactly as the plan, the dataset and the fail policy make them
// given the failures it reports; each failure it reports fails here too;
// and the slots picked for the lease (l.Keep), their samples re-made here,
// byte for byte with the pixels kept aside as they came (kept). pixels
// reports whether every slot of the batch was compared byte for byte.
func (v *Verifier) Verify(ctx context.Context, cj coord.Job, l *lease.Lease, b *pipeline.Batch, kept [][]byte) (pixels bool, err error) {
	j := JobOf(cj)
	src, failed, err := expectIndices(j, l, b)
	if err != nil {
		return false, err
	}
	if err := expectFields(j, l, b); err != nil {
		return false, err
	}
	suspects := checkTargets(j, b)
	// What the trainer is told of a failure comes from here: the sample's
	// name from this dataset, the peer's reason kept short.
	for i := range b.Errors {
		b.Errors[i].Name = j.Data().Name(int(b.Errors[i].Index))
		b.Errors[i].Reason = job.Truncate(b.Errors[i].Reason, maxPeerReason)
	}
	// Slots to compare (the peer kept those the batch has), and the
	// samples to re-make, by their place in the lease (a sample's copies,
	// under repeated augmentation, are places of their own): each in them
	// once, and every failure the peer reports (rare).
	type keptSlot struct {
		slot int
		pix  []byte
	}
	var slots []keptSlot
	var check []int
	for i, slot := range l.Keep {
		if i < len(kept) && kept[i] != nil && slot < b.N {
			slots = append(slots, keptSlot{slot, kept[i]})
			if !slices.Contains(check, src[slot]) {
				check = append(check, src[slot])
			}
		}
	}
	for _, sp := range suspects { // made here too, their targets compared below
		if !slices.Contains(check, src[sp.slot]) {
			check = append(check, src[sp.slot])
		}
	}
	pixels = len(slots) == b.N
	if len(check) == 0 && len(failed) == 0 {
		return pixels, nil
	}
	places := append(slices.Clone(check), failed...)
	mine := pipeline.Batch{FieldSet: j.Fields()}
	idx := make([]int64, len(places))
	for i, p := range places {
		idx[i] = l.Indices[p]
	}
	if l.Copies != nil {
		mine.Copies = make([]uint32, len(places))
		for i, p := range places {
			mine.Copies[i] = l.Copies[p]
		}
	}
	// Drop policy: each sample's bytes at a known place, failures left out.
	if err := v.queue().Fill(ctx, j.Data(), j.Transform(), j.Spec().GetSeed(), l.Epoch, idx, pipeline.Drop, &mine); err != nil {
		return false, fmt.Errorf("re-making samples to verify: %w", err)
	}
	failedHere := make(map[int64]bool)
	for _, e := range mine.Errors {
		failedHere[e.Index] = true
	}
	for _, p := range failed {
		if !failedHere[l.Indices[p]] {
			return false, fmt.Errorf("%w: batch %d of epoch %d: the peer says sample %d failed; it decodes here", errMismatch, l.Number, l.Epoch, l.Indices[p])
		}
	}
	// A sample's bytes, its views in order, as the Peer keeps a slot's.
	layout := j.Transform().ViewLayout()
	made := make(map[int][]byte, len(check))
	at := make(map[int]int, len(check)) // mine's sample of each place
	k := 0                              // mine's sample for the next good one
	for _, p := range check {
		if failedHere[l.Indices[p]] {
			return false, fmt.Errorf("%w: batch %d of epoch %d: sample %d fails here, the peer made it", errMismatch, l.Number, l.Epoch, l.Indices[p])
		}
		made[p] = layout.AppendSample(nil, mine.Data, mine.N, k)
		at[p] = k
		k++
	}
	for _, sp := range suspects {
		f := j.Fields().TargetsAt()
		if theirs, ours := b.SampleFields(sp.slot)[f], mine.SampleFields(at[src[sp.slot]])[f]; theirs.Has != ours.Has || !bytes.Equal(theirs.Data, ours.Data) {
			return false, fmt.Errorf("%w: batch %d of epoch %d: slot %d (sample %d): its targets: %v", errMismatch, l.Number, l.Epoch, sp.slot, b.Indices[sp.slot], sp.err)
		}
	}
	for _, s := range slots {
		if !layout.SameSample(s.pix, made[src[s.slot]]) {
			return false, fmt.Errorf("%w: batch %d of epoch %d: slot %d (sample %d): its pixels differ from the ones made here", errMismatch, l.Number, l.Epoch, s.slot, b.Indices[s.slot])
		}
		if nf := j.Fields().Len(); nf > 0 {
			theirs, ours := b.SampleFields(s.slot), mine.SampleFields(at[src[s.slot]])
			for f := range nf {
				if theirs[f].Has != ours[f].Has || !bytes.Equal(theirs[f].Data, ours[f].Data) {
					return false, fmt.Errorf("%w: batch %d of epoch %d: slot %d (sample %d): its field %q differs from the one read here",
						errMismatch, l.Number, l.Epoch, s.slot, b.Indices[s.slot], j.Fields().Names()[f])
				}
			}
		}
	}
	return pixels, nil
}

// expectFields checks every sample's fields in a peer's batch b against
// what this server's index says of them (expectIndices checked its
// indices): present as the sample has them, of their sizes, the names
// byte for byte. Their bytes are compared where the sample is made again.
func expectFields(j *job.Job, l *lease.Lease, b *pipeline.Batch) error {
	nf := j.Fields().Len()
	if nf == 0 {
		return nil
	}
	if len(b.Fields) != b.N*nf {
		return fmt.Errorf("%w: batch %d of epoch %d: %d fields for %d samples of %d fields", errMismatch, l.Number, l.Epoch, len(b.Fields), b.N, nf)
	}
	for i := range b.N {
		if err := j.Fields().Expect(j.Data(), int(b.Indices[i]), b.SampleFields(i)); err != nil {
			return fmt.Errorf("%w: batch %d of epoch %d: slot %d: %v", errMismatch, l.Number, l.Epoch, i, err)
		}
	}
	return nil
}

// suspect is a slot whose targets have a value out of range (err).
type suspect struct {
	slot int
	err  error
}

// checkTargets range-checks every sample's targets in a peer's batch b
// (ragged.Check: finite boxes and keypoints, labels within the dataset's
// classes, crowd flags, visibilities, masks that cover their canvas), a
// linear pass over what the batch carries, and returns the slots whose
// targets fail it. Verify makes those samples again here and compares
// their targets byte for byte: a peer that lies in them is caught in the
// batch it lies in, not only where a sample is picked to be made again
// (one in 200 after a peer's strict start), and quarantined; a value
// this server makes too (a keypoint a perspective sends to infinity, as
// torchvision's does) is no lie.
func checkTargets(j *job.Job, b *pipeline.Batch) []suspect {
	fs := j.Fields()
	t := fs.TargetsAt()
	if t < 0 {
		return nil
	}
	ov, classes := ragged.OverlapOf(fs), len(j.Data().Classes())
	if lb, ok := j.Data().(interface{ LabelBound(contiguous bool) int64 }); ok {
		classes = int(min(lb.LabelBound(fs.ContiguousLabels()), 1<<31-1)) // a COCO set's labels are its category ids
	}
	var out []suspect
	for i := range b.N {
		f := b.SampleFields(i)[t]
		if !f.Has {
			continue
		}
		if err := ragged.Check(f.Data, ov, classes); err != nil {
			out = append(out, suspect{i, err})
		}
	}
	return out
}

// expectIndices checks b's indices and labels against what lease l must
// give under j's fail policy, given the failures b reports (in the lease's
// order, as pipeline reports them): the plan's indices with the failed
// ones left out (Drop), or replaced in turn by the batch's good ones
// (PadFromBatch); each label the dataset's. It returns the place in the
// lease each slot of b was made from (a pad copy's: the good sample's it
// copies) and the places of the failures.
func expectIndices(j *job.Job, l *lease.Lease, b *pipeline.Batch) (src, failedAt []int, err error) {
	failed := make([]bool, len(l.Indices))
	p := 0
	for _, e := range b.Errors {
		for p < len(l.Indices) && l.Indices[p] != e.Index {
			p++
		}
		if p == len(l.Indices) {
			return nil, nil, fmt.Errorf("%w: batch %d of epoch %d: a failure of sample %d, which the lease does not name (or out of order)", errMismatch, l.Number, l.Epoch, e.Index)
		}
		failed[p] = true
		failedAt = append(failedAt, p)
		p++
	}
	var good []int
	for i := range l.Indices {
		if !failed[i] {
			good = append(good, i)
		}
	}
	src = good
	if j.Policy() == pipeline.PadFromBatch && len(good) > 0 {
		src = make([]int, 0, len(l.Indices))
		k := 0
		for i := range l.Indices {
			if failed[i] {
				i = good[k%len(good)]
				k++
			}
			src = append(src, i)
		}
	}
	want := make([]int64, len(src))
	for i, p := range src {
		want[i] = l.Indices[p]
	}
	if !slices.Equal(b.Indices, want) {
		return nil, nil, fmt.Errorf("%w: batch %d of epoch %d: indices %v, the plan gives %v", errMismatch, l.Number, l.Epoch, truncInts(b.Indices), truncInts(want))
	}
	for i, idx := range want {
		if lab := j.Data().Label(int(idx)); b.Labels[i] != lab {
			return nil, nil, fmt.Errorf("%w: batch %d of epoch %d: sample %d labelled %d, the dataset says %d", errMismatch, l.Number, l.Epoch, idx, b.Labels[i], lab)
		}
	}
	return src, failedAt, nil
}

// truncInts shortens a list of indices for a message.
func truncInts(xs []int64) string {
	if len(xs) <= 8 {
		return fmt.Sprint(xs)
	}
	return fmt.Sprint(xs[:8])[:len(fmt.Sprint(xs[:8]))-1] + fmt.Sprintf(" …(%d in all)]", len(xs))
}
