package rpc

import (
	"net"
	"strings"
)

// DefaultPort is stoker's gRPC port: `stoker serve --listen`'s default
// (127.0.0.1:7070), and the port WithDefaultPort gives a target without
// one.
const DefaultPort = "7070"

// WithDefaultPort returns target with DefaultPort added where it names a
// host without a port: "gpu-box" is "gpu-box:7070", "dns:///gpu-box"
// "dns:///gpu-box:7070", "[::1]" "[::1]:7070". gRPC itself would dial such
// a target on 443, the HTTPS port, where no stoker listens unless told
// to, and say no more than "connection refused" on 443. Targets with a
// port, Unix sockets and schemes stoker does not know are returned as they
// are.
func WithDefaultPort(target string) string {
	if scheme, rest, ok := strings.Cut(target, ":"); ok {
		switch scheme {
		case "unix", "unix-abstract", "vsock":
			return target
		case "dns", "passthrough":
			// scheme://authority/endpoint, or scheme:endpoint
			if auth, ok := strings.CutPrefix(rest, "//"); ok {
				a, ep, ok := strings.Cut(auth, "/")
				if !ok {
					return target
				}
				return scheme + "://" + a + "/" + hostWithPort(ep)
			}
			return scheme + ":" + hostWithPort(rest)
		case "ipv4", "ipv6":
			addrs := strings.Split(rest, ",")
			for i, a := range addrs {
				addrs[i] = hostWithPort(a)
			}
			return scheme + ":" + strings.Join(addrs, ",")
		}
	}
	return hostWithPort(target)
}

// hostWithPort adds DefaultPort to addr when it is a host alone: a name,
// an IPv4 address, or an IPv6 one bare or in brackets.
func hostWithPort(addr string) string {
	if addr == "" {
		return addr
	}
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if h, ok := strings.CutPrefix(addr, "["); ok {
		if h, ok := strings.CutSuffix(h, "]"); ok && net.ParseIP(h) != nil {
			return net.JoinHostPort(h, DefaultPort)
		}
		return addr
	}
	if !strings.Contains(addr, ":") || net.ParseIP(addr) != nil {
		return net.JoinHostPort(addr, DefaultPort)
	}
	return addr
}
