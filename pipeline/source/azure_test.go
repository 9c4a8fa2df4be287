package source

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	pol := Policy{Attempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, RequestTimeout: 30 * time.Second}
	_, err := Open(t.Context(), "azblob://ctr/data", WithPolicy(pol))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "azblob://ctr") {
		t.Fatalf("open: %v; want ErrUnavailable naming the store", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("the store got %d requests for 2 attempts; want 2 (one per attempt)", got)
	}
}
