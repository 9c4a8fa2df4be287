package bucket

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/storetest"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// s3Env starts a real S3 server (versitygw) on loopback holding bucket
// "bkt" with objects under "data/", and a fault proxy in front of it, and
// points the AWS SDK's standard variables at the proxy.
func s3Env(t *testing.T, objs map[string][]byte) (*storetest.S3, *faultproxy.Proxy) {
	t.Helper()
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "bkt")
	for k, v := range objs {
		s.Put(t, "bkt", "data/"+k, v)
	}
	p, err := faultproxy.New(s.Endpoint, 1, faultproxy.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for _, kv := range s.EnvFor(p.URL()) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return s, p
}

func fastPolicy() source.Policy {
	return source.Policy{Attempts: 4, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, RequestTimeout: 2 * time.Second}
}

func listAll(t *testing.T, st source.Store) map[string]source.Object {
	t.Helper()
	objs := map[string]source.Object{}
	if err := st.List(t.Context(), "", func(o source.Object) error { objs[o.Key] = o; return nil }); err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestS3Store: S3's retries and faults, through a fault proxy (what every
// Store does is TestStoreConformance's): throttled and truncated answers
// are retried, a stream cut by a reset resumes where it stopped, a store
// that is down is named with its last answer, and a stall ends at the
// request deadline.
func TestS3Store(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	_, p := s3Env(t, map[string][]byte{"a/1.jpg": []byte("one"), "b/2.jpg": []byte("second"), "big.tar": big})
	reg := prometheus.NewRegistry()
	m, _ := source.NewMetrics(reg)
	st, err := source.Open(t.Context(), "s3://bkt/data", source.WithPolicy(fastPolicy()), source.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.String() != "s3://bkt/data/" {
		t.Errorf("String = %q", st.String())
	}
	objs := listAll(t, st)
	if len(objs) != 3 {
		t.Fatalf("List = %+v: want 3 objects", objs)
	}
	buf := make([]byte, 4)

	t.Run("throttled and truncated answers are retried", func(t *testing.T) {
		p.SetPlan(faultproxy.Plan{Rates: map[faultproxy.Kind]float64{faultproxy.SlowDown: 0.15, faultproxy.TooManyRequests: 0.05,
			faultproxy.Truncate: 0.1, faultproxy.Reset: 0.1}, Only: faultproxy.ObjectGETs})
		defer p.SetPlan(faultproxy.Plan{})
		// 40% of tries fail: 12 tries give up once in 60,000 reads.
		pol := fastPolicy()
		pol.Attempts = 12
		st, err := source.Open(t.Context(), "s3://bkt/data", source.WithPolicy(pol), source.WithMetrics(m))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		got := make([]byte, 100<<10)
		for i := range 18 {
			off := int64(i) * 50 << 10
			if err := st.ReadRange(t.Context(), objs["big.tar"], off, got); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
			if !bytes.Equal(got, big[off:off+int64(len(got))]) {
				t.Fatalf("read %d: wrong bytes", i)
			}
		}
		if counted(t, reg, "stoker_store_throttles_total", "store", "s3://bkt") == 0 || counted(t, reg, "stoker_store_retries_total", "store", "s3://bkt", "reason", "error") == 0 {
			t.Errorf("no throttles or error retries counted (proxy: %+v)", p.Stats())
		}
	})

	t.Run("a stream resumes where a reset cut it", func(t *testing.T) {
		p.SetPlan(faultproxy.Plan{Rates: map[faultproxy.Kind]float64{faultproxy.Truncate: 0.5}, Only: faultproxy.ObjectGETs})
		defer p.SetPlan(faultproxy.Plan{})
		r, err := st.NewReader(t.Context(), objs["big.tar"], 100)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, big[100:]) {
			t.Fatalf("stream: %d bytes, %v", len(got), err)
		}
	})

	t.Run("a store that is down is named with its last answer", func(t *testing.T) {
		p.SetPlan(faultproxy.Plan{Down: faultproxy.SlowDown})
		defer p.SetPlan(faultproxy.Plan{})
		err := st.ReadRange(t.Context(), objs["b/2.jpg"], 0, buf)
		if !errors.Is(err, source.ErrUnavailable) || !strings.Contains(err.Error(), "s3://bkt") || !strings.Contains(err.Error(), "SlowDown") {
			t.Fatalf("read from a store that is down: %v; want source.ErrUnavailable naming the store and SlowDown", err)
		}
	})

	t.Run("a stall ends at the request deadline", func(t *testing.T) {
		p.SetPlan(faultproxy.Plan{Down: faultproxy.Stall})
		defer p.SetPlan(faultproxy.Plan{})
		pol := fastPolicy()
		pol.Attempts, pol.RequestTimeout = 2, 200*time.Millisecond
		st2, err := openBlob(context.Background(), "s3://bkt/data", pol, nil)
		if err == nil {
			defer st2.Close()
			t.Fatal("opened a store whose every request stalls")
		}
		if !errors.Is(err, source.ErrUnavailable) || !strings.Contains(err.Error(), "no answer within") {
			t.Fatalf("open of a stalled store: %v", err)
		}
	})
}

func TestS3OpenFails(t *testing.T) {
	s, _ := s3Env(t, map[string][]byte{"x": []byte("x")})
	if _, err := source.Open(t.Context(), "s3://nobucket/p", source.WithPolicy(fastPolicy())); err == nil || !strings.Contains(err.Error(), "s3://nobucket") || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Errorf("missing bucket: %v; want the URL and the provider's NoSuchBucket", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
	_, err := source.Open(t.Context(), "s3://bkt/data", source.WithPolicy(fastPolicy()))
	if err == nil || !errors.Is(err, source.ErrDenied) || !strings.Contains(err.Error(), "s3://bkt/data") {
		t.Errorf("wrong secret: %v; want source.ErrDenied naming the URL", err)
	}
	if err != nil && (strings.Contains(err.Error(), "wrong-secret-value") || strings.Contains(err.Error(), s.AccessKey)) {
		t.Errorf("the error shows a credential: %v", err)
	}
}

// TestS3NoETag: a store that gives no ETag (versitygw serving files put in
// its directory by hand) is read by size and modification time.
func TestS3NoETag(t *testing.T) {
	s, _ := s3Env(t, nil)
	os.MkdirAll(filepath.Join(s.Dir, "bkt", "data"), 0o755)
	os.WriteFile(filepath.Join(s.Dir, "bkt", "data", "raw.jpg"), []byte("raw bytes"), 0o644)
	st, err := source.Open(t.Context(), "s3://bkt/data", source.WithPolicy(fastPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := listAll(t, st)["raw.jpg"]
	if o.Size != 9 {
		t.Fatalf("listed %+v", o)
	}
	got := make([]byte, 3)
	if err := st.ReadRange(t.Context(), o, 4, got); err != nil || string(got) != "byt" {
		t.Fatalf("ReadRange = %q, %v", got, err)
	}
}

// TestOpenRefuses: a store URL with a credential, a query or no bucket is
// refused before any request, and the message never shows the secret.
func TestOpenRefuses(t *testing.T) {
	for _, u := range []string{"s3://", "s3://b/p?endpoint=x", "s3://key:secret@b/p", "gs://key:secret@b/p", "azblob://key:secret@c/p"} {
		_, err := source.Open(t.Context(), u)
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q)'s error shows the secret: %v", u, err)
		}
	}
}
