package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// runIndexCmd runs `stoker index args...` with env added, and returns its
// standard output, failing the test if it fails.
func runIndexCmd(t *testing.T, ctx context.Context, env []string, args ...string) string {
	t.Helper()
	out, errOut, err := runStoker(ctx, env, append([]string{"index"}, args...)...)
	if err != nil {
		t.Fatalf("stoker index %v: %v\n%s%s", args, err, out, errOut)
	}
	return out
}

// runStoker runs the stoker binary with args, env added to this process's.
func runStoker(ctx context.Context, env []string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// linkTree makes a copy of the tree at src (hard links where it can).
func linkTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if os.Link(p, to) == nil {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil {
			err = os.WriteFile(to, b, 0o644)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// epochSums runs an epoch of spec on addr and returns its fingerprint and
// its batches' hashes (pixels, labels, indices), checking the epoch whole.
func epochSums(t *testing.T, ctx context.Context, addr string, spec *stokerv1.JobSpec, size int) (string, [][32]byte) {
	t.Helper()
	res := consumeEpoch(t, ctx, addr, spec, consumeOpts{})
	if spec.GetShuffleMode() != stokerv1.ShuffleMode_SHUFFLE_MODE_BLOCK {
		checkEpoch(t, res, spec, size)
	}
	var sums [][32]byte
	for _, b := range res.batches {
		if len(b.hdr.GetErrors()) > 0 {
			t.Errorf("batch %d: sample errors %v", b.hdr.GetNumber(), b.hdr.GetErrors())
		}
		sums = append(sums, b.sum())
	}
	return res.info.GetFingerprint(), sums
}

// s3Env starts a real S3 server (versitygw) on loopback with bucket bkt
// and sets this process's AWS variables to reach it (the stoker processes
// the test starts inherit them).
func s3Env(t *testing.T) *storetest.S3 {
	t.Helper()
	s := s3Store(t)
	setEnv(t, s.Env())
	return s
}

// s3Store is s3Env for a parallel test: it sets no variable of this
// process (t.Setenv cannot be called in a parallel test, and the tests
// running beside it have stores of their own); the test hands s.Env() to
// the stoker processes it starts (serveConfig.env, runIndexCmd's env).
func s3Store(t *testing.T) *storetest.S3 {
	t.Helper()
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "bkt")
	return s
}

// setEnv sets this process's variables to env's KEY=value pairs for the
// test.
func setEnv(t *testing.T, env []string) {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// faultProxy starts a fault proxy (seed, plan) in front of s and returns
// the variables that point a stoker process at it (serveConfig.env,
// runIndexCmd's env); it sets none of this process's.
func faultProxy(t *testing.T, s *storetest.S3, seed uint64, plan faultproxy.Plan) (*faultproxy.Proxy, []string) {
	t.Helper()
	p, err := faultproxy.New(s.Endpoint, seed, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, s.EnvFor(p.URL())
}

// TestIndexAndServeSources: the same job's epochs, batch for batch
// (pixels, labels, indices), and the same fingerprint, from an ImageFolder
// served from its local path (scanned), from a local copy with a manifest
// `stoker index` wrote beside it, from a real S3 server (versitygw) with a
// manifest in the bucket and without one (listed at start), and from a
// coordinator on the local path whose only maker is a peer reading the
// bucket; and the same for WebDataset shards, with the global and the
// block shuffle. No credential shows in any log.
func TestIndexAndServeSources(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and versitygw processes")
	}
	ctx := processTest(t, 4*time.Minute)
	const n = 24
	data := writeDataset(t, n, 3, 0)
	s := s3Env(t)
	s.PutTree(t, "bkt", "if/", data)
	s.PutTree(t, "bkt", "bare/", data)
	shards := t.TempDir()
	storetest.WriteShards(t, data, shards, 5)
	s.PutTree(t, "bkt", "wds/", shards)

	local := linkTree(t, data)
	out := runIndexCmd(t, ctx, nil, local)
	wrote := regexp.MustCompile(`^wrote (\S+): imagefolder, 24 samples in 24 objects, 3 classes, \d+ bytes, fingerprint ([0-9a-f]{32}), in \S+\n$`)
	if m := wrote.FindStringSubmatch(out); m == nil || m[1] != filepath.Join(local, ".stoker", "manifest") {
		t.Fatalf("stoker index said %q", out)
	}
	out = runIndexCmd(t, ctx, nil, s.URL("bkt", "if/"))
	if !strings.HasPrefix(out, "wrote s3://bkt/if/.stoker/manifest: imagefolder, 24 samples") {
		t.Fatalf("stoker index of the bucket said %q", out)
	}
	out = runIndexCmd(t, ctx, nil, s.URL("bkt", "wds/"), "--concurrency", "2")
	if !strings.HasPrefix(out, "wrote s3://bkt/wds/.stoker/manifest: webdataset, 24 samples in 5 objects, 3 classes") {
		t.Fatalf("stoker index of the shards said %q", out)
	}

	serve := func(name, dataset string, args ...string) *serveProc {
		return launchServe(t, serveConfig{name: name, dataset: dataset, workers: 1, args: args})
	}
	procs := map[string]*serveProc{
		"local":        serve("local", data),
		"local+index":  serve("local+index", local),
		"s3+index":     serve("s3+index", s.URL("bkt", "if/")),
		"s3":           serve("s3", s.URL("bkt", "bare/")),
		"wds":          serve("wds", shards),
		"s3 wds+index": serve("s3 wds+index", s.URL("bkt", "wds/")),
	}
	for _, p := range procs {
		p.waitReady(t, ctx)
	}
	peer := procs["s3+index"]
	coord := startServe(t, ctx, serveConfig{name: "coordinator", dataset: data, workers: 0, peers: peer.addr})
	waitPeersReady(t, ctx, coord, 1)

	check := func(what string, spec *stokerv1.JobSpec, want string, others ...string) {
		t.Helper()
		fp, sums := epochSums(t, ctx, procs[want].addr, spec, n)
		for _, o := range others {
			addr := coord.addr
			if o != "coordinator" {
				addr = procs[o].addr
			}
			ofp, osums := epochSums(t, ctx, addr, spec, n)
			if ofp != fp {
				t.Errorf("%s: %s's fingerprint %s, %s's %s", what, o, ofp, want, fp)
			}
			if len(osums) != len(sums) {
				t.Errorf("%s: %s sent %d batches, %s %d", what, o, len(osums), want, len(sums))
				continue
			}
			for k := range sums {
				if osums[k] != sums[k] {
					t.Errorf("%s: batch %d from %s differs from %s's", what, k, o, want)
				}
			}
		}
	}
	check("imagefolder", testJob(5, 7), "local", "local+index", "s3+index", "s3", "coordinator")
	check("webdataset", testJob(5, 7), "wds", "s3 wds+index")
	block := testJob(5, 8)
	block.ShuffleMode, block.ShuffleWindow = stokerv1.ShuffleMode_SHUFFLE_MODE_BLOCK, 2
	check("webdataset, block shuffle", block, "wds", "s3 wds+index")

	for name, msg := range map[string]string{
		"local":        "dataset scanned (no manifest)",
		"local+index":  "dataset opened from its manifest",
		"s3+index":     "dataset opened from its manifest",
		"s3":           "dataset listed and scanned (no manifest)",
		"s3 wds+index": "dataset opened from its manifest",
	} {
		if len(procs[name].findLogs(msg, map[string]string{"dataset": "ds"})) != 1 {
			t.Errorf("%s did not log %q", name, msg)
		}
	}
	for _, p := range append([]*serveProc{coord}, peer) {
		if logs := p.logs.String(); strings.Contains(logs, s.SecretKey) || strings.Contains(logs, s.AccessKey) {
			t.Errorf("%s logged a credential", p.name)
		}
	}
	for _, p := range procs {
		if logs := p.logs.String(); strings.Contains(logs, s.SecretKey) || strings.Contains(logs, s.AccessKey) {
			t.Errorf("%s logged a credential", p.name)
		}
	}
	if got := peer.metric(t, ctx, "stoker_store_requests_total", `store="s3://bkt"`, `op="get"`, `outcome="ok"`); got < n {
		t.Errorf("the peer on the bucket counted %v GETs, want at least %d", got, n)
	}
}

// TestIndexReadOnlyBucket: stoker index of a bucket it may not write says
// so and how to write the manifest elsewhere; --out writes it to a local
// file, and serve --manifest uses it.
func TestIndexReadOnlyBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and versitygw processes")
	}
	ctx := processTest(t, 2*time.Minute)
	data := writeDataset(t, 8, 2, 0)
	s := s3Env(t)
	s.PutTree(t, "bkt", "if/", data)
	ro := s.ReadOnly(t)
	env := ro.Env()
	url := s.URL("bkt", "if")
	_, errOut, err := runStoker(ctx, env, "index", url)
	if err == nil || !strings.Contains(errOut, "s3://bkt/if/.stoker/manifest") || !strings.Contains(errOut, "--out") {
		t.Fatalf("stoker index of a read-only bucket: %v\n%s", err, errOut)
	}
	mpath := filepath.Join(t.TempDir(), "if.manifest")
	runIndexCmd(t, ctx, env, "--out", mpath, url)
	m, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.DecodeManifest(bytes.NewReader(m), 0); err != nil {
		t.Fatal(err)
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	p := startServe(t, ctx, serveConfig{name: "ro", dataset: url, workers: 1, args: []string{"--manifest", "ds=" + mpath}})
	if len(p.findLogs("dataset opened from its manifest", map[string]string{"manifest": mpath})) != 1 {
		t.Errorf("serve did not use --manifest %s", mpath)
	}
	checkEpoch(t, consumeEpoch(t, ctx, p.addr, testJob(4, 1), consumeOpts{}), testJob(4, 1), 8)
}

// TestServeStoreFailsAtStart: serve exits non-zero at start, naming the
// URL and the store's answer, when the bucket is missing, the credentials
// are refused, or the manifest named is another dataset's or corrupt; and
// never prints the secret.
func TestServeStoreFailsAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and versitygw processes")
	}
	ctx := processTest(t, 2*time.Minute)
	data := writeDataset(t, 4, 2, 0)
	s := s3Env(t)
	s.PutTree(t, "bkt", "if/", data)
	s.PutTree(t, "bkt", "other/", writeDataset(t, 4, 2, 1))
	runIndexCmd(t, ctx, nil, s.URL("bkt", "other/"))
	corrupt := filepath.Join(t.TempDir(), "corrupt.manifest")
	os.WriteFile(corrupt, []byte("STOKERMF\x01\x00\x00\x00 not a manifest"), 0o644)
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"missing bucket", nil, []string{"--dataset", "ds=s3://nobucket/x"}, []string{"dataset ds", "s3://nobucket/x", "NoSuchBucket",
			"there is no bucket nobucket at this endpoint: check the URL's bucket name, and AWS_ENDPOINT_URL and AWS_REGION"}},
		{"wrong secret", []string{"AWS_SECRET_ACCESS_KEY=wrong-secret-value"}, []string{"--dataset", "ds=" + s.URL("bkt", "if/")},
			[]string{"dataset ds", "s3://bkt/if/", "access denied", "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"}},
		{"no credentials", []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="}, []string{"--dataset", "ds=" + s.URL("bkt", "if/")},
			[]string{"dataset ds", "s3://bkt/if/", "no AWS credentials were found", "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"}},
		{"wrong endpoint port", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:1"}, []string{"--dataset", "ds=" + s.URL("bkt", "if/")},
			[]string{"dataset ds", "connection refused", "cannot reach the store at http://127.0.0.1:1 (AWS_ENDPOINT_URL"}},
		{"another dataset's manifest", nil, []string{"--dataset", "ds=" + s.URL("bkt", "if/"), "--manifest", "ds=s3://bkt/other/.stoker/manifest"},
			[]string{"dataset ds", "made of s3://bkt/other/", "stoker index"}},
		{"corrupt manifest", nil, []string{"--dataset", "ds=" + s.URL("bkt", "if/"), "--manifest", "ds=" + corrupt},
			[]string{"dataset ds", corrupt, "manifest not valid", "stoker index s3://bkt/if/"}},
		{"manifest of no dataset", nil, []string{"--dataset", "ds=" + data, "--manifest", "other=" + corrupt},
			[]string{`manifest for "other": no such dataset`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--workers", "1"}, c.args...)
			_, errOut, err := runStoker(ctx, c.env, args...)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("serve: %v, want a non-zero exit\n%s", err, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("serve's error does not say %q:\n%s", w, errOut)
				}
			}
			if strings.Contains(errOut, "wrong-secret-value") || strings.Contains(errOut, s.SecretKey) {
				t.Errorf("serve printed a secret:\n%s", errOut)
			}
		})
	}
}

// TestServeStoreDown: a store that answers every request with 503
// SlowDown ends the trainer's job with UNAVAILABLE naming the store and
// its last answer, within the lease attempts' bound (the test's deadline
// turns a hang into a failure), and the server stays up: once the store is
// back, the next job's epoch is whole.
func TestServeStoreDown(t *testing.T) {
	storeDownEpoch(t, faultproxy.SlowDown, nil, "SlowDown")
}

// TestServeStoreStalls: a store that holds every request (no answer at
// all, not an error) ends the trainer's job with UNAVAILABLE naming the
// store and its last answer: that none came within --store-timeout. A read
// gives up after at most --store-attempts tries of --store-timeout plus
// backoff (source.Policy.MaxWait), short here and well under the lease
// timeout (a lease that runs out first says that its deadline passed, and
// on which store its samples waited); the test's deadline is the generous
// bound that turns a hang into a failure. Once the store answers again,
// the next job's epoch is whole.
func TestServeStoreStalls(t *testing.T) {
	storeDownEpoch(t, faultproxy.Stall, []string{"--store-timeout=200ms", "--store-attempts=2"}, "no answer within 200ms")
}

// storeDownEpoch serves a bucket through a proxy that then fails every
// request with fault, and wants the trainer's epoch to end with
// UNAVAILABLE naming the bucket and answer; then, the proxy healed, the
// next epoch whole.
func storeDownEpoch(t *testing.T, fault faultproxy.Kind, args []string, answer string) {
	waitingTest(t)
	ctx := processTest(t, 3*time.Minute)
	const n = 16
	data := writeDataset(t, n, 2, 0)
	s := s3Store(t)
	s.PutTree(t, "bkt", "if/", data)
	runIndexCmd(t, ctx, s.Env(), s.URL("bkt", "if/"))
	p, env := faultProxy(t, s, 1, faultproxy.Plan{})
	srv := startServe(t, ctx, serveConfig{name: "s3", dataset: s.URL("bkt", "if/"), workers: 2, args: args, env: env})
	if err := p.SetPlan(faultproxy.Plan{Down: fault}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := runEpoch(ctx, srv.addr, testJob(4, 3), consumeOpts{})
	if err == nil || !strings.Contains(err.Error(), "code = Unavailable") || !strings.Contains(err.Error(), "s3://bkt") ||
		!strings.Contains(err.Error(), answer) {
		t.Fatalf("epoch against a store that is down: %v; want UNAVAILABLE naming s3://bkt and %q", err, answer)
	}
	if st := p.Stats(); st.Faults[fault] == 0 {
		t.Fatalf("the proxy answered no request with its fault (%+v): the error came from elsewhere", st)
	}
	t.Logf("the trainer's error, after %v: %v", time.Since(start).Round(time.Millisecond), err)
	p.SetPlan(faultproxy.Plan{})
	checkEpoch(t, consumeEpoch(t, ctx, srv.addr, testJob(4, 4), consumeOpts{}), testJob(4, 4), n)
}

// TestServeStoreFaults: a store behind a proxy that answers 503 SlowDown
// and 429, resets connections, truncates bodies and holds requests, each
// at a set rate on object reads: every epoch of two jobs still delivers
// each sample once, with the same bytes as the same job served from the
// local path, and no sample error. After the jobs, the server's read-ahead
// holds no bytes, its goroutines are back to where they were before them
// (once the idle connections to the store close, 20 s after their last
// use), and so is its heap less what the byte cache holds, within
// heapSlack (a fraction of the bytes read from the store).
func TestServeStoreFaults(t *testing.T) {
	waitingTest(t)
	ctx := processTest(t, 4*time.Minute)
	const n = 48
	data := writeDataset(t, n, 3, 0)
	s := s3Store(t)
	s.PutTree(t, "bkt", "if/", data)
	runIndexCmd(t, ctx, s.Env(), s.URL("bkt", "if/"))
	spec := testJob(8, 7)

	local := startServe(t, ctx, serveConfig{name: "local", dataset: data, workers: 2})
	_, want := epochSums(t, ctx, local.addr, spec, n)

	p, env := faultProxy(t, s, 7, faultproxy.Plan{
		Rates: map[faultproxy.Kind]float64{faultproxy.SlowDown: 0.1, faultproxy.TooManyRequests: 0.05,
			faultproxy.Reset: 0.05, faultproxy.Truncate: 0.05, faultproxy.Stall: 0.03},
		StallFor: 300 * time.Millisecond, Only: faultproxy.ObjectGETs,
	})
	srv := startServe(t, ctx, serveConfig{name: "s3", dataset: s.URL("bkt", "if/"), workers: 2, args: []string{"--pprof"}, env: env})
	before := srv.metric(t, ctx, "go_goroutines")
	heapBefore := heapLessCache(t, ctx, srv)
	// Two jobs: the first reads through the faults, the second mostly from
	// the byte cache; both must give the local path's bytes.
	for job := range 2 {
		_, got := epochSums(t, ctx, srv.addr, spec, n)
		if len(got) != len(want) {
			t.Fatalf("job %d: %d batches through the faults, %d from the local path", job, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("job %d, batch %d: other bytes through the faults than from the local path", job, i)
			}
		}
	}
	st := p.Stats()
	if st.Total() == 0 {
		t.Fatalf("the proxy injected no fault (%+v): the test tested nothing", st)
	}
	t.Logf("faults injected: %v of %d requests", st.Faults, st.Requests)

	// Back to baseline, waited for as an event under the test's deadline:
	// the read-ahead holds nothing, the goroutines are as many as before,
	// and the heap (after a forced GC), less what the byte cache holds by
	// design, is within heapSlack of what it was before the jobs.
	fetched := srv.metric(t, ctx, "stoker_store_bytes_total")
	var heap float64
	for {
		held, g := srv.metric(t, ctx, "stoker_read_ahead_bytes"), srv.metric(t, ctx, "go_goroutines")
		heap = heapLessCache(t, ctx, srv)
		if held == 0 && g <= before && heap-heapBefore <= heapSlack {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after the jobs: read-ahead holds %v bytes, %v goroutines (%v before them), heap less the byte cache %.0f bytes (%.0f before them; %.0f bytes read from the store)",
				held, g, before, heap, heapBefore, fetched)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("heap less the byte cache: %.0f bytes before the jobs, %.0f after (%.0f bytes read from the store)", heapBefore, heap, fetched)
}

// heapSlack is how far the heap less the byte cache may stay above its
// level before a job once the job is over: what a server keeps by design
// besides the byte cache (the decoder index, pooled batch buffers, the
// store's connections and their buffers) is well under it; a leak of what
// a job reads or makes is not.
const heapSlack = 8 << 20

// heapLessCache is srv's heap in use, after a forced garbage collection
// (pprof's heap profile with gc=1: srv runs with --pprof), less the bytes
// its byte cache holds in memory.
func heapLessCache(t *testing.T, ctx context.Context, srv *serveProc) float64 {
	t.Helper()
	for range 2 { // twice: what sync.Pools held goes at the second
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.metricsAddr+"/debug/pprof/heap?gc=1", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: forcing a GC: %v", srv.name, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: /debug/pprof/heap: %s", srv.name, resp.Status)
		}
	}
	ms, err := srv.metrics(ctx)
	if err != nil {
		t.Fatalf("%s metrics: %v", srv.name, err)
	}
	return sumSeries(ms, "go_memstats_heap_inuse_bytes") - sumSeries(ms, "stoker_byte_cache_bytes", `tier="memory"`)
}
