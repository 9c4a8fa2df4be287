package client

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// insecureIfUnset is plaintext transport credentials, the default when the
// caller's dial options set none (a later WithTransportCredentials wins).
func insecureIfUnset([]grpc.DialOption) grpc.DialOption {
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}

// keepaliveOption pings the server every 10 s without traffic, so a server
// that vanished without a reset (a cut cable, a stopped process) is
// noticed within about 15 s. The server's enforcement policy allows pings
// every 10 s.
func keepaliveOption() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{
		Time:                10 * time.Second,
		Timeout:             5 * time.Second,
		PermitWithoutStream: true,
	})
}
