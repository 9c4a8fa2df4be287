//go:build cgo

package pipeline

import (
	"context"
	"testing"
	"time"
)

// TestBackgroundQueue: one worker; a background queue loaded first, with
// the largest weight there is, gets no sample while the
// foreground queue has one waiting, and all of the worker once it has
// none (the executor stays work-conserving).
func TestBackgroundQueue(t *testing.T) {
	e := NewExecutor(1)
	defer e.Close()
	var log readLog
	fg, bg := e.Queue("fg"), e.Queue("bg")
	bg.SetBackground(true)
	bg.SetWeight(maxWeight)
	if !bg.Background() || fg.Background() {
		t.Fatalf("background: fg %v, bg %v", fg.Background(), bg.Background())
	}
	g := holdWorker(t, e)
	const n = 50
	db := fillAsync(context.Background(), t, bg, &probeDataset{name: "bg", n: n, onRead: log.add}, n)
	waitPending(t, bg, n)
	df := fillAsync(context.Background(), t, fg, &probeDataset{name: "fg", n: n, onRead: log.add}, n)
	waitPending(t, fg, n)
	close(g.release)
	for _, c := range []<-chan error{g.done, df, db} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	for k, name := range log.names {
		if want := map[bool]string{true: "fg", false: "bg"}[k < n]; name != want {
			t.Fatalf("sample %d taken from %s, want %s: %v", k, name, want, log.names)
		}
	}
	// Every foreground sample was taken while background ones waited.
	if fc, bc := fg.Contested(), bg.Contested(); fc != n || bc != 0 {
		t.Errorf("contested samples: fg %d, bg %d; want %d and 0", fc, bc, n)
	}
	// Back in the foreground, at the foreground's clock: the two share by
	// weight again (here 1:1, alternating).
	bg.SetBackground(false)
	bg.SetWeight(1)
	fg.SetWeight(1)
	log.names = nil
	g = holdWorker(t, e)
	db = fillAsync(context.Background(), t, bg, &probeDataset{name: "bg", n: n, onRead: log.add}, n)
	waitPending(t, bg, n)
	df = fillAsync(context.Background(), t, fg, &probeDataset{name: "fg", n: n, onRead: log.add}, n)
	waitPending(t, fg, n)
	close(g.release)
	for _, c := range []<-chan error{g.done, df, db} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	f := 0
	for _, name := range log.names[:n] {
		if name == "fg" {
			f++
		}
	}
	if f < n/2-1 || f > n/2+1 {
		t.Errorf("both foreground, weights 1:1: fg got %d of the first %d samples", f, n)
	}
}

// TestQueueWaited: a queue's Waited is the time it had samples waiting for
// a worker: at least the span the test saw it held behind a busy worker,
// at most the span from before its Fill to after the last was taken;
// nothing more once none waits; 0 for a queue never given a sample. (Not
// in a synctest bubble: the executor recycles channels made outside it.)
func TestQueueWaited(t *testing.T) {
	e := NewExecutor(1)
	defer e.Close()
	q, idle := e.Queue("q"), e.Queue("idle")
	g := holdWorker(t, e)
	before := time.Now()
	done := fillAsync(context.Background(), t, q, &probeDataset{name: "q", n: 4}, 4)
	waitPending(t, q, 4)
	seen := time.Now()
	time.Sleep(20 * time.Millisecond)
	held := time.Since(seen)
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-g.done
	outer := time.Since(before)
	w := q.Waited()
	if w < held || w > outer {
		t.Errorf("waited %v; the test saw it wait %v, within %v", w, held, outer)
	}
	time.Sleep(5 * time.Millisecond)
	if again := q.Waited(); again != w {
		t.Errorf("waited %v, then %v with nothing queued", w, again)
	}
	if got := idle.Waited(); got != 0 {
		t.Errorf("a queue never given a sample waited %v", got)
	}
}
