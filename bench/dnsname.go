package bench

// A DNS name for the autoscale scenario's workers, as a Kubernetes headless
// Service is: a DNS server on loopback answering A queries for one name
// with the addresses of the workers that are up, which the coordinator
// (--peers dns://RESOLVER/NAME:PORT) re-resolves every --peer-refresh.

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

// benchDNS answers A queries for name with ips, and NXDOMAIN for others.
type benchDNS struct {
	name string // fully qualified
	addr string
	srv  *dns.Server
	done chan struct{}

	mu  sync.Mutex
	ips []string
}

func startBenchDNS(name string) (*benchDNS, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &benchDNS{name: dns.Fqdn(name), addr: pc.LocalAddr().String(), done: make(chan struct{})}
	d.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(d.serve)}
	go func() {
		defer close(d.done)
		d.srv.ActivateAndServe()
	}()
	return d, nil
}

func (d *benchDNS) serve(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	d.mu.Lock()
	for _, q := range r.Question {
		if !strings.EqualFold(q.Name, d.name) {
			m.Rcode = dns.RcodeNameError
			continue
		}
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

// set makes the name resolve to ips.
func (d *benchDNS) set(ips []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ips = append([]string(nil), ips...)
}

func (d *benchDNS) close() {
	d.srv.Shutdown()
	<-d.done
}

// freePortOn is a TCP port free on every one of hosts now: one below the
// kernel's ephemeral range where it leaves room, so that sockets bound to
// port 0 meanwhile do not take it.
func freePortOn(hosts ...string) (int, error) {
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
