package deploy_test

import (
	"fmt"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	kustypes "sigs.k8s.io/kustomize/api/types"

	"github.com/stoker-dev/stoker/deploy"
)

// manifests decodes every manifest under deploy/.
func manifests(t *testing.T) map[string][]any {
	t.Helper()
	ms, err := deploy.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 5 {
		t.Fatalf("found only %d manifests", len(ms))
	}
	return ms
}

// stokerContainer is a container that runs stoker, in the pod spec of
// a workload.
type stokerContainer struct {
	where string
	c     corev1.Container
	pod   *corev1.PodSpec
	flags map[string]string // --name=value arguments after the command, by name
}

// flagArg is the one form of flag deploy/ writes: --name=value. With the
// value always joined, these tests read flags without serve's flag set
// (which lives in the main module); cmd/stoker's tests parse the same
// arguments (testdata/uses.json) with it.
var flagArg = regexp.MustCompile(`^--([a-z][a-z0-9-]*)=(.*)$`)

// parseFlags reads args (a subcommand, then --name=value flags) into a map.
func parseFlags(args []string, command string) (map[string]string, error) {
	if len(args) == 0 || args[0] != command {
		return nil, fmt.Errorf("args %q: want %s and its flags", args, command)
	}
	flags := map[string]string{}
	for _, a := range args[1:] {
		m := flagArg.FindStringSubmatch(a)
		if m == nil {
			return nil, fmt.Errorf("args %q: %q is not --name=value (the one form deploy/ uses)", args, a)
		}
		if _, dup := flags[m[1]]; dup && m[1] != "dataset" {
			return nil, fmt.Errorf("args %q: --%s twice", args, m[1])
		}
		flags[m[1]] = m[2]
	}
	return flags, nil
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
			flags, err := parseFlags(c.Args, "serve")
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			out = append(out, stokerContainer{where: where, c: c, pod: spec, flags: flags})
		}
	}
	return out
}

// builtOverlays are the kustomizations whose stoker containers are not
// those of the files they are built from: the containers of their
// kustomize build are checked as the files' are.
var builtOverlays = []string{"overlays/bucket"}

// allStokerContainers are the stoker containers of every manifest under
// deploy/ (by path) and of every overlay of builtOverlays as kustomize
// builds it.
func allStokerContainers(t *testing.T) []stokerContainer {
	t.Helper()
	ms := manifests(t)
	var out []stokerContainer
	for _, path := range slices.Sorted(maps.Keys(ms)) {
		out = append(out, stokerContainers(t, path, ms[path])...)
	}
	for _, dir := range builtOverlays {
		_, objs := kustomizeBuild(t, dir)
		out = append(out, stokerContainers(t, dir+" (kustomize build)", objs)...)
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

// TestDeployContainers: the gRPC probes of every stoker container ask the
// port of --health-listen where set, else of --listen; probed, listened
// and metrics ports are declared container ports; the workers' Service
// targets the --listen port.
func TestDeployContainers(t *testing.T) {
	if _, err := parseFlags([]string{"serve", "--listen", ":7070"}, "serve"); err == nil {
		t.Error("parseFlags accepted --listen :7070 (two arguments)")
	}
	n := 0
	for _, sc := range allStokerContainers(t) {
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

// baseWorkers is the workers' stoker container and their Service.
func baseWorkers(t *testing.T) (stokerContainer, *corev1.Service) {
	t.Helper()
	ms := manifests(t)
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
// by the headless Service's name in the base's namespace, on its port, and
// runs as a native sidecar.
func TestDeployPeersTarget(t *testing.T) {
	ms := manifests(t)
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

// TestDeployNonRoot: the images run as uid:gid 65532:65532 by number (a
// USER name would leave Kubernetes unable to check runAsNonRoot), and
// every stoker container that asks for runAsNonRoot also names that uid
// (its own securityContext or its pod's), as the kubelet needs to check it
// against an image whose USER it cannot resolve.
func TestDeployNonRoot(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Each stage's FROM line and its last USER.
	type stage struct{ from, user string }
	var stages []stage
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && strings.EqualFold(f[0], "FROM"):
			stages = append(stages, stage{from: strings.Join(f[1:], " ")})
		case len(f) == 2 && strings.EqualFold(f[0], "USER") && len(stages) > 0:
			stages[len(stages)-1].user = f[1]
		}
	}
	images := 0
	for _, s := range stages {
		if strings.HasSuffix(s.from, " AS build") {
			continue // the build stage is no image anyone runs
		}
		images++
		if s.user != "65532:65532" {
			t.Errorf("Dockerfile stage FROM %s: USER %q, want 65532:65532", s.from, s.user)
		}
	}
	if images < 2 {
		t.Errorf("Dockerfile: %d image stages in %v, want gpuhost and the default", images, stages)
	}

	n := 0
	for _, sc := range allStokerContainers(t) {
		n++
		var nonRoot *bool
		var uid, gid *int64
		if p := sc.pod.SecurityContext; p != nil {
			nonRoot, uid, gid = p.RunAsNonRoot, p.RunAsUser, p.RunAsGroup
		}
		if c := sc.c.SecurityContext; c != nil {
			nonRoot, uid, gid = or(c.RunAsNonRoot, nonRoot), or(c.RunAsUser, uid), or(c.RunAsGroup, gid)
		}
		if nonRoot == nil || !*nonRoot {
			t.Errorf("%s: runAsNonRoot is not set", sc.where)
		}
		if uid == nil || *uid != 65532 || gid == nil || *gid != 65532 {
			t.Errorf("%s: runAsUser %v, runAsGroup %v; want 65532 and 65532 (the image's USER)", sc.where, deref(uid), deref(gid))
		}
	}
	if n < 2 {
		t.Fatalf("found %d stoker containers", n)
	}
}

func or[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
