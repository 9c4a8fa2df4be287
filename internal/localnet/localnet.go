// Package localnet holds what the tests and benchmarks that run real
// servers on loopback addresses share: a port free on several of them at
// once, and a DNS server that answers for one name, as a Kubernetes
// headless Service does.
package localnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// FreePortOn returns a TCP port free on every one of hosts now, for
// servers to listen on later. It tries random ports below the kernel's
// ephemeral range, so that no socket bound to port 0 in the meantime (the
// other servers of a test) takes it, or, where that range leaves no room,
// ports the kernel picks.
func FreePortOn(hosts ...string) (int, error) {
	low := 0
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			low, _ = strconv.Atoi(f[0])
		}
	}
	var last error
	for range 100 {
		port := 0
		if low > 12000 {
			port = 10000 + rand.IntN(low-10000)
		}
		var ls []net.Listener
		ok := true
		for _, h := range hosts {
			l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
			if err != nil {
				ok, last = false, err
				break
			}
			ls = append(ls, l)
			port = l.Addr().(*net.TCPAddr).Port
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free on all of %v: %v", hosts, last)
}

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
