package server

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/server/internal/limits"
)

// workClients is the memory that Work streams make this server keep,
// by client host: each host's is bounded by its share
// (--max-work-memory-per-client), and all of it comes out of the server's
// budget, beside the Feed streams' buffers.
type workClients struct {
	b        *limits.Budget
	perHost  int64
	refusals *refusalLog
	gauge    prometheus.Gauge // stoker_work_memory_bytes

	mu   sync.Mutex
	held map[string]int64
}

func newWorkClients(b *limits.Budget, perHost int64, refusals *refusalLog, gauge prometheus.Gauge) *workClients {
	return &workClients{b: b, perHost: perHost, refusals: refusals, gauge: gauge, held: make(map[string]int64)}
}

// workMemoryPerClient is MaxWorkMemoryPerClient resolved against the
// batch budget: a quarter of it by default, never more than all of it.
func workMemoryPerClient(configured, batchBudget int64) int64 {
	if configured <= 0 {
		return batchBudget / 4
	}
	return min(configured, batchBudget)
}

// open is one Work stream's account, of the client at host.
func (c *workClients) open(host string) *workAccount {
	return &workAccount{c: c, host: host}
}

// heldBy is what host's Work streams hold.
func (c *workClients) heldBy(host string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[host]
}

// take takes n bytes for host, within its share and the server's budget.
func (c *workClients) take(host string, n int64, what string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held := c.held[host]; held+n > c.perHost {
		c.refusals.refuse("work_memory_per_client", "Work request refused: the client's memory share", "client", host, "what", what, "bytes", n, "held", held, "limit", c.perHost)
		return status.Errorf(codes.ResourceExhausted, "client %s: %s needs %d bytes; its Work streams hold %d of the %d bytes a client may (--max-work-memory-per-client)",
			host, what, n, held, c.perHost)
	}
	if !c.b.Try(n) {
		used := c.b.InUse()
		c.refusals.refuse("memory_budget", "Work request refused: memory budget", "client", host, "what", what, "bytes", n, "in_use", used)
		return status.Errorf(codes.ResourceExhausted, "memory budget: %s needs %d bytes; %d of the server's %d bytes are in use (--memory-budget)",
			what, n, used, c.b.Limit())
	}
	c.held[host] += n
	c.gauge.Add(float64(n))
	return nil
}

// release gives n of host's bytes back.
func (c *workClients) release(host string, n int64) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	if c.held[host] -= n; c.held[host] <= 0 {
		delete(c.held, host)
	}
	c.mu.Unlock()
	c.gauge.Sub(float64(n))
	c.b.Release(n)
}

// workAccount is one Work stream's work.Memory: what it holds is its
// client's and the server's. close gives back what the stream still
// holds when it ends.
type workAccount struct {
	c    *workClients
	host string

	mu   sync.Mutex
	held int64
}

var _ work.Memory = (*workAccount)(nil)

// Take takes n bytes for what, or refuses them with RESOURCE_EXHAUSTED.
func (a *workAccount) Take(n int64, what string) error {
	if n <= 0 {
		return nil
	}
	if err := a.c.take(a.host, n, what); err != nil {
		return err
	}
	a.mu.Lock()
	a.held += n
	a.mu.Unlock()
	return nil
}

// Release gives n of the held bytes back.
func (a *workAccount) Release(n int64) {
	a.mu.Lock()
	n = min(n, a.held)
	a.held -= n
	a.mu.Unlock()
	a.c.release(a.host, n)
}

// close gives back everything still held.
func (a *workAccount) close() {
	a.mu.Lock()
	n := a.held
	a.held = 0
	a.mu.Unlock()
	a.c.release(a.host, n)
}
