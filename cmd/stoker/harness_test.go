package main

// Shared helpers for the process-level tests (fault_test.go, dns_test.go,
// netns_test.go): the stoker binary built once, generated datasets, real
// `stoker serve` processes on loopback, their metrics and JSON logs, and a
// raw Feed-stream trainer that checks an epoch batch by batch.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/internal/buildlock"
	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/internal/waitfor"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// testLeaseTimeout is the --lease-timeout of every coordinator here.
const testLeaseTimeout = 2 * time.Second

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// defaultParallel is how many parallel tests (parallelTest) run at a time
// unless -test.parallel (go test -parallel) says: more than go test's
// default, GOMAXPROCS, as most of them wait on their processes' clocks
// (leases, back-offs, a trainer's steps) rather than on this process.
const defaultParallel = 4

func TestMain(m *testing.M) {
	if argv := os.Getenv(peakChildEnv); argv != "" {
		os.Exit(peakTrampoline(argv))
	}
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet && runtime.GOMAXPROCS(0) < defaultParallel {
		flag.Set("test.parallel", strconv.Itoa(defaultParallel))
	}
	code := m.Run()
	for _, dir := range []string{binDir, baseDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// stokerBinary builds the stoker binary once per test binary run.
func stokerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "stoker-test-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "stoker")
		start := time.Now()
		defer func() { t.Logf("built the stoker binary in %v", time.Since(start).Round(time.Millisecond)) }()
		defer buildlock.Take()()
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// processTest prepares a test that runs stoker serve processes: it builds
// the binary and the test images first, outside the test's deadline, which
// then bounds only the test's own run (and turns a hang into a failure).
func processTest(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	stokerBinary(t)
	baseOnce.Do(writeBaseImages)
	if baseErr != nil {
		t.Fatal(baseErr)
	}
	return testCtx(t, d)
}

// waitingTest marks t as a test that spends most of its time waiting on
// a stoker process's clock, not on the CPU: the coordinator's back-off
// between a failing batch's tries (0.1 s doubling, 8 tries: some 25 s),
// a fault proxy's hold, idle store connections' timeout. It is a
// parallelTest.
func waitingTest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs stoker serve and versitygw processes")
	}
	parallelTest(t)
}

// parallelTest marks t as a process test that runs beside the other
// parallel ones (t.Parallel: after the package's sequential tests, at
// most -test.parallel at a time, which TestMain raises: see
// defaultParallel), so that one's waits overlap another's work. Such a
// test has processes, temporary directories and loopback ports (port 0)
// of its own; it takes its store's variables through serveConfig.env and
// runIndexCmd's env (s3Store, faultProxy), never t.Setenv; it changes no
// process-wide state (signals, working directory, umask, flags); and it
// checks no time, CPU share or RSS, only what the processes answer, with
// deadlines that only turn a hang into a failure. Tests that measure a
// process's CPU or memory, or need the machine to themselves (CPU hogs,
// victims of a hog, RSS floods), stay sequential. Call it first (after
// a -short skip): before processTest, whose deadline would run while the
// test waits for its turn.
func parallelTest(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// hangGuard bounds a wait for something a stoker serve process does (its
// address, a log line, a metric, its exit): the wait returns as soon as it
// happens, so the bound only turns a hang into a failure, and is generous
// enough for a loaded machine. The test's own deadline (testCtx) bounds
// it too.
const hangGuard = 2 * time.Minute

// buildCtx bounds a build a test runs (go build, make): a hang guard, not
// a time the build must keep, as a build on a loaded machine takes minutes.
// It ends a minute before the test binary's own deadline (go test
// -timeout) would, or in 25 minutes without one, and with the test.
func buildCtx(t *testing.T) context.Context {
	end := time.Now().Add(25 * time.Minute)
	if d, ok := t.Deadline(); ok {
		end = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), end)
	t.Cleanup(cancel)
	return ctx
}

// testCtx is the test's deadline: a hang anywhere (a Recv, a wait for a
// log line or a metric) turns into a failure when it passes.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Test datasets are made of a few distinct noisy JPEGs (noisy, so that
// decoding one takes milliseconds and a batch is slow enough for faults
// to land while leases are in flight), written once per test binary run
// and hard-linked under many names.
const (
	baseImages = 32
	baseSide   = 832
)

var (
	baseOnce  sync.Once
	baseDir   string
	baseErr   error
	baseFiles []string
)

func writeBaseImages() {
	baseDir, baseErr = os.MkdirTemp("", "stoker-test-images-")
	if baseErr != nil {
		return
	}
	baseFiles = make([]string, baseImages)
	errs := make([]error, baseImages)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < baseImages; i += 2 {
				baseFiles[i] = filepath.Join(baseDir, fmt.Sprintf("%02d.jpg", i))
				errs[i] = writeNoisyJPEG(baseFiles[i], baseSide+(i*37)%96, baseSide-(i*53)%96, uint32(i))
			}
		}()
	}
	wg.Wait()
	baseErr = errors.Join(errs...)
}

// writeNoisyJPEG writes a w×h gradient with noise, distinct per seed.
func writeNoisyJPEG(path string, w, h int, seed uint32) error {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	s := seed*7919 + 1
	for y := range h {
		row := img.Pix[y*img.Stride:]
		for x := range w {
			s ^= s << 13
			s ^= s >> 17
			s ^= s << 5
			row[4*x] = uint8(x+int(seed)*9) ^ uint8(s&63)
			row[4*x+1] = uint8(y+int(seed)*40) ^ uint8(s>>8&63)
			row[4*x+2] = uint8(x*y/8) ^ uint8(s>>16&63)
			row[4*x+3] = 255
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = jpeg.Encode(f, img, &jpeg.Options{Quality: 90})
	return errors.Join(err, f.Close())
}

// writeDataset makes an ImageFolder of n JPEGs in the given number of
// classes (class%02d/img%05d.jpg, classes in turn). Another variant has the
// same file names with other images (so other sizes, so another
// fingerprint).
func writeDataset(t testing.TB, n, classes, variant int) string {
	t.Helper()
	baseOnce.Do(writeBaseImages)
	if baseErr != nil {
		t.Fatal(baseErr)
	}
	root := t.TempDir()
	for c := range classes {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("class%02d", c)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		src := baseFiles[(i+variant)%baseImages]
		dst := filepath.Join(root, fmt.Sprintf("class%02d", i%classes), fmt.Sprintf("img%05d.jpg", i))
		if err := os.Link(src, dst); err != nil {
			b, err := os.ReadFile(src)
			if err == nil {
				err = os.WriteFile(dst, b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// testJob is the job of these tests: RandomResizedCrop 32 and a flip over
// the dataset "ds", shuffled, batches of batchSize.
func testJob(batchSize uint32, seed uint64) *stokerv1.JobSpec {
	return &stokerv1.JobSpec{
		Dataset: "ds",
		Transform: &stokerv1.TransformSpec{Ops: []*stokerv1.Op{
			opspec.Wire("RandomResizedCrop", "size", 32), opspec.Wire("RandomHorizontalFlip"),
		}},
		BatchSize: batchSize,
		Seed:      seed,
		Shuffle:   true,
	}
}

// serveConfig is one `stoker serve` process's flags.
type serveConfig struct {
	name    string // in failure output
	listen  string // default 127.0.0.1:0
	dataset string // the path served as "ds"
	workers int
	peers   string
	// peerRefresh is passed when set; the lease timeout is always
	// testLeaseTimeout.
	peerRefresh time.Duration
	netns       string // run in this network namespace (ip netns exec)
	metrics     string // default 127.0.0.1:0; in a netns, the namespace's address
	// bin is the binary to run; default the test build (stokerBinary).
	bin string
	// root, when set, is the directory the process is chrooted to (by
	// attr): dataset is then a path inside it, and the address file is
	// written under its /tmp.
	root string
	attr *syscall.SysProcAttr
	args []string // more flags
	// env is more environment for the process, after this process's own:
	// a parallel test's store endpoint and credentials (t.Setenv, which
	// the sequential tests use, cannot be called in a parallel one).
	env []string
	// wrap, when set, is a command that runs the binary: wrap[0] is run
	// with wrap[1:], the binary and its arguments (strace, for one).
	wrap []string
}

// serveProc is a running `stoker serve`.
type serveProc struct {
	name        string
	cmd         *exec.Cmd
	addr        string
	metricsAddr string
	logs        *syncBuffer
	exited      chan struct{}
	waitErr     error
	addrFile    string

	mu      sync.Mutex
	stopped bool // SIGSTOPped: cleanup sends SIGCONT first
}

// launchServe starts a `stoker serve`; waitReady waits for its address. It
// is killed (SIGCONT, then SIGKILL) when the test ends, and its log is
// printed if the test failed.
func launchServe(t testing.TB, c serveConfig) *serveProc {
	t.Helper()
	bin := c.bin
	if bin == "" {
		bin = stokerBinary(t)
	}
	dir := t.TempDir()
	if c.root != "" {
		var err error
		if dir, err = os.MkdirTemp(filepath.Join(c.root, "tmp"), "serve-"); err == nil {
			err = os.Chmod(dir, 0o777) // the process may run as another user
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p := &serveProc{name: c.name, logs: &syncBuffer{}, exited: make(chan struct{}), addrFile: filepath.Join(dir, "addr")}
	addrArg := strings.TrimPrefix(p.addrFile, c.root) // the path the process sees
	listen, metrics := c.listen, c.metrics
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if metrics == "" {
		metrics = "127.0.0.1:0"
	}
	args := []string{"serve", "--listen", listen, "--addr-file", addrArg, "--dataset", "ds=" + c.dataset,
		"--workers", strconv.Itoa(c.workers), "--lease-timeout", testLeaseTimeout.String(),
		"--metrics", metrics, "--log-format", "json"}
	if c.peers != "" {
		args = append(args, "--peers", c.peers)
	}
	if c.peerRefresh > 0 {
		args = append(args, "--peer-refresh", c.peerRefresh.String())
	}
	args = append(args, c.args...)
	switch {
	case c.netns != "":
		p.cmd = exec.Command("ip", append([]string{"netns", "exec", c.netns, bin}, args...)...)
	case len(c.wrap) > 0:
		p.cmd = exec.Command(c.wrap[0], append(append(c.wrap[1:len(c.wrap):len(c.wrap)], bin), args...)...)
	default:
		p.cmd = exec.Command(bin, args...)
	}
	p.cmd.Stderr = p.logs
	p.cmd.Stdout = p.logs
	p.cmd.SysProcAttr = c.attr
	if len(c.env) > 0 {
		p.cmd.Env = append(os.Environ(), c.env...)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		p.checkProtocol(t)
		if t.Failed() {
			logs := p.logs.String()
			if len(logs) > 40000 {
				logs = "…" + logs[len(logs)-40000:]
			}
			t.Logf("log of %s (%s):\n%s", p.name, p.addr, logs)
		}
	})
	return p
}

// checkProtocol fails the test if p logged an InvalidArgument error: in
// these tests every request is well-formed, so one is a coordinator that
// broke the Work protocol (or a worker that thinks it did), whatever the
// trainer received.
func (p *serveProc) checkProtocol(t testing.TB) {
	t.Helper()
	n := 0
	for _, r := range p.logRecords() {
		if err, _ := r["err"].(string); strings.Contains(err, "code = InvalidArgument") {
			if n++; n <= 3 {
				t.Errorf("%s (%s) logged a protocol error: %q: %s", p.name, p.addr, r["msg"], err)
			}
		}
	}
}

// waitReady waits until p has written its address file.
func (p *serveProc) waitReady(t testing.TB, ctx context.Context) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		if b, err := os.ReadFile(p.addrFile); err == nil {
			p.addr = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited early: %v\n%s", p.name, p.waitErr, p.logs.String())
		case <-ctx.Done():
			t.Fatalf("%s: no address: %v\n%s", p.name, ctx.Err(), p.logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no address after %v\n%s", p.name, hangGuard, p.logs.String())
		}
	}
	// The metrics line is logged before the address file is written, but
	// may still be on its way through the pipe.
	for p.metricsAddr == "" {
		for _, r := range p.logRecords() {
			if r["msg"] == "metrics" {
				p.metricsAddr, _ = r["addr"].(string)
			}
		}
		if p.metricsAddr != "" {
			break
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited early: %v\n%s", p.name, p.waitErr, p.logs.String())
		case <-ctx.Done():
			t.Fatalf("%s: no metrics line in the log: %v\n%s", p.name, ctx.Err(), p.logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no metrics line in the log after %v\n%s", p.name, hangGuard, p.logs.String())
		}
	}
}

// startServe launches a `stoker serve` and waits for its address.
func startServe(t testing.TB, ctx context.Context, c serveConfig) *serveProc {
	t.Helper()
	p := launchServe(t, c)
	p.waitReady(t, ctx)
	return p
}

// startPeers starts n workers (--workers 1, and args) over dataset in
// parallel.
func startPeers(t testing.TB, ctx context.Context, n int, dataset string, args ...string) []*serveProc {
	t.Helper()
	ps := make([]*serveProc, n)
	for i := range ps {
		ps[i] = launchServe(t, serveConfig{name: fmt.Sprintf("peer%d", i), dataset: dataset, workers: 1, args: args})
	}
	for _, p := range ps {
		p.waitReady(t, ctx)
	}
	return ps
}

// peerList is the peers' addresses as --peers takes them.
func peerList(ps ...*serveProc) string {
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.addr)
	}
	return strings.Join(addrs, ",")
}

// kill ends the process (SIGCONT first if it was stopped) and waits for it.
func (p *serveProc) kill() {
	p.mu.Lock()
	if p.stopped {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.stopped = false
	}
	p.mu.Unlock()
	p.cmd.Process.Kill()
	<-p.exited
}

// stop sends SIGSTOP: the process keeps its sockets (the kernel still
// accepts connections and acknowledges data) but answers nothing.
func (p *serveProc) stop(t testing.TB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p.stopped = true
}

// cont sends SIGCONT: a stopped process goes on.
func (p *serveProc) cont(t testing.TB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	p.stopped = false
}

// logRecords parses the process's JSON log lines so far.
func (p *serveProc) logRecords() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// findLogs returns the log records with message msg whose attributes have
// the given string values.
func (p *serveProc) findLogs(msg string, attrs map[string]string) []map[string]any {
	var out []map[string]any
	for _, r := range p.logRecords() {
		if r["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range attrs {
			if s, _ := r[k].(string); s != v {
				ok = false
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// metrics scrapes p's /metrics: every sample line, by series.
func (p *serveProc) metrics(ctx context.Context) (map[string]float64, error) {
	return bench.ScrapeMetrics(ctx, p.metricsAddr)
}

// metric is the sum of p's series named name whose labels include all of
// labels (each `key="value"`).
func (p *serveProc) metric(t testing.TB, ctx context.Context, name string, labels ...string) float64 {
	t.Helper()
	ms, err := p.metrics(ctx)
	if err != nil {
		t.Fatalf("%s metrics: %v", p.name, err)
	}
	return sumSeries(ms, name, labels...)
}

func sumSeries(ms map[string]float64, name string, labels ...string) float64 {
	sum := 0.0
	for series, v := range ms {
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
			}
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// waitFor polls cond (at most 20 ms apart) until it holds, failing the
// test after d or when ctx ends.
func waitFor(t testing.TB, ctx context.Context, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return waitfor.Wait{Within: d, Ctx: ctx}.Until(t, what, cond)
}

// waitPeersReady waits until the coordinator has n peers connected.
func waitPeersReady(t testing.TB, ctx context.Context, coord *serveProc, n int) {
	t.Helper()
	waitFor(t, ctx, hangGuard, fmt.Sprintf("%s: %d peers ready", coord.name, n), func() bool {
		ms, err := coord.metrics(ctx)
		return err == nil && sumSeries(ms, "stoker_peers_ready") == float64(n)
	})
}

// feedBatch is a batch as the trainer reassembled it.
type feedBatch struct {
	hdr  *stokerv1.BatchHeader
	data []byte
}

// sum is the SHA-256 of the batch's pixels, labels and indices.
func (b *feedBatch) sum() [32]byte {
	h := sha256.New()
	h.Write(b.data)
	for _, v := range b.hdr.GetLabels() {
		binary.Write(h, binary.LittleEndian, v)
	}
	h.Write([]byte{0xff})
	for _, v := range b.hdr.GetIndices() {
		binary.Write(h, binary.LittleEndian, v)
	}
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// feedReader is a trainer on a raw Feed stream: it opens one epoch with a
// few credits, reads JobInfo, then batches (header and chunks) and the
// EpochEnd, granting a credit for each batch taken and measuring how long
// each Next blocked.
type feedReader struct {
	conn    *grpc.ClientConn
	stream  stokerv1.FeedService_FeedClient
	info    *stokerv1.JobInfo
	end     *stokerv1.EpochEnd
	maxWait time.Duration
	// maxWaitBefore is the batch count taken when the worst wait ended.
	maxWaitBefore int
	taken         int
	sendDone      bool
}

func openFeed(ctx context.Context, addr string, spec *stokerv1.JobSpec, epoch uint64, credits uint32) (*feedReader, error) {
	return openFeedAt(ctx, addr, spec, epoch, credits, 0)
}

// openFeedAt is openFeed from batch start of the epoch (a resume).
func openFeedAt(ctx context.Context, addr string, spec *stokerv1.JobSpec, epoch uint64, credits uint32, start uint64) (*feedReader, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	r := &feedReader{conn: conn}
	if r.stream, err = stokerv1.NewFeedServiceClient(conn).Feed(ctx); err == nil {
		err = r.stream.Send(&stokerv1.FeedRequest{Msg: &stokerv1.FeedRequest_Open{Open: &stokerv1.OpenJob{
			Job: spec, Epoch: epoch, Epochs: 1, Credits: credits, StartBatch: start,
		}}})
	}
	var first *stokerv1.FeedResponse
	if err == nil {
		first, err = r.stream.Recv()
	}
	if err == nil {
		if r.info = first.GetJob(); r.info == nil {
			err = fmt.Errorf("first message %T, want JobInfo", first.GetMsg())
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return r, nil
}

func (r *feedReader) Close() { r.conn.Close() }

// Next returns the next batch, or io.EOF after the EpochEnd and a clean
// close of the stream.
func (r *feedReader) Next() (*feedBatch, error) {
	if r.end != nil {
		return nil, io.EOF
	}
	start := time.Now()
	b, err := r.next()
	if w := time.Since(start); w > r.maxWait {
		r.maxWait, r.maxWaitBefore = w, r.taken
	}
	if err != nil || b == nil {
		return nil, err
	}
	r.taken++
	if !r.sendDone {
		// io.EOF: the server has ended the stream (it may have sent all
		// the epoch already); Recv tells how it ended.
		err = r.stream.Send(&stokerv1.FeedRequest{Msg: &stokerv1.FeedRequest_Credit{Credit: &stokerv1.Credit{
			Credits: 1, WaitSeconds: time.Since(start).Seconds(), Batches: 1,
		}}})
		if errors.Is(err, io.EOF) {
			r.sendDone = true
		} else if err != nil {
			return nil, fmt.Errorf("credit after batch %d: %v", b.hdr.GetNumber(), err)
		}
	}
	return b, nil
}

func (r *feedReader) next() (*feedBatch, error) {
	msg, err := r.stream.Recv()
	if err != nil {
		return nil, fmt.Errorf("after %d batches: %v", r.taken, err)
	}
	if end := msg.GetEnd(); end != nil {
		r.end = end
		if _, err := r.stream.Recv(); !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("after EpochEnd: %v, want the stream's end", err)
		}
		return nil, io.EOF
	}
	hdr := msg.GetBatch()
	if hdr == nil {
		return nil, fmt.Errorf("after %d batches: got %T, want BatchHeader or EpochEnd", r.taken, msg.GetMsg())
	}
	b := &feedBatch{hdr: hdr, data: make([]byte, 0, hdr.GetDataBytes())}
	for uint64(len(b.data)) < hdr.GetDataBytes() {
		msg, err := r.stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("batch %d: %v", hdr.GetNumber(), err)
		}
		c := msg.GetChunk()
		switch {
		case c == nil:
			return nil, fmt.Errorf("batch %d: got %T, want Chunk", hdr.GetNumber(), msg.GetMsg())
		case c.GetNumber() != hdr.GetNumber() || c.GetOffset() != uint64(len(b.data)):
			return nil, fmt.Errorf("chunk of batch %d at %d, want batch %d at %d", c.GetNumber(), c.GetOffset(), hdr.GetNumber(), len(b.data))
		case len(c.GetData()) == 0 || uint64(len(b.data)+len(c.GetData())) > hdr.GetDataBytes() || len(c.GetData()) > int(r.info.GetMaxChunkBytes()):
			return nil, fmt.Errorf("batch %d: chunk of %d bytes at %d of %d", hdr.GetNumber(), len(c.GetData()), len(b.data), hdr.GetDataBytes())
		}
		b.data = append(b.data, c.GetData()...)
	}
	return b, nil
}

// consumeOpts is how a trainer consumes an epoch.
type consumeOpts struct {
	credits  uint32        // default 4
	epoch    uint64        // the epoch to run (the stream runs that one only)
	start    uint64        // its first batch (a resume)
	throttle time.Duration // slept after each batch taken
	// after is called after the n-th batch (1-based) was taken, before the
	// throttle; it may block (the trainer then takes nothing).
	after func(n int)
}

// epochResult is one epoch as a trainer received it.
type epochResult struct {
	epoch   uint64 // the epoch asked for
	info    *stokerv1.JobInfo
	end     *stokerv1.EpochEnd
	batches []*feedBatch
	maxWait time.Duration
	// maxWaitBefore: the batches taken when the worst wait ended.
	maxWaitBefore int
	took          time.Duration
}

// consumeEpoch runs one epoch of spec from the server at addr, failing the
// test if the stream fails.
func consumeEpoch(t testing.TB, ctx context.Context, addr string, spec *stokerv1.JobSpec, o consumeOpts) epochResult {
	t.Helper()
	res, err := runEpoch(ctx, addr, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runEpoch runs one epoch of spec from the server at addr. Safe from any
// goroutine when o.after is.
func runEpoch(ctx context.Context, addr string, spec *stokerv1.JobSpec, o consumeOpts) (epochResult, error) {
	if o.credits == 0 {
		o.credits = 4
	}
	start := time.Now()
	r, err := openFeedAt(ctx, addr, spec, o.epoch, o.credits, o.start)
	if err != nil {
		return epochResult{}, fmt.Errorf("open the job on %s: %v", addr, err)
	}
	defer r.Close()
	res := epochResult{epoch: o.epoch, info: r.info}
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("trainer of seed %d: %v (worst wait so far %v)", spec.GetSeed(), err, r.maxWait.Round(time.Millisecond))
		}
		res.batches = append(res.batches, b)
		if o.after != nil {
			o.after(len(res.batches))
		}
		if o.throttle > 0 {
			time.Sleep(o.throttle)
		}
	}
	res.end, res.maxWait, res.maxWaitBefore, res.took = r.end, r.maxWait, r.maxWaitBefore, time.Since(start)
	return res, nil
}

// checkEpoch checks an epoch (res.epoch) of spec over a dataset of size
// samples: the plan's batches 0..B-1 each exactly once in order with the
// plan's indices, every sample index exactly once, the right shapes and a
// matching EpochEnd. The worst trainer wait is logged, not asserted: on a loaded
// machine it says more of the machine than of the failover.
func checkEpoch(t testing.TB, res epochResult, spec *stokerv1.JobSpec, size int) {
	t.Helper()
	plan := server.NewPlan(server.PlanSpec{
		Size: size, Seed: spec.GetSeed(), Epoch: res.epoch, Shuffle: spec.GetShuffle(),
		Rank: 0, World: 1, BatchSize: int(spec.GetBatchSize()),
	})
	nb := plan.Batches()
	if got := res.info.GetBatches(); got != uint64(nb) {
		t.Errorf("JobInfo: %d batches, the plan has %d", got, nb)
	}
	seenBatch := make(map[uint64]int)
	outOfOrder := 0
	seen := make([]int, size)
	sampleBytes := 3 * 32 * 32
	for i, b := range res.batches {
		h := b.hdr
		k := h.GetNumber()
		seenBatch[k]++
		if k != uint64(i) {
			if outOfOrder++; outOfOrder <= 5 {
				t.Errorf("batch #%d received is number %d", i, k)
			}
		}
		if h.GetEpoch() != res.epoch {
			t.Errorf("batch %d: epoch %d, want %d", k, h.GetEpoch(), res.epoch)
		}
		n := len(h.GetIndices())
		if len(h.GetLabels()) != n || len(b.data) != n*sampleBytes || !slices.Equal(h.GetShape(), []uint32{uint32(n), 3, 32, 32}) {
			t.Errorf("batch %d: shape %v, %d labels, %d indices, %d bytes", k, h.GetShape(), len(h.GetLabels()), n, len(b.data))
		}
		if len(h.GetErrors()) > 0 {
			t.Errorf("batch %d: sample errors %v", k, h.GetErrors())
		}
		if k < uint64(nb) && !slices.Equal(h.GetIndices(), plan.Batch(int(k))) {
			t.Errorf("batch %d: indices %v, the plan has %v", k, h.GetIndices(), plan.Batch(int(k)))
		}
		for _, ix := range h.GetIndices() {
			if ix < 0 || ix >= int64(size) {
				t.Errorf("batch %d: index %d out of range", k, ix)
				continue
			}
			seen[ix]++
		}
	}
	var missingB, dupB []uint64
	for k := range uint64(nb) {
		switch seenBatch[k] {
		case 0:
			missingB = append(missingB, k)
		case 1:
		default:
			dupB = append(dupB, k)
		}
	}
	for k := range seenBatch {
		if k >= uint64(nb) {
			dupB = append(dupB, k)
		}
	}
	missing, dup := 0, 0
	for _, c := range seen {
		if c == 0 {
			missing++
		} else if c > 1 {
			dup += c - 1
		}
	}
	if len(missingB) > 0 || len(dupB) > 0 || outOfOrder > 0 || len(res.batches) != nb {
		t.Errorf("batches: %d received of %d; missing %v, duplicated %v, %d out of order", len(res.batches), nb, missingB, dupB, outOfOrder)
	}
	if missing > 0 || dup > 0 {
		t.Errorf("samples: %d missing, %d duplicated of %d", missing, dup, size)
	}
	if e := res.end; e.GetBatches() != uint64(nb) || e.GetSamples() != uint64(size) || e.GetSampleErrors() != 0 {
		t.Errorf("EpochEnd %v, want %d batches, %d samples, 0 errors", e, nb, size)
	}
	t.Logf("epoch: %d batches in %v; worst trainer wait %v (before batch %d)", len(res.batches),
		res.took.Round(time.Millisecond), res.maxWait.Round(time.Millisecond), res.maxWaitBefore)
}

// openConn is a plaintext client connection to addr.
func openConn(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
