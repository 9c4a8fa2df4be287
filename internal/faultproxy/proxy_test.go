package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/storetest"
)

const bucket = "faults"

// store starts versitygw with a bucket holding obj (object) and a proxy
// in front of it with plan; the proxy closes when the test ends.
func store(t *testing.T, seed uint64, plan faultproxy.Plan) (*storetest.S3, *faultproxy.Proxy) {
	t.Helper()
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, bucket)
	s.Put(t, bucket, "obj", object)
	p, err := faultproxy.New(s.Endpoint, seed, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return s, p
}

// object is 64 KiB of varied bytes: large enough that half of it is more
// than one write of the proxy's copy.
var object = func() []byte {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}()

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// noKeepAlive gives each request its own connection, so that net/http
// never replays a GET whose reused connection was reset (it does, for
// idempotent requests), and each request meets exactly one fault.
func noKeepAlive(o *s3.Options) {
	o.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// getAll reads obj whole, its error from GetObject or from reading the body.
func getAll(ctx context.Context, c *s3.Client, key string) ([]byte, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// outcome classifies what the client saw of one GET, in the proxy's
// terms: the fault kind it looks like, None for the object's bytes.
func outcome(data []byte, err error) faultproxy.Kind {
	var re *awshttp.ResponseError
	var apiErr smithy.APIError
	switch {
	case err == nil && bytes.Equal(data, object):
		return faultproxy.None
	case errors.As(err, &re) && errors.As(err, &apiErr):
		switch {
		case re.HTTPStatusCode() == 503 && apiErr.ErrorCode() == "SlowDown":
			return faultproxy.SlowDown
		case re.HTTPStatusCode() == 429 && apiErr.ErrorCode() == "TooManyRequests":
			return faultproxy.TooManyRequests
		case re.HTTPStatusCode() == 500 && apiErr.ErrorCode() == "InternalError":
			return faultproxy.InternalError
		}
	case errors.Is(err, syscall.ECONNRESET):
		return faultproxy.Reset
	case errors.Is(err, io.ErrUnexpectedEOF):
		return faultproxy.Truncate
	}
	return -1
}

// TestSignedRequestsPassThrough: with no faults, every kind of signed
// request the storage layer makes goes through the proxy and is accepted,
// keys that need escaping and an upload large enough for
// Expect: 100-continue included.
func TestSignedRequestsPassThrough(t *testing.T) {
	s, p := store(t, 1, faultproxy.Plan{})
	c := s.Client(storetest.Via(p.URL()), storetest.NoRetry)
	ctx := timeout(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16)
	for _, key := range []string{"plain", "dir/a b+c=d&e,f;g@h$i'(j)!*~.jpg", "ünï/cödé/日本.png", "big"} {
		data := []byte(key)
		if key == "big" {
			data = big
		}
		put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
		if err != nil {
			t.Fatalf("put %q: %v", key, err)
		}
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil || aws.ToString(head.ETag) != aws.ToString(put.ETag) {
			t.Fatalf("head %q: %v, ETag %s, put gave %s", key, err, aws.ToString(head.ETag), aws.ToString(put.ETag))
		}
		got, err := getAll(ctx, c, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get %q: %v, %d bytes, want %d", key, err, len(got), len(data))
		}
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("dir/")})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("list: %v, %d objects", err, len(list.Contents))
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("plain")}); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Requests != 4*3+2 || st.Matched != st.Requests || st.Total() != 0 || st.UpstreamErrors != 0 {
		t.Errorf("stats %+v, want 14 requests, all matched, no faults", st)
	}

	// Signed for the proxy's address, a request sent with the store's own
	// Host fails: the proxy's keeping the client's Host is what lets the
	// signature hold.
	_, err = s.Client(storetest.Via(p.URL()), storetest.NoRetry, func(o *s3.Options) {
		o.HTTPClient = hostRewriter{strings.TrimPrefix(s.Endpoint, "http://")}
	}).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj")})
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
		t.Errorf("a request whose Host is not the one signed: %v, want 403", err)
	}
}

// hostRewriter sends every request with another Host than the one signed.
type hostRewriter struct{ host string }

func (h hostRewriter) Do(r *http.Request) (*http.Response, error) {
	r.Host = h.host
	return http.DefaultClient.Do(r)
}

// TestFaultKinds: each fault, met by every GET of an object (Down), is
// what the real SDK client reports for it, and Only spares the listings
// and the heads.
func TestFaultKinds(t *testing.T) {
	s, p := store(t, 1, faultproxy.Plan{})
	c := s.Client(storetest.Via(p.URL()), storetest.NoRetry)
	for _, kind := range []faultproxy.Kind{faultproxy.SlowDown, faultproxy.TooManyRequests, faultproxy.InternalError, faultproxy.Reset, faultproxy.Truncate} {
		t.Run(kind.String(), func(t *testing.T) {
			if err := p.SetPlan(faultproxy.Plan{Down: kind, Only: faultproxy.ObjectGETs}); err != nil {
				t.Fatal(err)
			}
			before := p.Stats().Faults[kind]
			ctx := timeout(t)
			data, err := getAll(ctx, c, "obj")
			if got := outcome(data, err); got != kind {
				t.Errorf("GET: %d bytes, %v; looks like %v, want %v", len(data), err, got, kind)
			}
			if after := p.Stats().Faults[kind]; after <= before {
				t.Errorf("the proxy counted no %v", kind)
			}
			if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}); err != nil {
				t.Errorf("list, which Only spares: %v", err)
			}
			if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj")}); err != nil {
				t.Errorf("head, which Only spares: %v", err)
			}
		})
	}
	// The store comes back.
	if err := p.SetPlan(faultproxy.Plan{}); err != nil {
		t.Fatal(err)
	}
	if data, err := getAll(timeout(t), c, "obj"); outcome(data, err) != faultproxy.None {
		t.Errorf("after the faults stop: %d bytes, %v", len(data), err)
	}
}

// TestHeadTruncatedIsReset: a HEAD has no body to cut, so Truncate resets
// it instead, and the client still sees a fault.
func TestHeadTruncatedIsReset(t *testing.T) {
	s, p := store(t, 1, faultproxy.Plan{Down: faultproxy.Truncate})
	c := s.Client(storetest.Via(p.URL()), storetest.NoRetry, noKeepAlive)
	_, err := c.HeadObject(timeout(t), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj")})
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("HEAD: %v, want a connection reset", err)
	}
	if st := p.Stats(); st.Faults[faultproxy.Reset] != 1 || st.Faults[faultproxy.Truncate] != 0 {
		t.Errorf("faults %v, want one reset", st.Faults)
	}
}

// TestRates: with a fixed seed, N sequential GETs meet each fault at
// about its rate, the client sees exactly the faults the proxy counts,
// and a second proxy with the same seed injects the very same faults.
func TestRates(t *testing.T) {
	const n = 400
	rates := map[faultproxy.Kind]float64{
		faultproxy.SlowDown: 0.10, faultproxy.TooManyRequests: 0.05, faultproxy.InternalError: 0.05,
		faultproxy.Reset: 0.05, faultproxy.Truncate: 0.05, faultproxy.Stall: 0.05,
	}
	// Stalls end after a millisecond and the request goes on: the client
	// sees the object, as from a slow store.
	plan := faultproxy.Plan{Rates: rates, StallFor: time.Millisecond}
	s, p := store(t, 42, plan)
	run := func(p *faultproxy.Proxy) ([]faultproxy.Kind, faultproxy.Stats) {
		c := s.Client(storetest.Via(p.URL()), storetest.NoRetry, noKeepAlive)
		ctx := timeout(t)
		seen := make([]faultproxy.Kind, n)
		for i := range seen {
			data, err := getAll(ctx, c, "obj")
			if seen[i] = outcome(data, err); seen[i] < 0 {
				t.Fatalf("GET %d: %d bytes, %v: no fault the proxy makes", i, len(data), err)
			}
		}
		return seen, p.Stats()
	}
	seen, st := run(p)
	count := map[faultproxy.Kind]int64{}
	for _, k := range seen {
		count[k]++
	}
	if st.Requests != n || st.Matched != n {
		t.Errorf("%d requests, %d matched; want %d", st.Requests, st.Matched, n)
	}
	for k, rate := range rates {
		observed := count[k]
		if k == faultproxy.Stall {
			observed = st.Faults[k] // the client sees a stall as success
		} else if observed != st.Faults[k] {
			t.Errorf("%v: the client saw %d, the proxy counted %d", k, observed, st.Faults[k])
		}
		// Deterministic with the seed; the band (five standard deviations)
		// only says the seed is not a freak.
		want := rate * n
		if d := float64(observed) - want; d*d > 25*want*(1-rate) {
			t.Errorf("%v: %d of %d, want about %.0f", k, observed, n, want)
		}
	}
	if count[faultproxy.None] != n-st.Total()+st.Faults[faultproxy.Stall] {
		t.Errorf("%d successes, %d requests less %d faults plus %d stalls", count[faultproxy.None], n, st.Total(), st.Faults[faultproxy.Stall])
	}

	again, err := faultproxy.New(s.Endpoint, 42, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	seen2, st2 := run(again)
	for i := range seen {
		if seen[i] != seen2[i] {
			t.Fatalf("GET %d met %v with the seed, then %v", i, seen[i], seen2[i])
		}
	}
	if len(st2.Faults) != len(st.Faults) {
		t.Errorf("faults %v, then %v", st.Faults, st2.Faults)
	}
}
