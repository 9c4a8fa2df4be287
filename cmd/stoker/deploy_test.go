package main

// The Kubernetes manifests in deploy/ checked against the Kubernetes API
// types and against this binary: every document decodes strictly into its
// k8s.io/api type, every stoker container's arguments parse with serve's
// own flag set, the probes and ports agree with those flags, the HPA's
// metric is one the server registers and the prometheus-adapter rule
// serves it, and the kustomization builds.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	kustypes "sigs.k8s.io/kustomize/api/types"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/deploy"
	"github.com/stoker-dev/stoker/server"
)

const deployDir = "../../deploy"

// deployManifests decodes every manifest under deploy/.
func deployManifests(t *testing.T) map[string][]any {
	t.Helper()
	ms, err := deploy.Load(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 5 {
		t.Fatalf("found only %d manifests under %s", len(ms), deployDir)
	}
	return ms
}

// stokerContainer is a container that runs stoker, with the flags its
// arguments set.
type stokerContainer struct {
	where string
	c     corev1.Container
	flags map[string]string // as given, by name
}

// serveArgs parses args (the container's: "serve" and flags) with serve's
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

// stokerContainers are the containers of the workloads in objs whose image
// is stoker's.
func stokerContainers(t *testing.T, path string, objs []any) []stokerContainer {
	t.Helper()
	var out []stokerContainer
	for _, o := range objs {
		var spec *corev1.PodSpec
		switch o := o.(type) {
		case *appsv1.Deployment:
			spec = &o.Spec.Template.Spec
		case *batchv1.Job:
			spec = &o.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			if c.Image != "stoker" && !strings.Contains(c.Image, "/stoker:") {
				continue
			}
			where := path + ": " + c.Name
			flags, err := serveArgs(c.Args)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			out = append(out, stokerContainer{where: where, c: c, flags: flags})
		}
	}
	return out
}

func portOf(t *testing.T, where, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("%s: address %q has no port", where, addr)
	}
	return int32(n)
}

// TestDeployServeFlags: every stoker container's arguments are `serve` and
// flags serve accepts (a flag it does not know fails, as it would in the
// pod); the gRPC probes ask the port of --health-listen where set, else of
// --listen; probed, listened and metrics ports are declared container
// ports; the workers' Service targets the --listen port.
func TestDeployServeFlags(t *testing.T) {
	if _, err := serveArgs([]string{"serve", "--listen=:7070", "--wrokers=4"}); err == nil {
		t.Error("serveArgs accepted --wrokers")
	}
	if _, err := serveArgs([]string{"--listen=:7070"}); err == nil {
		t.Error("serveArgs accepted args without the serve command")
	}
	n := 0
	for path, objs := range deployManifests(t) {
		for _, sc := range stokerContainers(t, path, objs) {
			n++
			declared := map[int32]string{}
			for _, p := range sc.c.Ports {
				declared[p.ContainerPort] = p.Name
			}
			listen, ok := sc.flags["listen"]
			if !ok {
				t.Errorf("%s: no --listen (the default is loopback only)", sc.where)
				continue
			}
			probePort := portOf(t, sc.where, listen)
			if h, ok := sc.flags["health-listen"]; ok {
				probePort = portOf(t, sc.where, h)
			}
			if _, ok := declared[probePort]; !ok {
				t.Errorf("%s: probed port %d is not a container port", sc.where, probePort)
			}
			if host, _, _ := net.SplitHostPort(listen); host != "127.0.0.1" && host != "localhost" {
				if _, ok := declared[portOf(t, sc.where, listen)]; !ok {
					t.Errorf("%s: --listen %s is not a container port", sc.where, listen)
				}
			}
			if m, ok := sc.flags["metrics"]; ok {
				if _, ok := declared[portOf(t, sc.where, m)]; !ok {
					t.Errorf("%s: --metrics %s is not a container port", sc.where, m)
				}
			}
			probes := 0
			for name, p := range map[string]*corev1.Probe{"readiness": sc.c.ReadinessProbe, "liveness": sc.c.LivenessProbe, "startup": sc.c.StartupProbe} {
				if p == nil {
					continue
				}
				probes++
				if p.GRPC == nil || p.GRPC.Port != probePort {
					t.Errorf("%s: %s probe %+v, want gRPC health on port %d", sc.where, name, p.ProbeHandler, probePort)
				}
			}
			if probes == 0 {
				t.Errorf("%s: no probes", sc.where)
			}
		}
	}
	if n < 2 {
		t.Fatalf("found %d stoker containers in deploy/, want the workers and the example's coordinator", n)
	}
	workers, svc := baseWorkers(t)
	listen := portOf(t, "workers", workers.flags["listen"])
	for _, p := range svc.Spec.Ports {
		if p.Name == "grpc" && (p.TargetPort.String() != "grpc" || workerPortNamed(workers, "grpc") != listen) {
			t.Errorf("Service port grpc targets %s, want the container port named grpc = --listen port %d", p.TargetPort.String(), listen)
		}
	}
}

// TestDeployPreStopDrains: the workers' preStop hook is `stoker drain`
// with flags drain accepts, waiting less than the pod's grace period.
func TestDeployPreStopDrains(t *testing.T) {
	workers, _ := baseWorkers(t)
	ms := deployManifests(t)
	dep := ms["base/workers.yaml"][0].(*appsv1.Deployment)
	h := workers.c.Lifecycle
	if h == nil || h.PreStop == nil || h.PreStop.Exec == nil {
		t.Fatalf("the workers have no preStop exec hook: %+v", h)
	}
	cmd := h.PreStop.Exec.Command
	if len(cmd) < 2 || cmd[0] != "/stoker" || cmd[1] != "drain" {
		t.Fatalf("preStop %q: want /stoker drain", cmd)
	}
	fs, pid, timeout := drainFlags()
	fs.Init("drain", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(cmd[2:]); err != nil || fs.NArg() > 0 {
		t.Fatalf("preStop %q: %v %q", cmd, err, fs.Args())
	}
	if *pid != 1 {
		t.Errorf("preStop drains pid %d, want 1 (the container's stoker)", *pid)
	}
	grace := dep.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || *timeout >= time.Duration(*grace)*time.Second {
		t.Errorf("preStop waits up to %v, the pod's grace period is %v s: the hook must end first", *timeout, grace)
	}
}

// baseWorkers is the workers' stoker container and their Service.
func baseWorkers(t *testing.T) (stokerContainer, *corev1.Service) {
	t.Helper()
	ms := deployManifests(t)
	cs := stokerContainers(t, "base/workers.yaml", ms["base/workers.yaml"])
	if len(cs) != 1 || len(ms["base/service.yaml"]) != 1 {
		t.Fatalf("want one stoker container in base/workers.yaml and one Service in base/service.yaml")
	}
	return cs[0], ms["base/service.yaml"][0].(*corev1.Service)
}

func workerPortNamed(sc stokerContainer, name string) int32 {
	for _, p := range sc.c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return -1
}

// TestDeployPeersTarget: the example Job's coordinator finds the workers
// by the headless Service's name in the base's namespace, on its port.
func TestDeployPeersTarget(t *testing.T) {
	ms := deployManifests(t)
	k := ms["base/kustomization.yaml"][0].(*kustypes.Kustomization)
	_, svc := baseWorkers(t)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s: clusterIP %q, want None (headless: DNS lists every worker)", svc.Name, svc.Spec.ClusterIP)
	}
	var port int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "grpc" {
			port = p.Port
		}
	}
	want := fmt.Sprintf("dns:///%s.%s.svc.cluster.local:%d", svc.Name, k.Namespace, port)
	cs := stokerContainers(t, "examples/trainer-job.yaml", ms["examples/trainer-job.yaml"])
	if len(cs) != 1 {
		t.Fatalf("want one stoker container in the example Job, found %d", len(cs))
	}
	if got := cs[0].flags["peers"]; got != want {
		t.Errorf("example Job's --peers %q, want %q", got, want)
	}
	job := ms["examples/trainer-job.yaml"][0].(*batchv1.Job)
	if job.Namespace != k.Namespace {
		t.Errorf("example Job in namespace %q, the workers in %q", job.Namespace, k.Namespace)
	}
	var sidecar bool
	for _, c := range job.Spec.Template.Spec.InitContainers {
		sidecar = sidecar || c.Name == cs[0].c.Name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	}
	if !sidecar {
		t.Errorf("the coordinator is not a native sidecar (an init container with restartPolicy Always): the Job would not complete")
	}
}

// registeredNames records the metric names of what is registered with it.
type registeredNames map[string]bool

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r registeredNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r[m[1]] = true
		}
	}
	return nil
}

func (r registeredNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		r.Register(c)
	}
}

func (r registeredNames) Unregister(prometheus.Collector) bool { return false }

// TestDeployHPAMetric: the HPA scales on a metric the server registers,
// and the prometheus-adapter rule serves that metric under that name.
func TestDeployHPAMetric(t *testing.T) {
	dir := t.TempDir()
	if err := bench.WriteSyntheticSet(context.Background(), filepath.Join(dir, "data"), 4, 1, 1); err != nil {
		t.Fatal(err)
	}
	names := registeredNames{}
	srv, err := server.New(server.Config{Datasets: map[string]string{"ds": filepath.Join(dir, "data")}, Workers: 1},
		slog.New(slog.NewTextHandler(io.Discard, nil)), names)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if len(names) < 5 {
		t.Fatalf("recorded %d metric names from server.New, want its metrics", len(names))
	}

	hpa := deployManifests(t)["base/hpa.yaml"][0].(*autoscalingv2.HorizontalPodAutoscaler)
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != "stoker-workers" {
		t.Errorf("HPA scales %+v, want the Deployment stoker-workers", hpa.Spec.ScaleTargetRef)
	}
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].External == nil {
		t.Fatalf("HPA metrics %+v, want one External metric", hpa.Spec.Metrics)
	}
	metric := hpa.Spec.Metrics[0].External.Metric.Name
	if !names[metric] {
		t.Errorf("HPA metric %q: the server registers no such metric", metric)
	}
	if b := hpa.Spec.Behavior; b == nil || b.ScaleDown == nil || b.ScaleDown.StabilizationWindowSeconds == nil || *b.ScaleDown.StabilizationWindowSeconds < 60 {
		t.Errorf("HPA: no scale-down stabilization of at least a minute")
	}

	data, err := os.ReadFile(filepath.Join(deployDir, "prometheus-adapter/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vals deploy.AdapterValues
	if err := deploy.DecodeStrict(data, &vals); err != nil {
		t.Fatalf("prometheus-adapter values: %v", err)
	}
	served := false
	for _, r := range vals.Rules.External {
		series, _, _ := strings.Cut(r.SeriesQuery, "{")
		re, err := regexp.Compile(r.Name.Matches)
		if err != nil {
			t.Errorf("rule %q: name.matches: %v", r.SeriesQuery, err)
			continue
		}
		if r.Name.As != metric {
			continue
		}
		served = true
		if !names[series] || !re.MatchString(series) || !strings.Contains(r.MetricsQuery, "<<.Series>>") {
			t.Errorf("rule serving %q: series %q (registered: %v), matches %q, query %q", metric, series, names[series], r.Name.Matches, r.MetricsQuery)
		}
		if r.Resources.Overrides["namespace"].Resource != "namespace" {
			t.Errorf("rule serving %q does not map the namespace label: the HPA's namespace would not select it", metric)
		}
	}
	if !served {
		t.Errorf("no external rule in the prometheus-adapter values serves %q", metric)
	}
}
