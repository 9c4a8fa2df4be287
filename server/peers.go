package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/makers"
)

// peerTarget is a parsed Config.Peers: a fixed list of addresses, or a DNS
// name re-resolved (every address it resolves to is a peer, on port).
type peerTarget struct {
	static   []string
	host     string
	port     string
	resolver string // "host:port" of the DNS server; empty: the system's
}

// parsePeers parses "ADDR,ADDR,…", "dns:///NAME:PORT" or
// "dns://RESOLVER/NAME:PORT" (grpc-go's form). Empty is no peers.
func parsePeers(s string) (peerTarget, error) {
	var t peerTarget
	if s == "" {
		return t, nil
	}
	if strings.HasPrefix(s, "dns:") {
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "dns" {
			return t, fmt.Errorf("peers %q: want dns:///NAME:PORT or dns://RESOLVER:PORT/NAME:PORT", s)
		}
		t.resolver = u.Host
		if t.resolver != "" {
			if _, _, err := net.SplitHostPort(t.resolver); err != nil {
				t.resolver = net.JoinHostPort(t.resolver, "53")
			}
		}
		host, port, err := net.SplitHostPort(strings.TrimPrefix(u.Path, "/"))
		if err != nil || host == "" || port == "" {
			return t, fmt.Errorf("peers %q: want dns:///NAME:PORT (the port is needed)", s)
		}
		t.host, t.port = host, port
		return t, nil
	}
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return t, fmt.Errorf("peers: %q is not HOST:PORT", a)
		}
		if !slices.Contains(t.static, a) {
			t.static = append(t.static, a)
		}
	}
	return t, nil
}

// peerMaker is a maker over a work.Peer.
type peerMaker struct {
	p *work.Peer

	mu       sync.Mutex
	forwards map[coord.Job]*work.Job
}

var _ coord.Maker = (*peerMaker)(nil)

func (m *peerMaker) Name() string  { return m.p.Addr() }
func (m *peerMaker) Trusted() bool { return false }
func (m *peerMaker) Remote() bool  { return true }
func (m *peerMaker) Free() int     { return m.p.Free() }
func (m *peerMaker) Ready() bool   { return m.p.Ready() }

// Connection changes each time the peer's Work stream comes up: its
// verification starts strict again (verify.go).
func (m *peerMaker) Connection() uint64 { return m.p.Streams() }

// Unavailable says why the peer takes no leases: its last connection or
// stream error ("Unauthenticated: …", "TLS: …", "decoder differs: …"),
// nil while it is Ready (and before its first attempt ended).
func (m *peerMaker) Unavailable() error { return m.p.LastError() }

func (m *peerMaker) Make(ctx context.Context, j coord.Job, l *lease.Lease, b *pipeline.Batch) (lease.Made, error) {
	return m.p.Make(ctx, m.forward(j), l, b)
}

// forward is the job as forwarded: the trainer's spec, with the dataset's
// fingerprint, so a worker with other data refuses it. One per job, so the
// peer registers it once.
func (m *peerMaker) forward(cj coord.Job) *work.Job {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.forwards[cj]
	if f == nil {
		j := makers.JobOf(cj)
		f = &work.Job{Spec: j.ForwardSpec(), SampleBytes: j.Transform().SampleBytes(), Layout: j.Transform().ViewLayout(), Fields: j.Fields()}
		m.forwards[cj] = f
	}
	return f
}

func (m *peerMaker) Forget(j coord.Job) {
	m.mu.Lock()
	f := m.forwards[j]
	delete(m.forwards, j)
	m.mu.Unlock()
	if f != nil {
		m.p.Forget(f)
	}
}

// discovery keeps the server's peer makers in step with its peer target.
type discovery struct {
	s     *Server
	t     peerTarget
	peers map[string]*peerMaker
	stop  context.CancelFunc
	done  chan struct{}
	// retiring are the peers that left the set and finish their leases in
	// flight (Peer.Retire); closing abort closes them at once.
	retiring sync.WaitGroup
	abort    chan struct{}
	lookup   func(ctx context.Context, host string) ([]string, error)

	// gone are the peers retired (closed), by when: their metric series
	// are deleted at every refresh for a lease timeout after, so that a
	// result counted late for them does not leave a series behind (DNS
	// churn must not grow the series without bound).
	mu   sync.Mutex
	gone map[string]time.Time
}

// startDiscovery dials the static peers, or starts resolving the DNS name
// every cfg.PeerRefresh.
func (s *Server) startDiscovery(t peerTarget) *discovery {
	ctx, stop := context.WithCancel(context.Background())
	d := &discovery{s: s, t: t, peers: make(map[string]*peerMaker), stop: stop, done: make(chan struct{}), abort: make(chan struct{}),
		gone: make(map[string]time.Time)}
	r := net.DefaultResolver
	if t.resolver != "" {
		r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, network, t.resolver)
		}}
	}
	d.lookup = r.LookupHost
	if s.cfg.lookup != nil {
		d.lookup = s.cfg.lookup
	}
	go d.run(ctx)
	return d
}

func (d *discovery) run(ctx context.Context) {
	defer close(d.done)
	if d.t.static != nil {
		d.update(d.t.static)
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(d.s.cfg.PeerRefresh)
	defer tick.Stop()
	var last string
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		hosts, err := d.lookup(lctx, d.t.host)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// NXDOMAIN: no peers now (a headless Service with no ready
			// pods); a failed lookup keeps the last set.
			if dnsErr, ok := err.(*net.DNSError); ok && dnsErr.IsNotFound {
				d.update(nil)
			}
			if msg := err.Error(); msg != last {
				d.s.log.Warn("peer lookup", "name", d.t.host, "err", err)
				last = msg
			}
		default:
			last = ""
			addrs := make([]string, len(hosts))
			for i, h := range hosts {
				addrs[i] = net.JoinHostPort(h, d.t.port)
			}
			d.update(addrs)
		}
		d.forgetGone()
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// update makes the peer set addrs: new addresses are dialed; gone ones
// get no new lease and are closed once they have answered those in flight
// (at most a lease timeout: then those fail and go to other makers).
func (d *discovery) update(addrs []string) {
	s := d.s
	for _, a := range addrs {
		if d.peers[a] != nil {
			continue
		}
		m := &peerMaker{forwards: make(map[coord.Job]*work.Job)}
		opts := append(s.peerDial(a), work.WithIdentity(s.cfg.decoderIdentity()),
			work.WithFreed(func() { s.makers.Freed(m) }),
			work.WithDecoderRefused(func(error) { s.m.coord.LeaseFailures.WithLabelValues(a, "decoder").Inc() }),
			work.WithErrors(func(err error) {
				if errors.Is(err, work.ErrDecoder) {
					s.log.Warn("peer refused: its decoder would make other bytes than ours; it gets no lease", "addr", a, "err", err)
					return
				}
				s.log.Warn("peer unavailable", "addr", a, "err", err)
			}))
		p, err := work.Dial(a, s.makers.Poke, opts...)
		if err != nil {
			s.log.Warn("peer", "addr", a, "err", err)
			continue
		}
		m.p = p
		d.peers[a] = m
		s.makers.Add(m)
		s.log.Info("peer added", "addr", a)
	}
	for a, m := range d.peers {
		if slices.Contains(addrs, a) {
			continue
		}
		delete(d.peers, a)
		s.makers.Remove(m)
		d.retiring.Add(1)
		held := m.p.InFlight()
		go func() {
			defer d.retiring.Done()
			n := m.p.Retire(s.cfg.LeaseTimeout, d.abort)
			s.verify.Forget(m) // a quarantine lasts while the peer is in the set
			s.log.Info("peer retired", "addr", a, "in_flight_at_removal", held, "unfinished", n)
			d.mu.Lock()
			d.gone[a] = time.Now()
			d.mu.Unlock()
		}()
		s.log.Info("peer removed", "addr", a)
	}
	s.makers.Poke()
}

// forgetGone deletes the metric series of the peers retired, until a lease
// timeout after they were closed; a peer back in the set keeps its own.
func (d *discovery) forgetGone() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for a, at := range d.gone {
		if d.peers[a] == nil {
			d.s.m.coord.ForgetMaker(a)
		}
		if d.peers[a] != nil || time.Since(at) > d.s.cfg.LeaseTimeout {
			delete(d.gone, a)
		}
	}
}

// close stops discovery and closes every peer, retiring ones too.
func (d *discovery) close() {
	d.stop()
	<-d.done
	close(d.abort)
	d.update(nil)
	d.retiring.Wait()
}

// remotePeers are the peers of t not on loopback, as the flag names them:
// static addresses, or the dns:/// name unless it is localhost (or a
// loopback IP).
func remotePeers(t peerTarget) []string {
	var out []string
	if t.host != "" && !rpc.IsLoopback(net.JoinHostPort(t.host, t.port)) {
		out = append(out, "dns:///"+net.JoinHostPort(t.host, t.port))
	}
	for _, a := range t.static {
		if !rpc.IsLoopback(a) {
			out = append(out, a)
		}
	}
	return out
}

// peerDialer returns the options a peer at addr is dialed with: TLS with
// the peers' CA (and this server's certificate) when PeerCA is set, and
// the peer token when PeerTokenFile is.
func peerDialer(cfg Config) (func(addr string) []work.Option, error) {
	var base []work.Option
	if cfg.PeerCA != "" {
		cert, key := cfg.PeerCert, cfg.PeerKey
		if cert == "" {
			cert, key = cfg.TLSCert, cfg.TLSKey
		}
		tc, err := peerTLS(cfg.PeerCA, cert, key)
		if err != nil {
			return nil, fmt.Errorf("peers: %w", err)
		}
		// A dns:/// target's addresses are what its name resolves to (pod
		// IPs, which no certificate made ahead of time can name): the
		// workers' certificates are checked against the name instead.
		if t, _ := parsePeers(cfg.Peers); t.host != "" {
			tc.ServerName = strings.TrimSuffix(t.host, ".")
		}
		base = append(base, work.WithCredentials(credentials.NewTLS(tc)))
	}
	token := ""
	if cfg.PeerTokenFile != "" {
		var err error
		if token, err = ReadToken(cfg.PeerTokenFile); err != nil {
			return nil, fmt.Errorf("peers: %w", err)
		}
	}
	return func(addr string) []work.Option {
		if token == "" {
			return slices.Clip(base)
		}
		return append(slices.Clip(base), work.WithDialOptions(grpc.WithPerRPCCredentials(rpc.TokenCredentials(token, addr, cfg.PeerInsecureToken))))
	}, nil
}

// peerErrors is what Validate finds wrong with --peers and its token.
func (c Config) peerErrors() []error {
	var errs []error
	if t, err := parsePeers(c.Peers); err != nil {
		errs = append(errs, err)
	} else if remote := remotePeers(t); c.PeerTokenFile != "" && c.PeerCA == "" && !c.PeerInsecureToken && len(remote) > 0 {
		// Every call to these peers would be refused by the token
		// credentials, and the trainer would wait for batches no peer makes.
		errs = append(errs, fmt.Errorf("peers: the --peer-token-file token would go in plaintext to %s (not loopback), which is refused at every call: "+
			"add --peer-ca (TLS to the peers) or, on a network you trust, --peer-insecure-token", strings.Join(remote, ", ")))
	}
	return errs
}

// tlsErrors is what Validate finds wrong with the TLS flags, the
// trainers' side and the peers', and the peers' refresh.
func (c Config) tlsErrors() []error {
	var errs []error
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("tls: give both --tls-cert and --tls-key, or neither"))
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("tls: --tls-client-ca (mutual TLS) needs --tls-cert and --tls-key"))
	}
	if (c.PeerCert == "") != (c.PeerKey == "") || c.PeerCert != "" && c.PeerCA == "" {
		errs = append(errs, errors.New("tls: --peer-cert and --peer-key go together, with --peer-ca"))
	}
	if c.PeerRefresh < 0 {
		errs = append(errs, fmt.Errorf("peer refresh %v: want > 0", c.PeerRefresh))
	}
	return errs
}
