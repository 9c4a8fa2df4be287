// Package freeport finds a TCP port free on several loopback addresses at
// once, for servers to listen on later: what the benchmarks that the
// product binary runs (bench's backpressure scenarios) share with the
// tests' harnesses (internal/localnet re-exports it), with the standard
// library alone.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// On returns a TCP port free on every one of hosts now, for
// servers to listen on later. It tries random ports below the kernel's
// ephemeral range, so that no socket bound to port 0 in the meantime (the
// other servers of a test) takes it, or, where that range leaves no room,
// ports the kernel picks.
func On(hosts ...string) (int, error) {
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
