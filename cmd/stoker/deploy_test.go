package main

// The manifests in deploy/ checked against this binary: every stoker
// container's arguments parse with serve's own flag set, the preStop hook's
// with drain's, and the metrics the HPA and the prometheus-adapter rule
// read are ones the server registers (the one the adapter lists its rule
// by, from the start). deploy/ is a module of its own (its tests need the
// Kubernetes modules, which this one does not require); its tests write
// what the manifests ask of the binary to deploy/testdata/uses.json and
// check the manifests among themselves, these check that file.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/server"
)

// deployUses is deploy/testdata/uses.json (deploy/uses_test.go).
type deployUses struct {
	Serve []struct {
		Where string   `json:"where"`
		Args  []string `json:"args"`
	} `json:"serve"`
	Drain []struct {
		Where        string   `json:"where"`
		Args         []string `json:"args"`
		GraceSeconds int64    `json:"graceSeconds"`
	} `json:"drain"`
	Metrics []struct {
		Where  string `json:"where"`
		Name   string `json:"name"`
		Always bool   `json:"always"`
	} `json:"metrics"`
}

func readDeployUses(t *testing.T) deployUses {
	t.Helper()
	data, err := os.ReadFile("../../deploy/testdata/uses.json")
	if err != nil {
		t.Fatal(err)
	}
	var u deployUses
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&struct {
		Note string `json:"note"`
		*deployUses
	}{deployUses: &u}); err != nil {
		t.Fatalf("deploy/testdata/uses.json: %v", err)
	}
	if len(u.Serve) < 2 || len(u.Drain) < 1 || len(u.Metrics) < 2 {
		t.Fatalf("deploy/testdata/uses.json: %d serve, %d drain, %d metrics", len(u.Serve), len(u.Drain), len(u.Metrics))
	}
	return u
}

// serveArgs parses args (a container's: "serve" and flags) with serve's
// own flag set, returning the flags set.
func serveArgs(args []string) (map[string]string, error) {
	if len(args) == 0 || args[0] != "serve" {
		return nil, fmt.Errorf("args %q: want serve and its flags", args)
	}
	cfg := server.Config{Datasets: map[string]string{}}
	fs, _ := serveFlags(&cfg)
	fs.Init("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args[1:]); err != nil {
		return nil, fmt.Errorf("args %q: %v", args, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("args %q: %q is not a flag", args, fs.Args())
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	return set, nil
}

// TestDeployServeFlags: every stoker container's arguments are `serve` and
// flags serve accepts, with values it accepts (a flag it does not know
// fails, as it would in the pod).
func TestDeployServeFlags(t *testing.T) {
	if _, err := serveArgs([]string{"serve", "--listen=:7070", "--wrokers=4"}); err == nil {
		t.Error("serveArgs accepted --wrokers")
	}
	if _, err := serveArgs([]string{"--listen=:7070"}); err == nil {
		t.Error("serveArgs accepted args without the serve command")
	}
	for _, c := range readDeployUses(t).Serve {
		set, err := serveArgs(c.Args)
		if err != nil {
			t.Errorf("%s: %v", c.Where, err)
			continue
		}
		if _, ok := set["listen"]; !ok {
			t.Errorf("%s: no --listen", c.Where)
		}
	}
}

// TestDeployPreStopDrains: the workers' preStop hook is `stoker drain`
// with flags drain accepts, draining the container's own serve (pid 1) and
// waiting less than the pod's grace period.
func TestDeployPreStopDrains(t *testing.T) {
	for _, c := range readDeployUses(t).Drain {
		if len(c.Args) == 0 || c.Args[0] != "drain" {
			t.Errorf("%s: %q, want drain and its flags", c.Where, c.Args)
			continue
		}
		fs, pid, timeout := drainFlags()
		fs.Init("drain", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(c.Args[1:]); err != nil || fs.NArg() > 0 {
			t.Errorf("%s: %q: %v %q", c.Where, c.Args, err, fs.Args())
			continue
		}
		if *pid != 1 {
			t.Errorf("%s: drains pid %d, want 1 (the container's stoker)", c.Where, *pid)
		}
		if *timeout >= time.Duration(c.GraceSeconds)*time.Second {
			t.Errorf("%s: waits up to %v, the pod's grace period is %d s: the hook must end first", c.Where, *timeout, c.GraceSeconds)
		}
	}
}

// registeredMetrics records the names and variable labels of what is
// registered with it.
type registeredMetrics map[string][]string

var (
	fqName    = regexp.MustCompile(`fqName: "([^"]+)"`)
	varLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

func (r registeredMetrics) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r[m[1]] = nil
			if l := varLabels.FindStringSubmatch(d.String()); l != nil && l[1] != "" {
				r[m[1]] = strings.Split(l[1], ",")
			}
		}
	}
	return nil
}

func (r registeredMetrics) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		r.Register(c)
	}
}

func (r registeredMetrics) Unregister(prometheus.Collector) bool { return false }

// serverMetrics are the metrics server.New registers, with their labels,
// and the names of those a new server exports before any job.
func serverMetrics(t *testing.T) (registered registeredMetrics, exported map[string]bool) {
	t.Helper()
	dir := t.TempDir()
	if err := bench.WriteSyntheticSet(context.Background(), filepath.Join(dir, "data"), 4, 1, 1); err != nil {
		t.Fatal(err)
	}
	// Every optional part that registers metrics is on (the coefficient
	// cache is off by default).
	cfg := server.Config{Datasets: map[string]string{"ds": filepath.Join(dir, "data")}, Workers: 1, CoefBudget: 1 << 20}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	registered = registeredMetrics{}
	srv, err := server.New(cfg, log, registered)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if len(registered) < 5 {
		t.Fatalf("recorded %d metric names from server.New, want its metrics", len(registered))
	}
	reg := prometheus.NewRegistry()
	srv, err = server.New(cfg, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported = map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = len(mf.GetMetric()) > 0
	}
	return registered, exported
}

// TestDeployMetrics: the HPA scales on a metric the server registers, the
// adapter rule's query reads registered metrics, and the series the
// adapter lists the rule by is exported by a server with no job, so the
// metric is served (as 0) also when no coordinator reports.
func TestDeployMetrics(t *testing.T) {
	registered, exported := serverMetrics(t)
	for _, m := range readDeployUses(t).Metrics {
		if _, ok := registered[m.Name]; !ok {
			t.Errorf("%s reads %s: the server registers no such metric", m.Where, m.Name)
		}
		if m.Always && !exported[m.Name] {
			t.Errorf("%s lists its rule by %s, which a server with no job does not export: with no coordinator left the adapter would serve no metric", m.Where, m.Name)
		}
	}
}
