package rpc

import (
	"context"
	"net"

	"google.golang.org/grpc/peer"
)

// SendChunks sends data as Chunks of at most max bytes numbered n through
// send (a stream's SendMsg, under Codec), its pixels lent to gRPC through
// pin rather than copied into the messages. Feed streams send a batch's
// pixels with it, and Work streams a leased batch's.
func SendChunks(send func(any) error, pin *Pin, n uint64, data []byte, max int) error {
	for off := 0; off < len(data); off += max {
		c := &OutChunk{Number: n, Offset: uint64(off), Data: pin.Buffer(data[off:min(off+max, len(data))])}
		if err := send(c); err != nil {
			return err
		}
	}
	return nil
}

// ClientHost is the host of the client a call or stream came from,
// without its port: one machine is one client, however many connections
// it opens. "unknown" when gRPC does not say.
func ClientHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	a := p.Addr.String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

// MaxHeaderBytes is the receive limit of stoker's clients and Peers: a
// batch's header carries its fields (a job's bound them to 32 MiB in
// all) and traces (3 MiB), beside its labels and indices; chunks are at
// most about 4 MiB.
const MaxHeaderBytes = 48 << 20
