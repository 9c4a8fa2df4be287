package client

import "google.golang.org/grpc/credentials"

// TokenCredentials sends "authorization: Bearer token" on every call to
// target, as WithToken does, for other dialers (a coordinator dialing its
// peers). Over a connection without TLS the token goes only to a loopback
// target, or anywhere when allowPlaintext.
func TokenCredentials(token, target string, allowPlaintext bool) credentials.PerRPCCredentials {
	return bearer{token: token, target: target, plainOK: allowPlaintext || isLoopback(target)}
}
