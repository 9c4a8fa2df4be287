//go:build cgo

package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestBatchTimes: an Executor that times its stages gives each batch the
// time its samples spent in each stage (a Read that sleeps shows as read
// time, at least the sleep; Normalize as transform time), and one that
// does not leaves Times zero.
func TestBatchTimes(t *testing.T) {
	const sleep = 5 * time.Millisecond
	ds := slowReads{memDataset{goldenJPEGs()[:4]}, sleep}
	norm := ops.Op{Kind: ops.OpNormalize, Args: &ops.NormalizeArgs{Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.2, 0.2, 0.2}}}
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpResize, Size: [2]int{16, 16}}, norm)
	if err != nil {
		t.Fatal(err)
	}
	indices := []int64{0, 1, 2, 3}

	e := NewExecutor(1, WithStageObserver(func(_, _, _ time.Duration) {}))
	defer e.Close()
	var b Batch
	if err := e.Fill(context.Background(), ds, tr, 1, 0, indices, PadFromBatch, &b); err != nil {
		t.Fatal(err)
	}
	st := b.Times
	t.Logf("times: %+v", st)
	if st.Read < 4*sleep {
		t.Errorf("read %v for 4 reads that each slept %v", st.Read, sleep)
	}
	if st.Decode <= 0 || st.Transform <= 0 || st.Queue < 0 {
		t.Errorf("decode %v, transform %v, queue %v: want decode and transform > 0, queue >= 0", st.Decode, st.Transform, st.Queue)
	}
	// One worker: each sample waited for those before it.
	if st.Queue < 3*sleep {
		t.Errorf("queue %v: with one worker, the 4 samples waited at least 0+1+2+3 reads of %v", st.Queue, sleep)
	}
	if st.Wall < 4*sleep {
		t.Errorf("wall %v: one worker read the 4 samples one after the other, each sleeping %v", st.Wall, sleep)
	}
	// The buffer is reused: the next batch's times are its own. Its one
	// read does not sleep, so times carried over from the batch before
	// would be at least that batch's read (at least 4 sleeps), whatever
	// the machine's load; its own is a copy out of memory.
	if err := e.Fill(context.Background(), ds.memDataset, tr, 1, 0, indices[:1], PadFromBatch, &b); err != nil {
		t.Fatal(err)
	}
	if b.Times.Read >= st.Read {
		t.Errorf("one in-memory sample's read %v after four slow ones' %v: want its own, not the sum", b.Times.Read, st.Read)
	}

	plain := NewExecutor(1)
	defer plain.Close()
	if err := plain.Fill(context.Background(), ds, tr, 1, 0, indices, PadFromBatch, &b); err != nil {
		t.Fatal(err)
	}
	if b.Times != (batch.StageTimes{}) {
		t.Errorf("an executor without a stage observer timed %+v", b.Times)
	}
}
