package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// kinds are the kinds deploy/ may use, by apiVersion/kind.
var kinds = map[string]func() any{
	"v1/Namespace":                                  func() any { return &corev1.Namespace{} },
	"v1/Service":                                    func() any { return &corev1.Service{} },
	"v1/ConfigMap":                                  func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                                     func() any { return &corev1.Secret{} },
	"v1/ServiceAccount":                             func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                            func() any { return &appsv1.Deployment{} },
	"batch/v1/Job":                                  func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget":                 func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":            func() any { return &networkingv1.NetworkPolicy{} },
	"autoscaling/v2/HorizontalPodAutoscaler":        func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"kustomize.config.k8s.io/v1beta1/Kustomization": func() any { return &kustypes.Kustomization{} },
}

var (
	docSep  = regexp.MustCompile(`(?m)^---[ \t]*$`)
	comment = regexp.MustCompile(`(?m)#.*$`)
)

// Decode decodes every YAML document of data strictly (a field
// its type does not have is an error) into the type its apiVersion and
// kind name.
func Decode(data []byte) ([]any, error) {
	var objs []any
	for i, doc := range docSep.Split(string(data), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("document %d: %v", i, err)
		}
		if tm.Kind == "" && strings.TrimSpace(comment.ReplaceAllString(doc, "")) == "" {
			continue // only comments
		}
		newObj := kinds[tm.APIVersion+"/"+tm.Kind]
		if newObj == nil {
			return nil, fmt.Errorf("document %d: apiVersion %q kind %q: not a kind deploy/ may use", i, tm.APIVersion, tm.Kind)
		}
		obj := newObj()
		if err := DecodeStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %v", i, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// AdapterValues is the part of the prometheus-adapter chart's values that
// deploy/prometheus-adapter/values.yaml sets, decoded strictly.
type AdapterValues struct {
	Rules struct {
		Default  bool          `json:"default"`
		External []AdapterRule `json:"external"`
	} `json:"rules"`
}

// AdapterRule is one of its rules.
type AdapterRule struct {
	SeriesQuery string `json:"seriesQuery"`
	Resources   struct {
		// Namespaced false: the HPA's namespace is not added to the
		// query (prometheus-adapter's default is true).
		Namespaced *bool `json:"namespaced"`
		Overrides  map[string]struct {
			Resource string `json:"resource"`
		} `json:"overrides"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

// Load decodes every manifest under dir (kustomizations included; not the
// Helm values or the Slurm script), by path relative to dir.
func Load(dir string) (map[string][]any, error) {
	out := map[string][]any{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" || strings.Contains(path, "prometheus-adapter") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, err := Decode(data)
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		rel, err := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = objs
		return err
	})
	return out, err
}

// DecodeStrict decodes one YAML document into v as the API server's strict
// field validation does: field names case-sensitive, an unknown or
// duplicated field an error.
func DecodeStrict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, v)
	return errors.Join(append([]error{err}, strict...)...)
}
