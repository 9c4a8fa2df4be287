package work

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// What a Work client makes a worker keep, and what it is charged for it:
// its jobs' state, its leases' batches, the buffers kept for its next
// leases. Each is taken from the stream's Memory before it is kept and
// given back when it goes, so that a client holds no more of the server's
// memory than its share, whatever it sends.

// jobBytes is what the worker itself keeps of a job beyond its queue's
// StateBytes (its workJob and its place in the stream's maps), and what a
// refused job is charged besides its error's message.
const jobBytes = 256

// slotIndexBytes is a batch buffer's bytes per sample beyond its pixels:
// its labels and indices, and the lease's own indices while it is made.
const slotIndexBytes = 3 * 8

// maxClaimedWork caps the GPU seconds per sample a lease may claim for
// its trainer: more than any real step costs per sample.
const maxClaimedWork = 10.0

// slot is a batch buffer a stream keeps for its leases, and the bytes it
// is charged for: as much as it was grown to, while it keeps it.
type slot struct {
	b    pipeline.Batch
	held int64
}

// register validates and keeps job id, charging its state to the stream's
// Memory; a job that does not fit ends the stream, with the refusal, and
// its queue is returned for the caller to close once it has let go of
// recvMu (a close waits for the samples being made). Called with recvMu
// held.
func (w *workStream) register(m *stokerv1.WorkJob) (refused JobQueue, err error) {
	id := m.GetId()
	switch {
	case id <= w.lastJob:
		return nil, status.Errorf(codes.InvalidArgument, "job %d: registered after job %d (job ids increase on a stream)", id, w.lastJob)
	case len(w.jobs) >= maxWorkJobs:
		return nil, status.Errorf(codes.InvalidArgument, "job %d: more than %d jobs alive on one Work stream (end jobs with JobEnd)", id, maxWorkJobs)
	}
	w.lastJob = id
	wj := &workJob{id: id, bytes: jobBytes}
	q, err := w.cfg.Host.Open(m.GetSpec(), w.name+"/"+strconv.FormatUint(id, 10), w.client)
	if err != nil {
		w.cfg.Log.Warn("work job refused", "job", id, "err", err)
		wj.err = err
		wj.bytes += int64(len(err.Error()))
	} else {
		wj.q = q
		wj.bytes += q.StateBytes()
	}
	if err := w.mem.Take(wj.bytes, fmt.Sprintf("job %d's state", id)); err != nil {
		return q, err // nil when Open refused the job
	}
	w.jobs[id] = wj
	w.byLast.touch(wj, time.Now())
	w.cfg.Metrics.Jobs.Inc()
	return nil, nil
}

// grow makes s hold a batch of n samples of size bytes, charging the
// stream's Memory for what it grows by. Called with recvMu held.
func (w *workStream) grow(s *slot, n, size int, lease uint64) error {
	need := int64(n) * (int64(size) + slotIndexBytes)
	if need <= s.held {
		return nil
	}
	if err := w.mem.Take(need-s.held, fmt.Sprintf("lease %d's batch of %d samples", lease, n)); err != nil {
		return err
	}
	s.held = need
	return nil
}

// freeIdleSlots drops the batch buffers kept for reuse, and gives their
// bytes back, when no lease came since the last call and none is pending:
// a stream that stopped leasing keeps no memory for leases it may never
// send. Buffers still lent to gRPC are dropped at a later call.
func (w *workStream) freeIdleSlots() {
	w.recvMu.Lock()
	defer w.recvMu.Unlock()
	busy := w.leases != w.slotsFreedAt || w.pending.Load() > 0
	w.slotsFreedAt = w.leases
	if busy {
		return
	}
	for range cap(w.slots) {
		select {
		case s := <-w.slots:
			w.mem.Release(s.held)
			*s = slot{}
			w.slots <- s
		default:
			return
		}
	}
}

// releaseSlots gives back every slot's bytes, once the stream has ended.
func (w *workStream) releaseSlots() {
	w.recvMu.Lock()
	defer w.recvMu.Unlock()
	for _, s := range w.all {
		w.mem.Release(s.held)
		s.held = 0
	}
}

// claimed is the demand a lease claims for its job, capped: a stall
// within 0..1 and GPU work per sample within 0..maxClaimedWork (NaN: 0,
// unknown). The worker believes no more of it than it measures of the
// client (the server's stall schedule caps it so).
func claimed(l *stokerv1.Lease) lease.Demand {
	d := lease.Demand{Stall: l.GetStall(), Work: l.GetWork()}
	if !(d.Stall >= 0) { // NaN too
		d.Stall = 0
	}
	if !(d.Work >= 0) || math.IsInf(d.Work, 0) {
		d.Work = 0
	}
	return lease.Demand{Stall: min(d.Stall, 1), Work: min(d.Work, maxClaimedWork)}
}

// jobList is a stream's jobs, the one a lease named longest ago first.
type jobList struct{ head, tail *workJob }

// touch marks wj as named by a lease at now: it goes to the back.
func (l *jobList) touch(wj *workJob, now time.Time) {
	wj.last = now
	if l.tail == wj {
		return
	}
	if wj.prev != nil || l.head == wj {
		l.remove(wj)
	}
	wj.prev, l.tail = l.tail, wj
	if wj.prev != nil {
		wj.prev.next = wj
	} else {
		l.head = wj
	}
}

// remove takes wj out of the list.
func (l *jobList) remove(wj *workJob) {
	if wj.prev != nil {
		wj.prev.next = wj.next
	} else if l.head == wj {
		l.head = wj.next
	}
	if wj.next != nil {
		wj.next.prev = wj.prev
	} else if l.tail == wj {
		l.tail = wj.prev
	}
	wj.prev, wj.next = nil, nil
}
