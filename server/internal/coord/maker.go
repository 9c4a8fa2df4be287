package coord

import (
	"context"
	"slices"
	"sync"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline/batch"
)

// A Maker makes batches for coordinators: the local executor is one, each
// peer server another. Make is called concurrently, by many coordinators.
type Maker interface {
	// Make makes the batch l names of job j into b, reusing b's buffers;
	// given l.Place (a part of a batch, leased by cache affinity) it puts
	// each sample at its place in b.Data, the whole batch's. It returns
	// when the batch is made, when it failed, or when ctx ends (the
	// lease's deadline or the job's end), and after it returns it never
	// touches b again. A peer answers the pixels of l.Keep's slots as
	// they arrived (Made.Kept), for the Verifier. An error that is the
	// job's fault, not the maker's (the maker refuses the job), wraps
	// lease.ErrRefused; one that says the maker is full wraps
	// lease.ErrBusy, and one that it is shutting down lease.ErrDraining:
	// neither is a failure.
	Make(ctx context.Context, j Job, l *lease.Lease, b *batch.Batch) (lease.Made, error)
	// Name says which maker it is in logs and metrics: "local" or the
	// peer's address.
	Name() string
	// Trusted reports whether the maker's batches are taken as made: the
	// coordinator's own server's executor. A batch of a maker not trusted
	// (a peer) is verified (Verifier), slots of it kept aside for that
	// (lease.Lease.Keep).
	Trusted() bool
	// Remote reports whether the maker is another server, reached over
	// the network: its lease time includes the wire (where the job's time
	// goes: peer and network, stages.go, rather than its samples' stage
	// times), and it is one of the peers a pool must provide
	// (stoker_peers_recommended).
	Remote() bool
	// Free is how many more leases the maker would take now, from all
	// jobs together. A Make past it may fail with lease.ErrBusy.
	Free() int
	// Ready reports whether the maker can take leases now (a peer that is
	// not connected cannot).
	Ready() bool
	// Forget drops what the maker keeps about a job that ended.
	Forget(j Job)
}

// A whyNot maker can say why it is not ready (a peer: its last connection
// or handshake error).
type whyNot interface {
	Unavailable() error
}

// Makers is the server's set of makers, shared by its coordinators. Peers
// come and go as discovery finds them. Two wake-ups reach coordinators: a
// change of the set or of a maker's readiness (Add, Remove, Poke) wakes
// every coordinator, through the channel snapshot returns; room freed on
// one maker (Freed) wakes only the coordinators waiting for room on it.
type Makers struct {
	mu      sync.Mutex
	list    []Maker
	changed chan struct{}
	// waiting are the coordinators' wake channels (size 1) by the full
	// maker they wait for room on.
	waiting map[Maker]map[chan<- struct{}]bool
}

// NewMakers returns a set of ms.
func NewMakers(ms ...Maker) *Makers {
	return &Makers{list: ms, changed: make(chan struct{}), waiting: make(map[Maker]map[chan<- struct{}]bool)}
}

// Snapshot returns the current makers and a channel closed at the next
// change.
func (s *Makers) Snapshot() ([]Maker, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list, s.changed
}

// Add adds m.
func (s *Makers) Add(m Maker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(slices.Clip(s.list), m)
	s.changedLocked()
}

// Remove removes m.
func (s *Makers) Remove(m Maker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = slices.DeleteFunc(slices.Clone(s.list), func(x Maker) bool { return x == m })
	s.wakeLocked(m) // its waiters look again, elsewhere
	s.changedLocked()
}

// Poke wakes every coordinator: a maker's readiness changed (a peer
// connected or went, a quarantine).
func (s *Makers) Poke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changedLocked()
}

func (s *Makers) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Freed wakes the coordinators waiting for room on m: one of its leases
// ended.
func (s *Makers) Freed(m Maker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeLocked(m)
}

func (s *Makers) wakeLocked(m Maker) {
	for wake := range s.waiting[m] {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	delete(s.waiting, m)
}

// waitFree has wake (size 1) poked at m's next Freed. The caller looks at
// m.Free again after it, so that room freed just before is not missed.
func (s *Makers) waitFree(m Maker, wake chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.waiting[m]
	if w == nil {
		w = make(map[chan<- struct{}]bool)
		s.waiting[m] = w
	}
	w[wake] = true
}

// unwait forgets wake wherever it waits (its coordinator ended).
func (s *Makers) unwait(wake chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for m, w := range s.waiting {
		delete(w, wake)
		if len(w) == 0 {
			delete(s.waiting, m)
		}
	}
}
