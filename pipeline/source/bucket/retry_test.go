package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/api/googleapi"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// s3Error is the error aws-sdk-go-v2 returns for an S3 answer with this
// HTTP status and error code.
func s3Error(status int, code string) error {
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: status}}
	return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: resp, Err: &smithy.GenericAPIError{Code: code, Message: code}},
	}}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err      error
		timedOut bool
		want     kind
	}{
		{nil, false, kindOK},
		{s3Error(503, "SlowDown"), false, kindThrottled},
		{s3Error(429, "TooManyRequests"), false, kindThrottled},
		{s3Error(400, "SlowDown"), false, kindThrottled}, // the code decides
		{s3Error(500, "InternalError"), false, kindTransient},
		{s3Error(502, ""), false, kindTransient},
		{s3Error(412, "PreconditionFailed"), false, kindChanged},
		{s3Error(416, "InvalidRange"), false, kindChanged},
		{s3Error(404, "NoSuchKey"), false, kindNotFound},
		{s3Error(403, "AccessDenied"), false, kindDenied},
		{s3Error(400, "InvalidArgument"), false, kindInvalid},
		{&googleapi.Error{Code: 429}, false, kindThrottled},
		{&googleapi.Error{Code: 412}, false, kindChanged},
		{&azcore.ResponseError{StatusCode: 503, ErrorCode: "ServerBusy"}, false, kindThrottled},
		{&azcore.ResponseError{StatusCode: 403, ErrorCode: "AuthorizationFailure"}, false, kindDenied},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), false, kindTransient},
		{fmt.Errorf("body cut short: %w", io.ErrUnexpectedEOF), false, kindTransient},
		{context.DeadlineExceeded, true, kindTimeout},
		{fmt.Errorf("%w: x", source.ErrChanged), false, kindChanged},
	} {
		if got := classify(c.err, c.timedOut); got != c.want {
			t.Errorf("classify(%v, %v) = %v, want %v", c.err, c.timedOut, got, c.want)
		}
	}
}

// TestPolicyMaxWait: the longest a request takes to fail against a store
// that holds every try is the tries' deadlines plus the backoff ceilings.
func TestPolicyMaxWait(t *testing.T) {
	if got, want := source.DefaultPolicy().MaxWait(), 6*30*time.Second+3100*time.Millisecond; got != want {
		t.Errorf("DefaultPolicy().MaxWait() = %v, want 6×30s + (0.1+0.2+0.4+0.8+1.6)s = %v", got, want)
	}
	p := source.Policy{Attempts: 9, BaseDelay: time.Second, MaxDelay: 5 * time.Second, RequestTimeout: time.Second}
	if got, want := p.MaxWait(), 9*time.Second+(1+2+4+5+5+5+5+5)*time.Second; got != want {
		t.Errorf("MaxWait with capped backoff = %v, want %v", got, want)
	}
}

// TestRetrier runs the policy on scripted answers in a synctest bubble:
// backoff waits are virtual, so the test takes no time and asserts on
// counts, never on a clock.
func TestRetrier(t *testing.T) {
	pol := source.Policy{Attempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, RequestTimeout: 10 * time.Second, Budget: 100, RetryCost: 5}
	run := func(t *testing.T, answers []error) (error, int, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		m, err := source.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		r := newRetrier(pol, m, "s3://b")
		n := 0
		err = r.do(t.Context(), "get", "k", func(ctx context.Context) (int64, error) {
			a := answers[min(n, len(answers)-1)]
			n++
			if a == context.DeadlineExceeded {
				<-ctx.Done() // a stall: the try's deadline ends it
				return 0, ctx.Err()
			}
			return 10, a
		})
		return err, n, reg
	}
	t.Run("throttled then ok", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			err, n, reg := run(t, []error{s3Error(503, "SlowDown"), s3Error(503, "SlowDown"), nil})
			if err != nil || n != 3 {
				t.Fatalf("err %v after %d tries, want nil after 3", err, n)
			}
			if got := counted(t, reg, "stoker_store_throttles_total", "store", "s3://b"); got != 2 {
				t.Errorf("throttles %v, want 2", got)
			}
			if got := counted(t, reg, "stoker_store_retries_total", "store", "s3://b", "reason", "throttled"); got != 2 {
				t.Errorf("retries %v, want 2", got)
			}
			if got := counted(t, reg, "stoker_store_requests_total", "store", "s3://b", "op", "get", "outcome", "ok"); got != 1 {
				t.Errorf("ok requests %v, want 1", got)
			}
		})
	})
	t.Run("gives up naming the last answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			err, n, _ := run(t, []error{s3Error(500, "InternalError")})
			if n != 4 || !errors.Is(err, source.ErrUnavailable) || !strings.Contains(err.Error(), "InternalError") {
				t.Fatalf("after %d tries: %v; want 4 tries, source.ErrUnavailable naming InternalError", n, err)
			}
		})
	})
	t.Run("stall times out and is retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			err, n, reg := run(t, []error{context.DeadlineExceeded, nil})
			if err != nil || n != 2 {
				t.Fatalf("err %v after %d tries, want nil after 2", err, n)
			}
			if got := counted(t, reg, "stoker_store_requests_total", "store", "s3://b", "op", "get", "outcome", "timeout"); got != 1 {
				t.Errorf("timeouts %v, want 1", got)
			}
		})
	})
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"changed is final", s3Error(412, "PreconditionFailed"), source.ErrChanged},
		{"not found is final: a read's object changed", s3Error(404, "NoSuchKey"), source.ErrChanged},
		{"denied is final", s3Error(403, "AccessDenied"), source.ErrDenied},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				err, n, _ := run(t, []error{c.err, nil})
				if n != 1 || !errors.Is(err, c.want) {
					t.Fatalf("after %d tries: %v; want 1 try, %v", n, err, c.want)
				}
			})
		})
	}
	t.Run("not found is final: a head's object does not exist", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRetrier(pol, nil, "s3://b")
			n := 0
			err := r.do(t.Context(), "head", "k", func(context.Context) (int64, error) { n++; return 0, s3Error(404, "NoSuchKey") })
			if n != 1 || !errors.Is(err, source.ErrNotExist) || errors.Is(err, source.ErrChanged) {
				t.Fatalf("after %d tries: %v; want 1 try, ErrNotExist", n, err)
			}
		})
	})
	t.Run("budget spent fails at the first try", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRetrier(pol, nil, "s3://b")
			fail := func(context.Context) (int64, error) { return 0, s3Error(503, "SlowDown") }
			// 100 tokens at 5 a retry: 20 retries, then none.
			var tries int
			for range 10 {
				_ = r.do(t.Context(), "get", "k", func(ctx context.Context) (int64, error) { tries++; return fail(ctx) })
			}
			if tries != 20+10 {
				t.Fatalf("%d tries over 10 requests, want 30 (10 first tries and the budget's 20 retries)", tries)
			}
			var n int
			err := r.do(t.Context(), "get", "k", func(ctx context.Context) (int64, error) { n++; return fail(ctx) })
			if n != 1 || !strings.Contains(err.Error(), "retry budget spent") {
				t.Fatalf("%d tries: %v; want 1, the budget named", n, err)
			}
			// Successes refill it.
			for range 10 {
				_ = r.do(t.Context(), "get", "k", func(context.Context) (int64, error) { return 0, nil })
			}
			n = 0
			_ = r.do(t.Context(), "get", "k", func(ctx context.Context) (int64, error) { n++; return fail(ctx) })
			if n != 3 {
				t.Fatalf("%d tries after 10 successes refilled 10 tokens, want 3 (two retries)", n)
			}
		})
	})
	t.Run("caller cancel is not retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRetrier(pol, nil, "s3://b")
			ctx, cancel := context.WithCancel(t.Context())
			n := 0
			err := r.do(ctx, "get", "k", func(context.Context) (int64, error) { n++; cancel(); return 0, s3Error(503, "SlowDown") })
			if n != 1 || !errors.Is(err, context.Canceled) {
				t.Fatalf("after %d tries: %v; want 1, context.Canceled", n, err)
			}
		})
	})
}
