package deploy_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/stoker-dev/stoker/deploy"
)

// TestDeployStrictDecode: a field misspelled or at the wrong level, or a
// kind deploy/ does not know, fails the decode; every manifest decodes.
func TestDeployStrictDecode(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"misspelled", "apiVersion: apps/v1\nkind: Deployment\nspec:\n  replicass: 2\n", `unknown field "spec.replicass"`},
		{"wrong level", "apiVersion: v1\nkind: Service\nspec:\n  ports:\n  - port: 1\n    containerPort: 1\n", `unknown field "spec.ports[0].containerPort"`},
		{"unknown kind", "apiVersion: v1\nkind: Servce\n", "not a kind"},
		{"second document", "apiVersion: v1\nkind: Namespace\n---\napiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      restartpolicy: Never\n", `unknown field "spec.template.spec.restartpolicy"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := deploy.Decode([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("decode: %v, want an error with %q", err, c.want)
			}
		})
	}
	ms, err := deploy.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"base/kustomization.yaml", "base/workers.yaml", "base/hpa.yaml", "examples/trainer-job.yaml",
		"overlays/bucket/kustomization.yaml", "overlays/bucket/serviceaccount.yaml", "overlays/bucket/networkpolicy.yaml", "examples/trainer-job-bucket.yaml"} {
		if len(ms[want]) == 0 {
			t.Errorf("%s: not found or empty", want)
		}
	}
	for path, objs := range ms {
		t.Logf("%s: %d objects", path, len(objs))
	}
}

// kustomizeBuild builds the kustomization in dir with kustomize's own
// library (what kubectl apply -k runs) and decodes its output strictly.
func kustomizeBuild(t *testing.T, dir string) ([]byte, []any) {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Decode(out)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return out, objs
}

// TestDeployKustomizeBuild builds deploy/base: every object in the base's
// namespace, the HPA's target among them, and that Deployment without a
// replicas field (the HPA owns the count: a replicas field would reset it
// on every kubectl apply -k).
func TestDeployKustomizeBuild(t *testing.T) {
	out, objs := kustomizeBuild(t, "base")
	kinds := map[string]string{}
	for _, o := range objs {
		m := o.(interface {
			GetNamespace() string
			GetName() string
		})
		kind := fmt.Sprintf("%T", o)
		kinds[kind[strings.LastIndex(kind, ".")+1:]] = m.GetName()
		if _, ns := o.(*corev1.Namespace); !ns && m.GetNamespace() != "stoker" {
			t.Errorf("%s %s in namespace %q, want stoker", kind, m.GetName(), m.GetNamespace())
		}
		if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
			t.Errorf("Deployment %s has replicas: %d under its HPA: each kubectl apply -k would reset the HPA's count", d.Name, *d.Spec.Replicas)
		}
	}
	for _, want := range []string{"Namespace", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "HorizontalPodAutoscaler"} {
		if kinds[want] == "" {
			t.Errorf("kustomize output has no %s: %v", want, kinds)
		}
	}
	if !bytes.Contains(out, []byte("image: registry.example.com/stoker:latest")) {
		t.Errorf("the images entry did not set the workers' image:\n%s", out)
	}
}

// TestDeployNetworkPolicy: the workers admit gRPC from coordinators of
// any namespace, and metrics scrapes and health checks from the monitoring
// namespace: the one named monitoring in the base, another in the
// monitoring-namespace example overlay, whose patch leaves the gRPC rule
// as it was.
func TestDeployNetworkPolicy(t *testing.T) {
	for _, c := range []struct{ dir, monitoring string }{
		{"base", "monitoring"},
		{"examples/monitoring-namespace", "observability"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			_, objs := kustomizeBuild(t, c.dir)
			pols := map[string]*networkingv1.NetworkPolicy{}
			for _, o := range objs {
				if p, ok := o.(*networkingv1.NetworkPolicy); ok {
					pols[p.Name] = p
				}
			}
			grpc, mon := pols["stoker-workers"], pols["stoker-workers-monitoring"]
			if grpc == nil || mon == nil || len(pols) != 2 {
				t.Fatalf("NetworkPolicies %v, want stoker-workers and stoker-workers-monitoring", slices.Collect(maps.Keys(pols)))
			}
			for _, p := range pols {
				if p.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "worker" {
					t.Errorf("%s selects %v, want the workers", p.Name, p.Spec.PodSelector.MatchLabels)
				}
			}
			if r := grpc.Spec.Ingress; len(r) != 1 || len(r[0].From) != 1 || r[0].From[0].NamespaceSelector == nil ||
				len(r[0].From[0].NamespaceSelector.MatchLabels) != 0 || r[0].From[0].PodSelector == nil ||
				r[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "coordinator" || ports(r[0]) != "7070" {
				t.Errorf("stoker-workers ingress %+v, want gRPC (7070) from coordinators of every namespace", r)
			}
			if r := mon.Spec.Ingress; len(r) != 1 || len(r[0].From) != 1 || r[0].From[0].NamespaceSelector == nil ||
				r[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != c.monitoring || ports(r[0]) != "7071,9090" {
				t.Errorf("stoker-workers-monitoring ingress %+v, want metrics and health (9090, 7071) from the namespace %s", r, c.monitoring)
			}
		})
	}
}

// ports lists a rule's ports, sorted.
func ports(r networkingv1.NetworkPolicyIngressRule) string {
	var ps []string
	for _, p := range r.Ports {
		ps = append(ps, p.Port.String())
	}
	slices.Sort(ps)
	return strings.Join(ps, ",")
}
