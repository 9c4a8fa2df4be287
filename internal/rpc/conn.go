package rpc

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Plaintext is plaintext transport credentials, the default a dialer puts
// first (a later WithTransportCredentials wins).
func Plaintext() grpc.DialOption {
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}

// Keepalive pings the server every 10 s without traffic, so a server
// that vanished without a reset (a cut cable, a stopped process) is
// noticed within about 15 s. The server's enforcement policy allows pings
// every 10 s.
func Keepalive() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{
		Time:                10 * time.Second,
		Timeout:             5 * time.Second,
		PermitWithoutStream: true,
	})
}
