package deploy_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/stoker-dev/stoker/deploy"
)

// These tests live here, not with the others in cmd/stoker: kustomize
// links the plugin package, whose eager symbol binding breaks go-nvml's
// lazily bound NVML symbols in the same binary.

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
	for _, want := range []string{"base/kustomization.yaml", "base/workers.yaml", "base/hpa.yaml", "examples/trainer-job.yaml"} {
		if len(ms[want]) == 0 {
			t.Errorf("%s: not found or empty", want)
		}
	}
	for path, objs := range ms {
		t.Logf("%s: %d objects", path, len(objs))
	}
}

// TestDeployKustomizeBuild builds deploy/base with kustomize's own library
// (what kubectl apply -k runs) and decodes its output strictly: every
// object in the base's namespace, the HPA's target among them.
func TestDeployKustomizeBuild(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), "base")
	if err != nil {
		t.Fatalf("kustomize build deploy/base: %v", err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Decode(out)
	if err != nil {
		t.Fatalf("kustomize output: %v", err)
	}
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
