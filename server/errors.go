package server

import (
	"context"
	"errors"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
)

// errorCodes maps the errors the server's dependencies return to status
// codes. It is the one place where that mapping lives; the first entry that
// matches (errors.Is) wins.
var errorCodes = []struct {
	err  error
	code codes.Code
}{
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{pipeline.ErrUnsupported, codes.InvalidArgument},
	{pipeline.ErrTooLarge, codes.ResourceExhausted},
	{pipeline.ErrCorrupt, codes.DataLoss},
	{pipeline.ErrClosed, codes.Unavailable},
}

// toStatus turns err into a status error. Errors that already carry a status
// pass through unchanged; the rest take their code from errorCodes, or
// Internal, keeping their message.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codeOf(err), err.Error())
}

// codeOf is err's status code by errorCodes.
func codeOf(err error) codes.Code {
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return codes.Internal
}

// capStatus shortens the message of err's status to maxStatusMessage
// bytes: whatever a handler echoes of a client's input, the status still
// reaches the client with its code (a message past the client's header
// limit turns into RESOURCE_EXHAUSTED or INTERNAL on its side).
func capStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || len(st.Message()) <= maxStatusMessage {
		return err
	}
	msg := st.Message()
	n := maxStatusMessage
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	p := st.Proto()
	p.Message = msg[:n] + "…"
	return status.ErrorProto(p)
}
