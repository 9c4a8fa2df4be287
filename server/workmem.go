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
// by client (rpc.LimitID: its certificate's subject, else its host):
// each client's is bounded by its share
// (--max-work-memory-per-client), and all of it comes out of the server's
// budget, beside the Feed streams' buffers.
type workClients struct {
	b         *limits.Budget
	perClient int64
	refusals  *refusalLog
	gauge     prometheus.Gauge // stoker_work_memory_bytes

	mu   sync.Mutex
	held map[string]int64
}

func newWorkClients(b *limits.Budget, perClient int64, refusals *refusalLog, gauge prometheus.Gauge) *workClients {
	return &workClients{b: b, perClient: perClient, refusals: refusals, gauge: gauge, held: make(map[string]int64)}
}

// workMemoryPerClient is MaxWorkMemoryPerClient resolved against the
// batch budget: a quarter of it by default, never more than all of it.
func workMemoryPerClient(configured, batchBudget int64) int64 {
	if configured <= 0 {
		return batchBudget / 4
	}
	return min(configured, batchBudget)
}

// open is one Work stream's account, of client.
func (c *workClients) open(client string) *workAccount {
	return &workAccount{c: c, client: client}
}

// heldBy is what client's Work streams hold.
func (c *workClients) heldBy(client string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[client]
}

// take takes n bytes for client, within its share and the server's budget.
func (c *workClients) take(client string, n int64, what string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held := c.held[client]; held+n > c.perClient {
		c.refusals.refuse("work_memory_per_client", "Work request refused: the client's memory share", "client", client, "what", what, "bytes", n, "held", held, "limit", c.perClient)
		return status.Errorf(codes.ResourceExhausted, "client %s: %s needs %d bytes; its Work streams hold %d of the %d bytes a client may (--max-work-memory-per-client)",
			client, what, n, held, c.perClient)
	}
	if !c.b.Try(n) {
		used := c.b.InUse()
		c.refusals.refuse("memory_budget", "Work request refused: memory budget", "client", client, "what", what, "bytes", n, "in_use", used)
		return status.Errorf(codes.ResourceExhausted, "memory budget: %s needs %d bytes; %d of the server's %d bytes are in use (--memory-budget)",
			what, n, used, c.b.Limit())
	}
	c.held[client] += n
	c.gauge.Add(float64(n))
	return nil
}

// release gives n of client's bytes back.
func (c *workClients) release(client string, n int64) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	if c.held[client] -= n; c.held[client] <= 0 {
		delete(c.held, client)
	}
	c.mu.Unlock()
	c.gauge.Sub(float64(n))
	c.b.Release(n)
}

// workAccount is one Work stream's work.Memory: what it holds is its
// client's and the server's. close gives back what the stream still
// holds when it ends.
type workAccount struct {
	c      *workClients
	client string

	mu   sync.Mutex
	held int64
}

var _ work.Memory = (*workAccount)(nil)

// Take takes n bytes for what, or refuses them with RESOURCE_EXHAUSTED.
func (a *workAccount) Take(n int64, what string) error {
	if n <= 0 {
		return nil
	}
	if err := a.c.take(a.client, n, what); err != nil {
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
	a.c.release(a.client, n)
}

// close gives back everything still held.
func (a *workAccount) close() {
	a.mu.Lock()
	n := a.held
	a.held = 0
	a.mu.Unlock()
	a.c.release(a.client, n)
}
