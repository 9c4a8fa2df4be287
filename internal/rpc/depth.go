package rpc

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// A request nested deeper than protobuf decodes (protowire.
// DefaultRecursionLimit levels: a transform's containers thousands deep)
// is the client's mistake, but gRPC reports any codec error as INTERNAL,
// and writes that status before the handler sees the error. So a handler
// wrapped by MapDecodeErrors arms its receive (the message it decodes
// into is put in armed), the codec notes the recursion error there and
// returns no error, and the handler's wrapper returns INVALID_ARGUMENT.
// Receives not armed (a client's, a handler not wrapped) get the codec's
// error as before.
var armed sync.Map // the message being decoded (a pointer) → *error

// noteTooDeep is what the codec returns for err, base's error decoding
// msg for m (the message RecvMsg was given: msg itself, or a Received
// holding it): nil, with the error noted and msg reset, if it is
// protobuf's recursion limit (its error is not exported: its text is
// matched) and m's receive is armed; err otherwise.
func noteTooDeep(m, msg any, err error) error {
	if err == nil || !strings.Contains(err.Error(), "exceeded maximum recursion depth") {
		return err
	}
	slot, ok := armed.Load(m)
	if !ok {
		return err
	}
	*slot.(*error) = err
	if pm, ok := msg.(proto.Message); ok {
		proto.Reset(pm) // nothing half-decoded is left in it
	}
	return nil
}

// recvArmed runs recv (a RecvMsg) into m, armed, and returns
// INVALID_ARGUMENT saying the limit (and hint) if m nested too deep.
func recvArmed(m any, recv func(any) error, hint string) error {
	var deep error
	armed.Store(m, &deep)
	err := recv(m)
	armed.Delete(m)
	if err == nil && deep != nil {
		return status.Errorf(codes.InvalidArgument, "the request nests deeper than protobuf decodes (%d nested messages); %s", protowire.DefaultRecursionLimit, hint)
	}
	return err
}

// MapDecodeErrors returns a copy of sd whose handlers answer a request
// nested deeper than protobuf decodes with INVALID_ARGUMENT saying so,
// with hint (the limit a client is to keep to) after it. The server must
// run under Codec.
func MapDecodeErrors(sd *grpc.ServiceDesc, hint string) *grpc.ServiceDesc {
	out := *sd
	out.Methods = make([]grpc.MethodDesc, len(sd.Methods))
	for i, m := range sd.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return recvArmed(v, dec, hint) }, in)
		}
		out.Methods[i] = m
	}
	out.Streams = make([]grpc.StreamDesc, len(sd.Streams))
	for i, s := range sd.Streams {
		h := s.Handler
		s.Handler = func(srv any, stream grpc.ServerStream) error {
			return h(srv, depthStream{stream, hint})
		}
		out.Streams[i] = s
	}
	return &out
}

// depthStream is a server stream whose receives are armed.
type depthStream struct {
	grpc.ServerStream
	hint string
}

func (s depthStream) RecvMsg(m any) error { return recvArmed(m, s.ServerStream.RecvMsg, s.hint) }
