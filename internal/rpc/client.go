package rpc

import (
	"context"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// ClientID is who a call or stream came from, for the executor's share
// of the cores between clients (each client's share is then divided
// among its jobs): the subject of the client certificate the server
// verified when it asks for one (--tls-client-ca), so that every
// connection and every job of one certificate's holder is one client;
// otherwise the connection's address and port, so that two trainers on
// one machine are two clients, and one connection is one client however
// many streams it opens. "unknown" when gRPC says neither.
//
// A client with no certificate to tie it down is one connection: one
// that opens N connections is N clients (and so is every gRPC channel
// of a Python process that does not share its subchannels; those that
// do, with the same target and options, share one connection and are
// one client).
func ClientID(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		if ch := ti.State.VerifiedChains; len(ch) > 0 && len(ch[0]) > 0 {
			return "cert " + ch[0][0].Subject.String()
		}
	}
	if p.Addr == nil {
		return "unknown"
	}
	return "conn " + p.Addr.String()
}

// LimitID is who the per-client limits count a stream or its memory
// against (--max-streams-per-client, --max-work-streams-per-client,
// --max-work-memory-per-client): the subject of the client certificate
// the server verified, as in ClientID ("certificate CN=..."); otherwise
// the client's host ("host 10.0.0.7", ClientHost), never its connection.
//
// The two identities answer two questions. Fair share asks how the cores
// are divided, and a connection dividing them is harmless: opening more
// connections only splits what a host can be given. A limit asks how much
// one client may hold, and a limit per connection binds nothing, since a
// client opens another connection for the next stream. The host is what
// an unauthenticated client cannot multiply by itself (an IPv6 client
// given a whole prefix still can); but every trainer behind one NAT, or on
// one host, shares it. A certificate is an identity the operator issued:
// trainers that each hold their own are counted apart wherever they
// connect from, and one certificate's holder is one client over any
// number of hosts.
func LimitID(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		if ch := ti.State.VerifiedChains; len(ch) > 0 && len(ch[0]) > 0 {
			return "certificate " + ch[0][0].Subject.String()
		}
	}
	return "host " + ClientHost(ctx)
}
