package making

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
)

// TestPacer: the executor under --bench-rate is a server of fixed service
// time: batches asked for together are done one every 1/rate; one asked
// for when idle is done 1/rate later (not at once); a cancelled batch last
// in line gives back the time it did not use.
func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pacer{every: 100 * time.Millisecond}
		t0 := time.Now()
		var mu sync.Mutex
		var done []time.Duration
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := p.wait(context.Background(), 1); err != nil {
					t.Error(err)
				}
				mu.Lock()
				done = append(done, time.Since(t0))
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(done)
		if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}; !slices.Equal(done, want) {
			t.Errorf("three batches asked together done at %v, want %v", done, want)
		}

		// Idle for a while: the next is done one service time after it is
		// asked for, not at once, and not earlier for the idle time.
		time.Sleep(time.Second)
		t1 := time.Now()
		if err := p.wait(context.Background(), 1); err != nil || time.Since(t1) != 100*time.Millisecond {
			t.Errorf("after idling: done after %v (%v), want 100ms", time.Since(t1), err)
		}

		// A batch cancelled 30 ms into its service, last in line: the next
		// starts then, not after the cancelled one's full time.
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- p.wait(ctx, 1) }()
		time.Sleep(30 * time.Millisecond)
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("cancelled wait: %v, want context.Canceled", err)
		}
		t2 := time.Now()
		if err := p.wait(context.Background(), 1); err != nil || time.Since(t2) != 100*time.Millisecond {
			t.Errorf("after a cancelled batch: done after %v (%v), want 100ms", time.Since(t2), err)
		}

		// A quarter of a batch (a part leased by cache affinity) takes a
		// quarter of the service time: the rate is samples', not leases'.
		t3 := time.Now()
		if err := p.wait(context.Background(), 0.25); err != nil || time.Since(t3) != 25*time.Millisecond {
			t.Errorf("a quarter batch: done after %v (%v), want 25ms", time.Since(t3), err)
		}
	})
}

// labels is a dataset of n samples whose labels are their index times 10;
// nothing else of it is read.
type labels struct {
	dataset.Dataset
	n int
}

func (d labels) Label(i int) int64 { return int64(i) * 10 }

// TestReplay: under --bench-replay a job's first whole batch is made by
// the executor, and every later batch carries its pixels with its own
// indices and labels (a part of a batch, at its places in the whole
// batch's buffer); a short or failed batch is not replayed, and each job
// replays its own.
func TestReplay(t *testing.T) {
	m, err := New(true, 0)
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	executor := func(_ context.Context, epoch uint64, idx []int64, _ []int, b *pipeline.Batch) error {
		made++
		b.N, b.Data, b.Indices, b.Labels, b.Errors = len(idx), b.Data[:0], append(b.Indices[:0], idx...), b.Labels[:0], b.Errors[:0]
		for _, i := range idx {
			b.Data = append(b.Data, byte(made), byte(i))
			b.Labels = append(b.Labels, i*10)
		}
		if idx[0] == 99 {
			b.Errors = append(b.Errors, pipeline.SampleError{Index: 99, Reason: "bad"})
		}
		return nil
	}
	ds := labels{n: 100}
	job := m.Wrap(ds, 2, executor)
	var b pipeline.Batch
	for _, idx := range [][]int64{{99, 1}, {7}, {2, 3}, {4, 5}, {6}} { // failed, short, first whole, replayed, replayed short
		if err := job(context.Background(), 0, idx, nil, &b); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.Indices, idx) || b.N != len(idx) || b.Labels[0] != idx[0]*10 {
			t.Errorf("batch of %v: indices %v labels %v", idx, b.Indices, b.Labels)
		}
	}
	if made != 3 || !bytes.Equal(b.Data, []byte{3, 2}) {
		t.Errorf("the executor made %d batches, the last batch's pixels are %v; want 3 made, the last a copy of the first whole one's", made, b.Data)
	}
	whole := pipeline.Batch{Data: []byte{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}}
	if err := job(context.Background(), 0, []int64{5, 6}, []int{2, 0}, &whole); err != nil {
		t.Fatal(err)
	}
	if made != 3 || !bytes.Equal(whole.Data, []byte{3, 3, 0xee, 0xee, 3, 2}) || !slices.Equal(whole.Indices, []int64{5, 6}) {
		t.Errorf("a part replayed at places 2 and 0: made %d, buffer %v, indices %v; want a copy of the first whole batch's samples there, the rest untouched",
			made, whole.Data, whole.Indices)
	}
	other := m.Wrap(ds, 2, executor)
	if err := other(context.Background(), 0, []int64{8, 9}, nil, &b); err != nil || made != 4 {
		t.Errorf("another job's first batch: %v, made %d times; want it made (4)", err, made)
	}
	if _, err := New(false, -1); err == nil {
		t.Error("a negative rate is accepted")
	}
	if m, err := New(false, 0); m != nil || err != nil {
		t.Errorf("no flags: %v, %v; want none", m, err)
	}
	failing := m.Wrap(ds, 2, func(context.Context, uint64, []int64, []int, *pipeline.Batch) error { return errors.New("disk") })
	if err := failing(context.Background(), 0, []int64{1, 2}, nil, &b); err == nil {
		t.Error("the executor's error is lost")
	}
}
