// The executor's tests' helpers (a probe dataset, a held worker, fills in
// the background, a reads' log): the tests of the files built with cgo
// alone (queue_test.go and kin: the pure-Go build runs the same code and
// checks) and those of both builds (queue_cpu_test.go, abandon_test.go...)
// use them.

package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/waitfor"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// probeDataset is a Dataset whose samples are never images: each Read
// counts, calls onRead (to sleep, block or log) and fails, so a sample costs
// what onRead makes it cost and the scheduler's choices show in the reads.
type probeDataset struct {
	name   string
	n      int
	onRead func(name string, i int)
	reads  atomic.Int64
}

var errProbe = fmt.Errorf("%w: probe sample", errs.Corrupt)

func (d *probeDataset) Len() int { return d.n }

func (d *probeDataset) Label(i int) int64 { return 0 }

func (d *probeDataset) Classes() []string { return []string{"a"} }

func (d *probeDataset) Name(i int) string { return fmt.Sprintf("%s/%d", d.name, i) }

func (d *probeDataset) Fingerprint() string { return "" }

func (d *probeDataset) Close() error { return nil }

func (d *probeDataset) Read(i int, buf []byte) ([]byte, error) {
	d.reads.Add(1)
	if d.onRead != nil {
		d.onRead(d.name, i)
	}
	return nil, errProbe
}

func seq(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i)
	}
	return s
}

func sleepRead(d time.Duration) func(string, int) { return func(string, int) { time.Sleep(d) } }

// readLog records the order of reads across datasets.
type readLog struct {
	mu    sync.Mutex
	names []string
}

func (l *readLog) add(name string, _ int) {
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
}

// gate is a one-sample Fill that holds an Executor's only worker until
// released, so that queues can be loaded before the worker chooses.
type gate struct {
	started, release chan struct{}
	done             chan error
}

func holdWorker(t *testing.T, e *Executor) *gate {
	t.Helper()
	g := &gate{started: make(chan struct{}), release: make(chan struct{}), done: make(chan error, 1)}
	ds := &probeDataset{name: "gate", n: 1, onRead: func(string, int) {
		close(g.started)
		<-g.release
	}}
	go func() {
		var b Batch
		g.done <- e.Queue("gate").Fill(context.Background(), ds, smallTrain(t), 0, 0, []int64{0}, Drop, &b)
	}()
	<-g.started
	return g
}

// hangGuard bounds the waits of these tests for something the executor's
// goroutines do: each returns as soon as it happens, and the bound only
// turns a hang into a failure, on however slow a machine.
const hangGuard = time.Minute

// waitPending waits until q has n samples queued.
func waitPending(t *testing.T, q *Queue, n int) {
	t.Helper()
	pending := func() string { return fmt.Sprintf("%d pending", q.Pending()) }
	waitfor.Wait{Within: hangGuard, State: pending, Every: time.Millisecond}.Until(t,
		fmt.Sprintf("queue %q with %d samples pending", q.Name(), n), func() bool { return q.Pending() == n })
}

// fillAsync runs q.Fill on its own goroutine; the error comes on the channel.
func fillAsync(ctx context.Context, t *testing.T, q *Queue, ds dataset.Dataset, n int) <-chan error {
	done := make(chan error, 1)
	tr := smallTrain(t)
	go func() {
		var b Batch
		done <- q.Fill(ctx, ds, tr, 0, 0, seq(n), Drop, &b)
	}()
	return done
}

// waitPendingAtLeast waits until q has at least n samples queued.
func waitPendingAtLeast(t *testing.T, q *Queue, n int) {
	t.Helper()
	pending := func() string { return fmt.Sprintf("%d pending", q.Pending()) }
	waitfor.Wait{Within: hangGuard, State: pending, Every: time.Millisecond}.Until(t,
		fmt.Sprintf("queue %q with at least %d samples pending", q.Name(), n), func() bool { return q.Pending() >= n })
}

// waitFor polls cond until it holds, failing the test after d (a hang
// turned into a failure; no assertion rests on the time it takes).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.Wait{Within: d, Every: time.Millisecond}.Until(t, what, cond)
}

// prefetchDataset is a probeDataset that is a Prefetcher: it logs the hints
// and the reads in the order they come.
type prefetchDataset struct {
	probeDataset
	mu     sync.Mutex
	events []string
}

func (d *prefetchDataset) Prefetch(indices []int64) {
	d.mu.Lock()
	d.events = append(d.events, fmt.Sprint("hint ", indices))
	d.mu.Unlock()
}

// slowReads is memDataset whose every Read sleeps first: a disk or a store
// slower than the decoder.
type slowReads struct {
	memDataset
	d time.Duration
}

func (s slowReads) Read(i int, buf []byte) ([]byte, error) {
	time.Sleep(s.d)
	return s.memDataset.Read(i, buf)
}

// clipShards is an unlabelled WebDataset of image-text pairs, CLIP's
// layout: KEY.jpg beside KEY.txt and KEY.json, one caption in invalid
// UTF-8, one key with a caption and no image, one whose .json is over a
// small bound, and one with no .json.
func clipShards(t testing.TB) (dir string, captions map[string][]byte) {
	t.Helper()
	dir = t.TempDir()
	captions = map[string][]byte{}
	var members []tarMember
	for i := range 6 {
		key := fmt.Sprintf("s/%03d", i)
		jpg := encodeJPEG(testPicture(40+i, 32), 90)
		cap := []byte(fmt.Sprintf("a photo of thing %d", i))
		if i == 2 {
			cap = []byte{'c', 0xff, 0xfe, 'x'} // not UTF-8: passed through as is
		}
		captions[key] = cap
		members = append(members, tarMember{Name: key + ".jpg", Data: jpg}, tarMember{Name: key + ".txt", Data: cap})
		switch i {
		case 3:
			members = append(members, tarMember{Name: key + ".json", Data: bytes.Repeat([]byte("x"), 5000)})
		case 5:
		default:
			members = append(members, tarMember{Name: key + ".json", Data: []byte(fmt.Sprintf(`{"i": %d}`, i))})
		}
	}
	members = append(members, tarMember{Name: "s/999.txt", Data: []byte("a caption without its image")})
	captions["s/999"] = []byte("a caption without its image")
	writeShard(t, filepath.Join(dir, "clip-000.tar"), members)
	return dir, captions
}

func openDirStore(t *testing.T, dir string) source.Store {
	t.Helper()
	st, err := source.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
