package deploy_test

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/stoker-dev/stoker/deploy"
)

// adapterRules are the external rules of the prometheus-adapter values.
func adapterRules(t *testing.T) []deploy.AdapterRule {
	t.Helper()
	data, err := os.ReadFile("prometheus-adapter/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vals deploy.AdapterValues
	if err := deploy.DecodeStrict(data, &vals); err != nil {
		t.Fatalf("prometheus-adapter values: %v", err)
	}
	return vals.Rules.External
}

// adapterQuery renders a rule's metricsQuery as prometheus-adapter does
// for an external metric (pkg/naming/metrics_query.go, BuildExternal): a
// text/template with << >> delimiters; LabelMatchers are the HPA metric
// selector's matchers (and the HPA's namespace unless the rule says
// namespaced: false), joined by commas; GroupBy is empty.
func adapterQuery(t *testing.T, r deploy.AdapterRule, series, matchers string) string {
	t.Helper()
	tmpl, err := template.New("metrics-query").Delims("<<", ">>").Parse(r.MetricsQuery)
	if err != nil {
		t.Fatalf("metricsQuery %q: %v", r.MetricsQuery, err)
	}
	var b bytes.Buffer
	args := struct {
		Series            string
		LabelMatchers     string
		LabelValuesByName map[string]string
		GroupBy           string
		GroupBySlice      []string
	}{Series: series, LabelMatchers: matchers, LabelValuesByName: map[string]string{}}
	if err := tmpl.Execute(&b, args); err != nil {
		t.Fatalf("metricsQuery %q: %v", r.MetricsQuery, err)
	}
	return b.String()
}

// servingRule is the adapter rule that serves the HPA's metric.
func servingRule(t *testing.T) (*autoscalingv2.HorizontalPodAutoscaler, deploy.AdapterRule) {
	t.Helper()
	hpa := manifests(t)["base/hpa.yaml"][0].(*autoscalingv2.HorizontalPodAutoscaler)
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].External == nil {
		t.Fatalf("HPA metrics %+v, want one External metric", hpa.Spec.Metrics)
	}
	metric := hpa.Spec.Metrics[0].External.Metric.Name
	var rules []deploy.AdapterRule
	for _, r := range adapterRules(t) {
		if r.Name.As == metric {
			rules = append(rules, r)
		}
	}
	if len(rules) != 1 {
		t.Fatalf("%d external rules in the prometheus-adapter values serve %q, want 1", len(rules), metric)
	}
	return hpa, rules[0]
}

// seriesName is the metric name a seriesQuery selects.
var seriesName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?$`)

// TestDeployHPA: the HPA scales the workers' Deployment on one external
// metric, whose value is the replica count (AverageValue 1), and scales
// down slowly.
func TestDeployHPA(t *testing.T) {
	hpa, _ := servingRule(t)
	dep := manifests(t)["base/workers.yaml"][0].(*appsv1.Deployment)
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != dep.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("HPA scales %+v, want the Deployment %s", ref, dep.Name)
	}
	if dep.Spec.Replicas != nil {
		t.Errorf("Deployment %s has replicas under its HPA", dep.Name)
	}
	target := hpa.Spec.Metrics[0].External.Target
	if target.Type != autoscalingv2.AverageValueMetricType || target.AverageValue == nil || target.AverageValue.String() != "1" {
		t.Errorf("HPA target %+v, want AverageValue 1 (the metric is the workers wanted)", target)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 1 {
		t.Errorf("HPA minReplicas %v, want at least 1 (the adapter lists the metric from a series the workers export)", hpa.Spec.MinReplicas)
	}
	if b := hpa.Spec.Behavior; b == nil || b.ScaleDown == nil || b.ScaleDown.StabilizationWindowSeconds == nil || *b.ScaleDown.StabilizationWindowSeconds < 60 {
		t.Errorf("HPA: no scale-down stabilization of at least a minute")
	}
}

// TestDeployAdapterRule: the rule serving the HPA's metric is listed
// whether or not a coordinator reports, counts the coordinators of every
// namespace, and its query, rendered as the adapter renders it, sums
// each job's workers lacking, or is 0 when no job reports.
func TestDeployAdapterRule(t *testing.T) {
	_, r := servingRule(t)
	m := seriesName.FindStringSubmatch(r.SeriesQuery)
	if m == nil {
		t.Fatalf("seriesQuery %q: want one metric name and matchers", r.SeriesQuery)
	}
	if re, err := regexp.Compile(r.Name.Matches); err != nil || !re.MatchString(m[1]) {
		t.Errorf("name.matches %q (%v) does not match the series %q: the adapter would list nothing", r.Name.Matches, err, m[1])
	}
	if r.Resources.Namespaced == nil || *r.Resources.Namespaced {
		t.Errorf("resources.namespaced is not false: only coordinators in the HPA's own namespace would count")
	}
	for _, c := range []struct{ matchers, want string }{
		// The HPA as deploy/base has it: no selector.
		{"", `sum(stoker_peers_recommended{}) or vector(0)`},
		// An HPA that counts one namespace's jobs only.
		{`namespace="team-a"`, `sum(stoker_peers_recommended{namespace="team-a"}) or vector(0)`},
	} {
		if got := adapterQuery(t, r, m[1], c.matchers); got != c.want {
			t.Errorf("metricsQuery with matchers %q renders\n\t%s\nwant\n\t%s", c.matchers, got, c.want)
		}
	}
	if strings.Contains(r.MetricsQuery, "<<.Series>>") {
		t.Errorf("metricsQuery uses <<.Series>>, the discovery series %q, not the coordinators' stoker_peers_recommended", m[1])
	}
}
