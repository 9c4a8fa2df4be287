package bench

// Processes for the benchmarks and the fault tests: starting and stopping
// `stoker serve`, their CPU time from /proc, scraping /metrics, free
// loopback ports.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// scaleProc is one `stoker serve` process.
type scaleProc struct {
	name    string
	cmd     *exec.Cmd
	addr    string
	metrics string // its /metrics address, "" when it serves none
	log     *tailWriter
	exited  chan struct{}
	waitErr error
}

// start starts `stoker serve` on a free loopback port (under taskset -c
// cpus when cpus is set) and waits for its address.
func (b *scaleBench) start(ctx context.Context, name, cpus string, args ...string) (*scaleProc, error) {
	return b.startExe(ctx, b.o.exe, name, cpus, args...)
}

// startExe is start with the stoker binary exe.
func (b *scaleBench) startExe(ctx context.Context, exe, name, cpus string, args ...string) (*scaleProc, error) {
	return startServe(ctx, serveProc{exe: exe, name: name, cpus: cpus, taskset: b.o.taskset},
		append([]string{"--dataset", "bench=" + b.o.data}, args...)...)
}

// serveProc is how to start one `stoker serve`.
type serveProc struct {
	exe, name string
	cpus      string   // taskset -c list; "": not pinned
	taskset   string   // the taskset binary, with cpus
	env       []string // added to this process's environment
}

// startServe starts `stoker serve` with args on a free loopback port and
// waits for its address.
func startServe(ctx context.Context, sp serveProc, args ...string) (*scaleProc, error) {
	exe, name, cpus := sp.exe, sp.name, sp.cpus
	dir, err := os.MkdirTemp("", "stoker-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	addrFile := filepath.Join(dir, "addr")
	argv := append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile,
		"--log-level", "warn", "--grace", "2s"}, args...)
	p := &scaleProc{name: name, log: &tailWriter{max: 16 << 10}, exited: make(chan struct{})}
	if cpus != "" {
		p.cmd = exec.Command(sp.taskset, append([]string{"-c", cpus, exe}, argv...)...)
	} else {
		p.cmd = exec.Command(exe, argv...)
	}
	if sp.env != nil {
		p.cmd.Env = append(os.Environ(), sp.env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	// Should this process die, so do its servers.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(addrFile); err == nil {
			p.addr = strings.TrimSpace(string(data))
			return p, nil
		}
		var err error
		select {
		case <-tick.C:
			continue
		case <-p.exited:
			err = fmt.Errorf("%s exited: %v\n%s", name, p.waitErr, p.log.String())
		case <-deadline.C:
			err = fmt.Errorf("%s: no address after 20 s\n%s", name, p.log.String())
		case <-ctx.Done():
			err = ctx.Err()
		}
		stopScaleProcs([]*scaleProc{p})
		return nil, err
	}
}

// stopScaleProcs sends every process SIGTERM and kills those still running
// 10 s later.
func stopScaleProcs(procs []*scaleProc) error {
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	timeout := time.After(10 * time.Second)
	var errs []error
	for _, p := range procs {
		select {
		case <-p.exited:
			if p.waitErr != nil {
				errs = append(errs, fmt.Errorf("%s: exit after SIGTERM: %w", p.name, p.waitErr))
			}
		case <-timeout:
			p.cmd.Process.Kill()
			<-p.exited
			errs = append(errs, fmt.Errorf("%s: still running 10 s after SIGTERM: killed", p.name))
		}
	}
	return errors.Join(errs...)
}

// scaleCPU reads each process's user+system CPU time (all its threads,
// those gone included) from /proc/PID/stat, in clock ticks of 10 ms.
func scaleCPU(procs []*scaleProc) ([]time.Duration, error) {
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			return nil, fmt.Errorf("%s CPU time: %w", p.name, err)
		}
		// Fields after the command name, which is in parentheses: state is
		// field 3, utime 14 and stime 15.
		_, rest, ok := strings.Cut(string(data), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 {
			return nil, fmt.Errorf("%s CPU time: unexpected /proc stat %q", p.name, data)
		}
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s CPU time: unexpected /proc stat %q", p.name, data)
		}
		// USER_HZ is 100 on every Linux architecture Go supports.
		out[i] = time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return out, nil
}

// scaleSnap is what the processes of a run had spent and counted at one
// moment: CPU time and /metrics, by process (no metrics for one that
// serves none).
type scaleSnap struct {
	at      time.Time
	cpu     []time.Duration
	metrics []map[string]float64
}

// snapScale reads every process's CPU time, then scrapes the metrics of
// those that serve them: a scrape costs its process a little CPU, counted
// in the next interval rather than this one.
func snapScale(ctx context.Context, procs []*scaleProc) (scaleSnap, error) {
	at := time.Now()
	cpu, err := scaleCPU(procs)
	if err != nil {
		return scaleSnap{}, err
	}
	s := scaleSnap{at: at, cpu: cpu, metrics: make([]map[string]float64, len(procs))}
	for i, p := range procs {
		if p.metrics == "" {
			continue
		}
		if s.metrics[i], err = ScrapeMetrics(ctx, p.metrics); err != nil {
			return scaleSnap{}, fmt.Errorf("%s metrics: %w", p.name, err)
		}
	}
	return s, nil
}

// freeLoopbackAddr is a loopback address with a port free now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ScrapeMetrics reads a server's /metrics: every sample, by series.
func ScrapeMetrics(ctx context.Context, addr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// waitScalePeers waits until the coordinator whose metrics are at addr has
// n peers ready.
func waitScalePeers(ctx context.Context, addr string, n int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		ms, err := ScrapeMetrics(ctx, addr)
		if err == nil && ms["stoker_peers_ready"] == float64(n) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("coordinator: %d peers ready after %v (want %d), last scrape error %v", int(ms["stoker_peers_ready"]), d, n, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
