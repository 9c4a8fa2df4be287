package bucket

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/storetest"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// TestAzureOneTryPerAttempt: the Azure client does not retry inside the
// store's tries. A loopback server that answers every request 503 gets
// exactly Attempts requests for the opening listing; with the SDK's own
// retries each attempt would be up to 4.
func TestAzureOneTryPerAttempt(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("x-ms-error-code", "ServerBusy")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for k, v := range map[string]string{
		"AZURE_STORAGE_ACCOUNT":           "acct",
		"AZURE_STORAGE_KEY":               "",
		"AZURE_STORAGE_CONNECTION_STRING": "",
		"AZURE_STORAGE_SAS_TOKEN":         "sv=2020-01-01&sig=x",
		"AZURE_STORAGE_DOMAIN":            strings.TrimPrefix(srv.URL, "http://"),
		"AZURE_STORAGE_PROTOCOL":          "http",
	} {
		t.Setenv(k, v)
	}
	pol := source.Policy{Attempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, RequestTimeout: 30 * time.Second}
	_, err := source.Open(t.Context(), "azblob://ctr/data", source.WithPolicy(pol))
	if !errors.Is(err, source.ErrUnavailable) || !strings.Contains(err.Error(), "azblob://ctr") {
		t.Fatalf("open: %v; want source.ErrUnavailable naming the store", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("the store got %d requests for 2 attempts; want 2 (one per attempt)", got)
	}
}

// azureEnv starts Azurite on loopback holding container "ctr" with blobs
// under "data/", and a fault proxy in front of it, and points the azblob
// variables at the proxy.
func azureEnv(t *testing.T, objs map[string][]byte) (*storetest.Azure, *faultproxy.Proxy) {
	t.Helper()
	a := storetest.StartAzure(t, t.TempDir())
	a.CreateContainer(t, "ctr")
	for k, v := range objs {
		a.Put(t, "ctr", "data/"+k, v)
	}
	p, err := faultproxy.New("http://"+a.Host, 1, faultproxy.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for _, kv := range a.EnvFor(strings.TrimPrefix(p.URL(), "http://")) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return a, p
}

// TestAzureStore is TestS3Store on Azurite (what every Store does is
// TestStoreConformance's): Azure lists ETags unquoted, as versions are
// compared, though it sends them quoted; throttled and truncated answers
// are retried, a stream cut short resumes, and a store that is down is
// named with its answer.
func TestAzureStore(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	_, p := azureEnv(t, map[string][]byte{"a/1.jpg": []byte("one"), "b/2.jpg": []byte("second"), "big.tar": big})
	st, err := source.Open(t.Context(), "azblob://ctr/data", source.WithPolicy(fastPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	objs := listAll(t, st)
	if len(objs) != 3 || objs["a/1.jpg"].Size != 3 || objs["a/1.jpg"].Version == "" || strings.Contains(objs["a/1.jpg"].Version, `"`) {
		t.Fatalf("List = %+v: want 3 blobs with sizes and unquoted ETags", objs)
	}
	buf := make([]byte, 4)

	t.Run("throttled and truncated answers are retried", func(t *testing.T) {
		p.SetPlan(faultproxy.Plan{Rates: map[faultproxy.Kind]float64{faultproxy.SlowDown: 0.15, faultproxy.TooManyRequests: 0.05,
			faultproxy.Truncate: 0.1, faultproxy.Reset: 0.1}, Only: faultproxy.ObjectGETs})
		defer p.SetPlan(faultproxy.Plan{})
		pol := fastPolicy()
		pol.Attempts = 12 // 40% of tries fail: 12 tries give up once in 60,000 reads
		st, err := source.Open(t.Context(), "azblob://ctr/data", source.WithPolicy(pol))
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
		if p.Stats().Total() == 0 {
			t.Errorf("the proxy broke no request: %+v", p.Stats())
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
		p.SetPlan(faultproxy.Plan{Down: faultproxy.InternalError})
		defer p.SetPlan(faultproxy.Plan{})
		err := st.ReadRange(t.Context(), objs["b/2.jpg"], 0, buf)
		if !source.IsStoreFault(err) || !strings.Contains(err.Error(), "azblob://ctr") || !strings.Contains(err.Error(), "500") {
			t.Fatalf("read from a store that is down: %v; want a store fault naming the store and its 500", err)
		}
	})
}

// TestAzureCredentials: a connection string reaches the store by itself;
// set beside a key, a SAS token or another account it is an error naming
// both variables, never silently ignored; no account at all says what to
// set. No credential shows in a message.
func TestAzureCredentials(t *testing.T) {
	a, _ := azureEnv(t, map[string][]byte{"x.jpg": []byte("x")})
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "")
	t.Setenv("AZURE_STORAGE_DOMAIN", "")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", a.ConnectionString())
	st, err := source.Open(t.Context(), "azblob://ctr/data", source.WithPolicy(fastPolicy()))
	if err != nil {
		t.Fatalf("by connection string: %v", err)
	}
	if n := len(listAll(t, st)); n != 1 {
		t.Errorf("by connection string: %d blobs, want 1", n)
	}
	st.Close()
	for _, tc := range []struct {
		name, env, value, want string
	}{
		{"a key too", "AZURE_STORAGE_KEY", storetest.AzuriteKey, "both AZURE_STORAGE_CONNECTION_STRING and AZURE_STORAGE_KEY are set"},
		{"a SAS token too", "AZURE_STORAGE_SAS_TOKEN", "sv=2020-01-01&sig=secret-sig", "both AZURE_STORAGE_CONNECTION_STRING and AZURE_STORAGE_SAS_TOKEN are set"},
		{"another account", "AZURE_STORAGE_ACCOUNT", "other", `is for account "devstoreaccount1" but AZURE_STORAGE_ACCOUNT is "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, err := source.Open(t.Context(), "azblob://ctr/data", source.WithPolicy(fastPolicy()))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), storetest.AzuriteKey) || strings.Contains(err.Error(), "secret-sig") {
				t.Errorf("the error shows a credential: %v", err)
			}
		})
	}
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	if _, err := source.Open(t.Context(), "azblob://ctr/data"); err == nil || !strings.Contains(err.Error(), "set AZURE_STORAGE_ACCOUNT") ||
		!strings.Contains(err.Error(), "AZURE_STORAGE_CONNECTION_STRING") {
		t.Errorf("no account: %v; want what to set", err)
	}
}
