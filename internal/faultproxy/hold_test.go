package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/internal/waitfor"
)

// waitFor polls cond until it holds; a minute without it fails the test,
// naming what did not happen.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Wait{Within: time.Minute, Every: 5 * time.Millisecond}.Until(t, what, cond)
}

// heldGET starts a GET of obj that the proxy will hold, and returns its
// cancel and where its error will come.
func heldGET(t *testing.T, c *s3.Client) (context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(timeout(t))
	errc := make(chan error, 1)
	go func() {
		_, err := getAll(ctx, c, "obj")
		errc <- err
	}()
	return cancel, errc
}

func notYet(t *testing.T, errc <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errc:
		t.Fatalf("%s returned while held: %v", what, err)
	default:
	}
}

// TestStallUntilClientGivesUp: a stall without end holds the GET until the
// client cancels it; the client then sees its own cancellation.
func TestStallUntilClientGivesUp(t *testing.T) {
	s, p := store(t, 1, faultproxy.Plan{Down: faultproxy.Stall})
	cancel, errc := heldGET(t, s.Client(storetest.Via(p.URL()), storetest.NoRetry))
	waitFor(t, "a stall", func() bool { return p.Stats().Faults[faultproxy.Stall] == 1 })
	notYet(t, errc, "the stalled GET")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("stalled GET: %v, want the client's cancellation", err)
	}
}

// TestStallBody: the client has the headers and half of the body, then
// nothing: until it gives up, or, with StallFor, until the proxy cuts the
// body.
func TestStallBody(t *testing.T) {
	s, p := store(t, 1, faultproxy.Plan{Down: faultproxy.StallBody})
	c := s.Client(storetest.Via(p.URL()), storetest.NoRetry)
	ctx, cancel := context.WithCancel(timeout(t))
	defer cancel()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	if aws.ToInt64(out.ContentLength) != int64(len(object)) {
		t.Errorf("Content-Length %d, want %d", aws.ToInt64(out.ContentLength), len(object))
	}
	half := make([]byte, len(object)/2)
	if _, err := io.ReadFull(out.Body, half); err != nil || string(half) != string(object[:len(half)]) {
		t.Fatalf("the first half: %v", err)
	}
	cancel()
	if _, err := out.Body.Read(make([]byte, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("reading past the half: %v, want the client's cancellation", err)
	}

	if err := p.SetPlan(faultproxy.Plan{Down: faultproxy.StallBody, StallFor: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	data, err := getAll(timeout(t), c, "obj")
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(data) != len(object)/2 {
		t.Errorf("a bounded body stall: %d bytes, %v; want half, then an unexpected EOF", len(data), err)
	}
	if n := p.Stats().Faults[faultproxy.StallBody]; n != 2 {
		t.Errorf("%d body stalls counted, want 2", n)
	}
}

// TestLatencyHolds: latency holds every request, selected or not, before
// anything else (an hour: the client gives up first).
func TestLatencyHolds(t *testing.T) {
	s, p := store(t, 1, faultproxy.Plan{Latency: time.Hour, Only: func(*http.Request) bool { return false }})
	cancel, errc := heldGET(t, s.Client(storetest.Via(p.URL()), storetest.NoRetry))
	waitFor(t, "a request", func() bool { return p.Stats().Requests == 1 })
	notYet(t, errc, "the delayed GET")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("delayed GET: %v, want the client's cancellation", err)
	}
	if st := p.Stats(); st.Matched != 0 || st.Total() != 0 {
		t.Errorf("stats %+v: want none matched, no faults", st)
	}
}

// TestCloseEndsHeldRequests: Close returns with a request held, and the
// client sees its connection end.
func TestCloseEndsHeldRequests(t *testing.T) {
	s, p := store(t, 1, faultproxy.Plan{Down: faultproxy.Stall})
	_, errc := heldGET(t, s.Client(storetest.Via(p.URL()), storetest.NoRetry))
	waitFor(t, "a stall", func() bool { return p.Stats().Faults[faultproxy.Stall] == 1 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("GET held when the proxy closed: %v, want a connection error", err)
	}
}

// TestStoreDown: a store that does not answer is a 502 from the proxy,
// counted.
func TestStoreDown(t *testing.T) {
	s, p := store(t, 1, faultproxy.Plan{})
	s.Stop(t)
	_, err := getAll(timeout(t), s.Client(storetest.Via(p.URL()), storetest.NoRetry), "obj")
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadGateway {
		t.Errorf("GET from a stopped store: %v, want 502", err)
	}
	if n := p.Stats().UpstreamErrors; n != 1 {
		t.Errorf("%d upstream errors counted, want 1", n)
	}
}

func TestPlanChecks(t *testing.T) {
	for name, plan := range map[string]faultproxy.Plan{
		"rates over 1":     {Rates: map[faultproxy.Kind]float64{faultproxy.SlowDown: 0.6, faultproxy.Reset: 0.5}},
		"negative rate":    {Rates: map[faultproxy.Kind]float64{faultproxy.SlowDown: -0.1}},
		"NaN rate":         {Rates: map[faultproxy.Kind]float64{faultproxy.SlowDown: math.NaN()}},
		"rate for None":    {Rates: map[faultproxy.Kind]float64{faultproxy.None: 0.1}},
		"rate for no kind": {Rates: map[faultproxy.Kind]float64{faultproxy.Kind(99): 0.1}},
		"down no kind":     {Down: faultproxy.Kind(-1)},
		"negative latency": {Latency: -time.Second},
		"negative stall":   {StallFor: -time.Second},
	} {
		if _, err := faultproxy.New("http://127.0.0.1:9", 1, plan); err == nil {
			t.Errorf("%s: New took it", name)
		}
	}
	p, err := faultproxy.New("http://127.0.0.1:9", 1, faultproxy.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.SetPlan(faultproxy.Plan{Rates: map[faultproxy.Kind]float64{faultproxy.Truncate: 2}}); err == nil {
		t.Error("SetPlan took a rate of 2")
	}
	if _, err := faultproxy.New("127.0.0.1:9000", 1, faultproxy.Plan{}); err == nil {
		t.Error("New took a target with no scheme")
	}
}

func TestSelectors(t *testing.T) {
	for _, c := range []struct {
		method, target   string
		gets, objectGETs bool
	}{
		{"GET", "/bkt/a/b.jpg", true, true},
		{"GET", "/bkt/a/b.jpg?x-id=GetObject", true, true},
		{"GET", "/bkt?list-type=2&prefix=a%2F", true, false},
		{"GET", "/bkt/", true, false},
		{"HEAD", "/bkt/a", false, false},
		{"PUT", "/bkt/a", false, false},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		if faultproxy.GETs(r) != c.gets || faultproxy.ObjectGETs(r) != c.objectGETs {
			t.Errorf("%s %s: GETs %v, ObjectGETs %v", c.method, c.target, faultproxy.GETs(r), faultproxy.ObjectGETs(r))
		}
	}
	b, k := faultproxy.Key(httptest.NewRequest("GET", "/bkt/dir/x%20y.tar", nil))
	if b != "bkt" || k != "dir/x y.tar" {
		t.Errorf("Key: %q %q", b, k)
	}
}

// TestCloseReleasesGoroutines: after traffic of every kind and a request
// held at Close, the proxy leaves no goroutine behind, so tests that count
// theirs can use it.
func TestCloseReleasesGoroutines(t *testing.T) {
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, bucket)
	s.Put(t, bucket, "obj", object)
	base := runtime.NumGoroutine()
	rates := map[faultproxy.Kind]float64{}
	for _, k := range faultproxy.Kinds() {
		rates[k] = 0.1
	}
	p, err := faultproxy.New(s.Endpoint, 7, faultproxy.Plan{Rates: rates, StallFor: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Client(storetest.Via(p.URL()), storetest.NoRetry, noKeepAlive)
	for range 50 {
		getAll(timeout(t), c, "obj")
	}
	p.SetPlan(faultproxy.Plan{Down: faultproxy.Stall})
	_, errc := heldGET(t, c)
	waitFor(t, "a stall", func() bool { return p.Stats().Faults[faultproxy.Stall] > 0 && p.Stats().Requests == 51 })
	p.Close()
	<-errc
	waitFor(t, fmt.Sprintf("a return to %d goroutines", base), func() bool { return runtime.NumGoroutine() <= base })
}
