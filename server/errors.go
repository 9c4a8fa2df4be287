package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/source"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/limits"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	{errs.Unsupported, codes.InvalidArgument},
	{errs.TooLarge, codes.ResourceExhausted},
	{errs.Corrupt, codes.DataLoss},
	{pipeline.ErrClosed, codes.Unavailable},
	{limits.ErrMemoryBudget, codes.ResourceExhausted},
	{coord.ErrNoMaker, codes.FailedPrecondition},
	{errSampleErrors, codes.DataLoss},
	{source.ErrDenied, codes.PermissionDenied},
	{source.ErrUnavailable, codes.Unavailable},
	{source.ErrProtocol, codes.Unavailable},
	{job.ErrMeasuredCost, codes.ResourceExhausted},
	{coord.ErrBatchFailed, codes.Unavailable},
	{coord.ErrNoMakerReady, codes.Unavailable},
}

// toStatus turns err into a status error: a status error passes through
// unchanged; any other takes its code from errorCodes, else from a status
// it wraps (a peer's answer), else Internal, keeping its message.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	return status.Error(codeOf(err), err.Error())
}

// codeOf is err's status code by errorCodes, or the code of a status it
// wraps, or Internal.
func codeOf(err error) codes.Code {
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
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

// errIdleTimeout marks a Feed stream ended by --idle-timeout: a trainer
// that neither read nor granted a credit while a batch waited.
var errIdleTimeout = errors.New("idle timeout")

// idleTimeout is the status a stream ends with under --idle-timeout:
// DEADLINE_EXCEEDED with a message saying why, and errIdleTimeout to
// errors.Is, so that what ended the stream is known by its error, not by
// its message.
func idleTimeout(format string, a ...any) error {
	return &sentinelStatus{st: status.Newf(codes.DeadlineExceeded, format, a...), is: errIdleTimeout}
}

// sentinelStatus is a status error that is also a sentinel error.
type sentinelStatus struct {
	st *status.Status
	is error
}

func (e *sentinelStatus) Error() string              { return e.st.Err().Error() }
func (e *sentinelStatus) GRPCStatus() *status.Status { return e.st }
func (e *sentinelStatus) Is(target error) bool       { return target == e.is }

// refusalLog logs and counts what the server refuses, by policy. A flood
// of refusals is logged at most once a second per policy, with the count
// of those not logged.
type refusalLog struct {
	log *slog.Logger
	m   *prometheus.CounterVec

	mu    sync.Mutex
	last  map[string]time.Time
	quiet map[string]int
}

func (r *refusalLog) refuse(policy, msg string, attrs ...any) {
	r.m.WithLabelValues(policy).Inc()
	r.mu.Lock()
	if r.last == nil {
		r.last, r.quiet = make(map[string]time.Time), make(map[string]int)
	}
	now := time.Now()
	if now.Sub(r.last[policy]) < time.Second {
		r.quiet[policy]++
		r.mu.Unlock()
		return
	}
	r.last[policy] = now
	n := r.quiet[policy]
	r.quiet[policy] = 0
	r.mu.Unlock()
	attrs = append(attrs, "policy", policy)
	if n > 0 {
		attrs = append(attrs, "not_logged_since_last", n)
	}
	r.log.Warn(msg, attrs...)
}
