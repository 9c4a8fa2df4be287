package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a fault-injecting HTTP proxy listening on 127.0.0.1.
type Proxy struct {
	target     *url.URL
	targetHost bool // send the store's Host (TargetHost)
	ln         net.Listener
	srv        *http.Server
	rp         *httputil.ReverseProxy // the untouched requests
	cut        *httputil.ReverseProxy // Truncate and StallBody: flushes every write
	tr         *http.Transport

	plan atomic.Pointer[plan]

	rngMu sync.Mutex
	rng   *rand.Rand

	ctx    context.Context // every request's; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex // guards closed and the adding to active
	closed  bool
	active  sync.WaitGroup
	stopped chan struct{} // Serve has returned

	requests, matched, upstreamErrs atomic.Int64
	faults                          [numKinds]atomic.Int64
}

// copyBuffers are the reverse proxies' body copy buffers, shared so that a
// benchmark's thousands of GETs do not each allocate one.
var copyBuffers = &bufferPool{pool: sync.Pool{New: func() any { return make([]byte, 32<<10) }}}

type bufferPool struct{ pool sync.Pool }

func (b *bufferPool) Get() []byte  { return b.pool.Get().([]byte) }
func (b *bufferPool) Put(x []byte) { b.pool.Put(x) }

// Stats counts what the proxy has done since it started.
type Stats struct {
	// Requests is every request received.
	Requests int64
	// Matched is the requests Plan.Only selected, those faults may hit.
	Matched int64
	// Faults is the faults injected, by kind (kinds with none left out).
	Faults map[Kind]int64
	// UpstreamErrors is the requests the store did not answer (refused,
	// reset, timed out), each answered 502 Bad Gateway.
	UpstreamErrors int64
}

// Total is the faults injected, of every kind.
func (s Stats) Total() int64 {
	var n int64
	for _, c := range s.Faults {
		n += c
	}
	return n
}

// Option changes how a Proxy forwards.
type Option func(*Proxy)

// TargetHost has the proxy send the store's own Host instead of the
// client's: for a store that routes by Host and checks no signature
// (fake-gcs-server serves its XML API, the Go GCS client's reads, only to
// requests for its public host). Never for S3: SigV4 signs the Host.
func TargetHost() Option { return func(p *Proxy) { p.targetHost = true } }

// New starts a proxy to the store at target (http://host:port) on a free
// port of 127.0.0.1, with faults drawn from a generator seeded with seed.
func New(target string, seed uint64, pl Plan, opts ...Option) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q is not a URL like http://127.0.0.1:9000 (%v)", target, err)
	}
	checked, err := pl.check()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		target:  u,
		ln:      ln,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stopped: make(chan struct{}),
		tr: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost:   256, // a benchmark's readers, each on its own connection
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true, // bytes and headers as the store sent them
		},
	}
	for _, o := range opts {
		o(p)
	}
	p.plan.Store(checked)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	// The reverse proxies log only a body copy that failed: the cuts made
	// here, or a client that went away. Neither is news to a test.
	quiet := log.New(io.Discard, "", 0)
	p.rp = &httputil.ReverseProxy{
		Rewrite: p.rewrite, Transport: p.tr, ErrorHandler: p.upstreamError, ErrorLog: quiet,
		BufferPool: copyBuffers,
	}
	p.cut = &httputil.ReverseProxy{
		Rewrite: p.rewrite, Transport: p.tr, ErrorHandler: p.upstreamError, ErrorLog: quiet,
		BufferPool:     copyBuffers,
		ModifyResponse: p.breakBody,
		FlushInterval:  -1, // the client has the headers and the half body before the cut
	}
	p.srv = &http.Server{
		Handler:     p,
		BaseContext: func(net.Listener) context.Context { return p.ctx },
	}
	go func() {
		defer close(p.stopped)
		p.srv.Serve(ln)
	}()
	return p, nil
}

// URL is the proxy's endpoint, http://127.0.0.1:PORT, for the client.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetPlan replaces the plan, for the requests that arrive from now on.
func (p *Proxy) SetPlan(pl Plan) error {
	checked, err := pl.check()
	if err != nil {
		return err
	}
	p.plan.Store(checked)
	return nil
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	s := Stats{
		Requests:       p.requests.Load(),
		Matched:        p.matched.Load(),
		UpstreamErrors: p.upstreamErrs.Load(),
		Faults:         map[Kind]int64{},
	}
	for k := None + 1; k < numKinds; k++ {
		if n := p.faults[k].Load(); n > 0 {
			s.Faults[k] = n
		}
	}
	return s
}

// Close stops the proxy: it closes the listener and every connection,
// ends the requests it holds (stalls included), and returns once no
// request of its is running.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return nil
	}
	p.cancel()
	err := p.srv.Close()
	p.ln.Close() // in case Serve had not taken it yet
	<-p.stopped
	p.active.Wait()
	p.tr.CloseIdleConnections()
	return err
}

// ServeHTTP adds the plan's latency, draws the request's fault and
// injects it, or sends the request on to the store.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		abort()
	}
	p.active.Add(1)
	p.mu.Unlock()
	defer p.active.Done()

	p.requests.Add(1)
	pl := p.plan.Load()
	if pl.latency > 0 && !p.hold(r.Context(), pl.latency) {
		abort()
	}
	kind := None
	if pl.only == nil || pl.only(r) {
		p.matched.Add(1)
		kind = p.draw(pl)
	}
	switch kind {
	case None:
		p.rp.ServeHTTP(w, r)
	case SlowDown, TooManyRequests, InternalError:
		p.count(kind)
		writeError(w, r, kind)
	case Reset:
		p.count(kind)
		reset(w)
	case Stall:
		p.count(kind)
		if !p.hold(r.Context(), pl.stallFor) {
			abort()
		}
		p.rp.ServeHTTP(w, r)
	case Truncate, StallBody:
		// Counted by breakBody, once the store has answered.
		r = r.WithContext(context.WithValue(r.Context(), bodyFaultKey{}, bodyFault{kind, pl.stallFor}))
		p.cut.ServeHTTP(w, r)
	}
}

// draw picks the fault for a selected request.
func (p *Proxy) draw(pl *plan) Kind {
	if pl.down != None {
		return pl.down
	}
	if !pl.anyRate {
		return None
	}
	p.rngMu.Lock()
	u := p.rng.Float64()
	p.rngMu.Unlock()
	for k := None + 1; k < numKinds; k++ {
		if u -= pl.rates[k]; u < 0 {
			return k
		}
	}
	return None
}

func (p *Proxy) count(k Kind) { p.faults[k].Add(1) }

// abort ends a request the client gave up on or Close ended: the server
// closes its connection. Returning instead would send an empty 200.
func abort() { panic(http.ErrAbortHandler) }

// hold waits d (0: without end) and says whether it did: false when the
// request's context ended first (the client gave up, or Close).
func (p *Proxy) hold(ctx context.Context, d time.Duration) bool {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-ctx.Done():
		return false
	}
}

// rewrite sends the request to the store as the client sent it, Host
// included: SigV4 signed that Host, the proxy's address.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.target) // and the store's Host
	if !p.targetHost {
		pr.Out.Host = pr.In.Host
	}
}

// upstreamError answers a request the store did not answer.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errResetInstead) {
		reset(w)
		return
	}
	if r.Context().Err() != nil {
		return // the client is gone, or the proxy is closing: nobody to tell
	}
	p.upstreamErrs.Add(1)
	http.Error(w, "faultproxy: the store did not answer: "+err.Error(), http.StatusBadGateway)
}
