package coord

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/server/internal/coord/makertest"
)

// TestPartsConformance runs the makers' conformance suite against a batch
// in parts: a lessee that makes a whole batch as a maker does, each of its
// samples by one of three makers (sample i by maker i mod 3, at its place
// in the batch's buffer), two of them peers whose parts the verifier
// checks byte for byte. The makers under it are honest and fake; what is
// tested is the parts' lessee: that it honours the lease's context, and
// that once it returns no part writes to the batch.
func TestPartsConformance(t *testing.T) {
	makertest.Run(t, func(t *testing.T) makertest.Subject {
		g := newGate()
		var ms []Maker
		for i, name := range []string{"local", "peer-a", "peer-b"} {
			m := newMaker(name, 8)
			m.local = i == 0
			m.auto = g.fill
			ms = append(ms, m)
		}
		j := &fakeJob{n: 64, size: 8}
		v := &fakeVerifier{check: func(*lease.Lease) bool { return true }}
		c := New(testEnv(v, ms...), j, Stream{Epochs: 1, Memory: &memory{}}, "parts", discard)
		return makertest.Subject{
			Maker:       &partsMaker{c: c, ms: ms},
			Batch:       func(k int) []int64 { return j.Plan(0, 0).Batch(k) },
			SampleBytes: sampleBytes,
			Want: func(_ *testing.T, l *lease.Lease) *batch.Batch {
				var b batch.Batch
				fill(l, &b)
				return &b
			},
			Hold:        g.hold,
			ReturnsHeld: true, // each part's maker returns as its context ends
		}
	})
}

// partsMaker is a batch in parts as a makertest.Maker: each Make leases
// its batch in parts on the coordinator (which is not running: the
// adapter's lock stands for its goroutine, which issues and collects
// leases).
type partsMaker struct {
	c  *Coordinator
	ms []Maker
	mu sync.Mutex
}

func (p *partsMaker) Make(ctx context.Context, l *lease.Lease, b *batch.Batch) (lease.Made, error) {
	parts := make([]part, len(p.ms))
	for i, idx := range l.Indices {
		pt := &parts[i%len(p.ms)]
		pt.pos, pt.idx = append(pt.pos, i), append(pt.idx, idx)
	}
	for i := range parts {
		parts[i].m = p.ms[i]
	}
	p.mu.Lock()
	ip := p.c.newInParts(parts, l.Number)
	ip.issued(time.Now(), l)
	p.mu.Unlock()
	made := ip.make(ctx, ctx, l, b)
	p.mu.Lock()
	ip.ended()
	p.mu.Unlock()
	return lease.Made{}, made.err
}

func (p *partsMaker) Free() int {
	free := p.ms[0].Free()
	for _, m := range p.ms[1:] {
		free = min(free, m.Free())
	}
	return free
}

func (p *partsMaker) Ready() bool {
	for _, m := range p.ms {
		if !m.Ready() {
			return false
		}
	}
	return true
}

func (p *partsMaker) Forget() {
	for _, m := range p.ms {
		m.Forget(p.c.j)
	}
}

// gate holds the calls of scripted makers while it is shut: each says it
// is held and waits for the gate to open or its context to end; an open
// gate lets calls through, made honestly. A call whose context is done
// before it starts fails with the context's error, as a real maker's
// does (the executor's Fill, a Peer).
type gate struct {
	mu      sync.Mutex
	shut    chan struct{} // nil: open
	held    chan struct{}
	release func()
}

func newGate() *gate { return &gate{} }

func (g *gate) hold() (<-chan struct{}, func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	shut, held := make(chan struct{}), make(chan struct{}, 64)
	g.shut, g.held = shut, held
	var once sync.Once
	return held, func() {
		once.Do(func() {
			g.mu.Lock()
			g.shut = nil
			g.mu.Unlock()
			close(shut)
		})
	}
}

func (g *gate) fill(c *call) {
	if err := c.ctx.Err(); err != nil {
		c.answer <- err
		return
	}
	g.mu.Lock()
	shut, held := g.shut, g.held
	g.mu.Unlock()
	if shut != nil {
		select {
		case held <- struct{}{}:
		default:
		}
		select {
		case <-shut:
		case <-c.ctx.Done():
			c.answer <- c.ctx.Err()
			return
		}
	}
	c.made()
}
