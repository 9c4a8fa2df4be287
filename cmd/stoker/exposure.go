package main

import (
	"log/slog"
	"net"

	"github.com/stoker-dev/stoker/server"
)

// Start-up warnings for a server that other machines reach without what
// would keep them out: one line each, so that an exposure is never silent.

// warnListen warns when the gRPC listener is on a non-loopback address and
// no client has to authenticate (no --auth-tokens, no --tls-client-ca).
func warnListen(log *slog.Logger, addr net.Addr, cfg server.Config) {
	if loopback(addr) || cfg.AuthTokens != "" || cfg.TLSClientCA != "" {
		return
	}
	if cfg.TLSCert == "" {
		log.Warn("listening on a non-loopback address in plaintext and without tokens: any host that reaches it can read its datasets' images and use its cores; add --auth-tokens and --tls-cert/--tls-key, or listen on 127.0.0.1",
			"addr", addr.String())
		return
	}
	log.Warn("listening on a non-loopback address without client authentication: any host that reaches it can read its datasets' images and use its cores; add --auth-tokens or --tls-client-ca",
		"addr", addr.String())
}

// warnPprof warns when /debug/pprof/ is served on a non-loopback
// --metrics address: it has no authentication, shows the command line and
// lets anyone profile (and slow) the server.
func warnPprof(log *slog.Logger, addr net.Addr) {
	if !loopback(addr) {
		log.Warn("--pprof on a non-loopback --metrics address: anyone who reaches it can read the command line and profile the server; serve --metrics on 127.0.0.1 or drop --pprof",
			"addr", addr.String())
	}
}

// loopback reports whether a listener's address is a loopback one (an
// unspecified address, 0.0.0.0 or [::], is every interface: not).
func loopback(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}
