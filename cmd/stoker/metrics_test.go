package main

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestMetricsCommand: `stoker metrics --format json` lists every metric
// server.New registers, with its labels, and serve's own (the Go runtime's,
// the process's, the /metrics handler's), each with a type and a help;
// the text and markdown forms list the same names.
func TestMetricsCommand(t *testing.T) {
	var out strings.Builder
	if err := metricsTo(&out, []string{"--format", "json"}); err != nil {
		t.Fatal(err)
	}
	var ms []exportedMetric
	if err := json.Unmarshal([]byte(out.String()), &ms); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	listed := map[string]exportedMetric{}
	for _, m := range ms {
		listed[m.Name] = m
		if m.Type == "untyped" || m.Help == "" {
			t.Errorf("%s: type %q, help %q", m.Name, m.Type, m.Help)
		}
	}
	registered, _ := serverMetrics(t)
	for _, name := range slices.Sorted(maps.Keys(registered)) {
		m, ok := listed[name]
		if !ok {
			t.Errorf("%s is registered by server.New, not listed", name)
			continue
		}
		if !slices.Equal(slices.Sorted(slices.Values(m.Labels)), slices.Sorted(slices.Values(registered[name]))) {
			t.Errorf("%s: labels %q listed, %q registered", name, m.Labels, registered[name])
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "promhttp_metric_handler_errors_total",
		"stoker_making_share", "stoker_bottleneck", "stoker_trainer_step_ratio", "stoker_send_ratio", "stoker_credit_wait_ratio"} {
		if _, ok := listed[name]; !ok {
			t.Errorf("%s not listed", name)
		}
	}
	for _, format := range []string{"text", "markdown"} {
		var b strings.Builder
		if err := metricsTo(&b, []string{"--format", format}); err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if !strings.Contains(b.String(), m.Name) {
				t.Errorf("--format %s does not list %s", format, m.Name)
			}
		}
	}
	if err := metricsTo(&out, []string{"--format", "yaml"}); err == nil || !strings.Contains(err.Error(), "want text, markdown or json") {
		t.Errorf("--format yaml: %v", err)
	}
}
