// Package localnet holds what the tests and benchmarks that run real
// servers on loopback addresses share: a port free on several of them at
// once, and a DNS server that answers for one name, as a Kubernetes
// headless Service does.
package localnet

import (
	"net"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/stoker-dev/stoker/internal/freeport"
)

// FreePortOn returns a TCP port free on every one of hosts now
// (freeport.On, which the product binary's benchmarks use without this
// package's DNS server).
func FreePortOn(hosts ...string) (int, error) { return freeport.On(hosts...) }

// DNS is a DNS server on 127.0.0.1 that answers A queries for one name
// with a set of addresses its user changes, and NXDOMAIN for every other
// name.
type DNS struct {
	name string // fully qualified
	addr string
	srv  *dns.Server
	done chan struct{}

	mu      sync.Mutex
	ips     []string
	queries int
}

// StartDNS starts a server answering for name, with no address yet.
func StartDNS(name string) (*DNS, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &DNS{name: dns.Fqdn(name), addr: pc.LocalAddr().String(), done: make(chan struct{})}
	d.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(d.serve)}
	go func() {
		defer close(d.done)
		d.srv.ActivateAndServe()
	}()
	return d, nil
}

func (d *DNS) serve(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	d.mu.Lock()
	for _, q := range r.Question {
		if !strings.EqualFold(q.Name, d.name) {
			m.Rcode = dns.RcodeNameError
			continue
		}
		d.queries++
		if q.Qtype != dns.TypeA {
			continue // no AAAA: an empty answer
		}
		for _, ip := range d.ips {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0},
				A:   net.ParseIP(ip),
			})
		}
	}
	d.mu.Unlock()
	w.WriteMsg(m)
}

// Addr is the server's UDP address, for a resolver: dns://ADDR/NAME:PORT.
func (d *DNS) Addr() string { return d.addr }

// Set makes the name resolve to ips.
func (d *DNS) Set(ips ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ips = append([]string(nil), ips...)
}

// Queries is how many questions for the name it answered.
func (d *DNS) Queries() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queries
}

// Close stops the server and waits for it.
func (d *DNS) Close() {
	d.srv.Shutdown()
	<-d.done
}
