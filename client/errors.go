package client

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The hint is keyed on the status code, which is typed, and then on the
// words of gRPC's message: the cause cannot be had as a type. grpc-go
// (v1.85) flattens a transport's errors into the status message
// (toRPCErr: status.Error(codes.Unavailable, ConnectionError.Desc); the
// picker: status.Error(codes.Unavailable, err.Error())), and a status
// error wraps nothing, so errors.As finds no *net.OpError or
// *net.DNSError in what a call returns. Capturing the dial's own error
// (a dialer of ours) would not see the resolver's ("produced zero
// addresses") nor a stream that broke. The words pick the hint only: the
// code and gRPC's message are kept either way. TestUnreachableSaysWhatToDo
// (a closed port) and TestServerGoneMidStream (a server stopped under a
// stream) check the commonest against real gRPC failures, so a gRPC that
// words those otherwise fails there.

// notListening are the words of gRPC's Unavailable errors when no
// connection could be made: nothing listens at the address, or its name
// does not resolve.
var notListening = []string{"connection refused", "no such host", "produced zero addresses", "i/o timeout", "no route to host"}

// broken are the words of gRPC's Unavailable errors when a connection that
// was made broke: the server stopped, crashed or restarted, or the network
// between failed.
var broken = []string{"error reading from server", "connection reset by peer", "transport is closing", "broken pipe"}

// explain adds to a transport's Unavailable error of a call to target what
// it means and what to do: gRPC's own words ("connection error: desc =
// transport: Error while dialing: dial tcp …: connection refused") do not
// say that no stoker serve answers there. Other errors, the server's own
// included, are returned as they are; the code stays Unavailable.
func explain(target string, err error) error {
	s, ok := status.FromError(err)
	if !ok || s.Code() != codes.Unavailable {
		return err
	}
	msg := s.Message()
	var hint string
	switch {
	case containsAny(msg, notListening):
		hint = fmt.Sprintf("nothing answers there: is `stoker serve` running at %s?", target)
	case containsAny(msg, broken):
		hint = fmt.Sprintf("the connection broke: is `stoker serve` still running at %s, or did it restart?", target)
	default:
		return err
	}
	return status.Error(codes.Unavailable, msg+" ("+hint+")")
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
