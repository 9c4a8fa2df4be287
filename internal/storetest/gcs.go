package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/stoker-dev/stoker/internal/localnet"
)

// FakeGCSServerVersion is the fake-gcs-server the tests run, the
// Makefile's FAKE_GCS_SERVER_VERSION (a test checks that they agree).
const FakeGCSServerVersion = "v1.56.1"

var fakeGCSServer = tool{
	name:    "fake-gcs-server",
	envVar:  "STOKER_FAKE_GCS_SERVER",
	module:  "github.com/fsouza/fake-gcs-server",
	version: FakeGCSServerVersion,
}

// GCS is a fake-gcs-server process serving GCS's JSON and XML APIs over
// plain HTTP on a loopback port, keeping its buckets in a directory. It
// asks for no credentials.
type GCS struct {
	// Endpoint is the server's URL, http://127.0.0.1:PORT.
	Endpoint string
	// Dir is the directory its buckets are kept in.
	Dir string

	proc *proc
	http *http.Client
}

// GCSObject is what GCS says of an object it stored.
type GCSObject struct {
	Generation int64  // GCS's version number of the object
	ETag       string // unquoted, as the JSON API gives it
	Size       int64
}

// StartGCS starts fake-gcs-server keeping its buckets in dir, on a free
// loopback port, waits until it answers, and stops it when the test ends.
// It fails the test, saying to run make setup, when the pinned
// fake-gcs-server is not installed ($STOKER_FAKE_GCS_SERVER names
// another binary).
//
// Put objects through it (CreateBucket, Put, PutTree): the files it keeps
// in dir are in its own layout.
func StartGCS(t T, dir string) *GCS {
	t.Helper()
	exe := fakeGCSServer.path(t)
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := &GCS{Dir: dir, http: &http.Client{}}
	for attempt := 1; ; attempt++ {
		port, err := localnet.FreePortOn("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		g.Endpoint = "http://" + host
		args := []string{
			"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
			// The XML API (the Go client's reads) is served for requests
			// whose Host is the public host.
			"-public-host", host, "-external-url", g.Endpoint,
			"-backend", "filesystem", "-filesystem-root", dir,
			"-log-level", "warn",
		}
		env := []string{"PATH=/usr/bin:/bin", "HOME=" + os.TempDir(), "TMPDIR=" + os.TempDir()}
		g.proc, err = startProc("fake-gcs-server", exe, args, env, g.healthy)
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("retrying on another port: %v", err)
	}
	g.proc.cleanup(t)
	return g
}

func (g *GCS) healthy(ctx context.Context) error {
	_, err := g.call(ctx, http.MethodGet, "/storage/v1/b", "", nil)
	return err
}

// Stop kills the server now; the test's cleanup would otherwise do it.
func (g *GCS) Stop(t T) {
	t.Helper()
	if err := g.proc.stop(); err != nil {
		t.Fatal(err)
	}
}

// URL is the gs:// URL of prefix in bucket, as --dataset takes it.
func (g *GCS) URL(bucket, prefix string) string {
	return "gs://" + bucket + "/" + strings.TrimPrefix(prefix, "/")
}

// Env is the environment that points Google's storage client (and
// gocloud.dev's gcsblob) at this server, with no credentials:
// STORAGE_EMULATOR_HOST.
func (g *GCS) Env() []string { return g.EnvFor(g.Endpoint) }

// EnvFor is Env with another endpoint, such as a fault proxy's (which must
// then send the server's own Host: faultproxy.WithTargetHost).
func (g *GCS) EnvFor(endpoint string) []string {
	return []string{"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(endpoint, "http://"), "STORAGE_EMULATOR_HOST_GRPC="}
}

// CreateBucket makes bucket.
func (g *GCS) CreateBucket(t T, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"name": bucket})
	if _, err := g.call(ctx, http.MethodPost, "/storage/v1/b", "application/json", body); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// Put writes data as the object name in bucket (a simple media upload).
func (g *GCS) Put(t T, bucket, name string, data []byte) GCSObject {
	t.Helper()
	o, err := g.put(bucket, name, data)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (g *GCS) put(bucket, name string, data []byte) (GCSObject, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	p := "/upload/storage/v1/b/" + url.PathEscape(bucket) + "/o?uploadType=media&name=" + url.QueryEscape(name)
	resp, err := g.call(ctx, http.MethodPost, p, "application/octet-stream", data)
	if err != nil {
		return GCSObject{}, fmt.Errorf("put gs://%s/%s: %w", bucket, name, err)
	}
	var o struct {
		Generation string `json:"generation"`
		ETag       string `json:"etag"`
		Size       string `json:"size"`
	}
	if err := json.Unmarshal(resp, &o); err != nil {
		return GCSObject{}, fmt.Errorf("put gs://%s/%s: %w", bucket, name, err)
	}
	gen, err1 := strconv.ParseInt(o.Generation, 10, 64)
	size, err2 := strconv.ParseInt(o.Size, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return GCSObject{}, fmt.Errorf("put gs://%s/%s: %s: %w", bucket, name, resp, err)
	}
	return GCSObject{Generation: gen, ETag: o.ETag, Size: size}, nil
}

// Delete deletes the object name in bucket through the JSON API.
func (g *GCS) Delete(t T, bucket, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	p := "/storage/v1/b/" + url.PathEscape(bucket) + "/o/" + url.PathEscape(name)
	if _, err := g.call(ctx, http.MethodDelete, p, "", nil); err != nil {
		t.Fatalf("delete gs://%s/%s: %v", bucket, name, err)
	}
}

// PutTree copies every regular file under dir into bucket, as PutTree of
// S3 does, and returns what GCS says of each object by name.
func (g *GCS) PutTree(t T, bucket, prefix, dir string) map[string]GCSObject {
	t.Helper()
	var mu sync.Mutex
	objs := map[string]GCSObject{}
	err := putTree(dir, prefix, func(name string, data []byte) error {
		o, err := g.put(bucket, name, data)
		mu.Lock()
		objs[name] = o
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatalf("PutTree %s into gs://%s/%s: %v", dir, bucket, prefix, err)
	}
	return objs
}

// call makes one JSON API request and returns the answer's body, or an
// error that quotes it when the status is not 2xx.
func (g *GCS) call(ctx context.Context, method, p, contentType string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, g.Endpoint+p, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, p, resp.Status, bytes.TrimSpace(data))
	}
	return data, nil
}
