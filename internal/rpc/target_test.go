package rpc

import "testing"

// TestWithDefaultPort: a host without a port gets stoker's 7070, never
// gRPC's silent 443; anything with a port, a Unix socket or an unknown
// scheme is left as it is.
func TestWithDefaultPort(t *testing.T) {
	for in, want := range map[string]string{
		"gpu-box":                       "gpu-box:7070",
		"127.0.0.1":                     "127.0.0.1:7070",
		"localhost":                     "localhost:7070",
		"[::1]":                         "[::1]:7070",
		"::1":                           "[::1]:7070",
		"dns:///gpu-box":                "dns:///gpu-box:7070",
		"dns://8.8.8.8/gpu-box":         "dns://8.8.8.8/gpu-box:7070",
		"dns:gpu-box":                   "dns:gpu-box:7070",
		"passthrough:///10.0.0.1":       "passthrough:///10.0.0.1:7070",
		"ipv4:127.0.0.1,127.0.0.2:9000": "ipv4:127.0.0.1:7070,127.0.0.2:9000",
		"ipv6:[::1]":                    "ipv6:[::1]:7070",
		"gpu-box:7070":                  "gpu-box:7070",
		"gpu-box:443":                   "gpu-box:443",
		"127.0.0.1:0":                   "127.0.0.1:0",
		"[::1]:9000":                    "[::1]:9000",
		"dns:///gpu-box:9000":           "dns:///gpu-box:9000",
		"unix:/tmp/stoker.sock":         "unix:/tmp/stoker.sock",
		"unix-abstract:stoker":          "unix-abstract:stoker",
		"xds:///svc":                    "xds:///svc",
		"":                              "",
	} {
		if got := WithDefaultPort(in); got != want {
			t.Errorf("WithDefaultPort(%q) = %q, want %q", in, got, want)
		}
	}
}
