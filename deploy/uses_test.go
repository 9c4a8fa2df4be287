package deploy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/uses.json from the manifests")

// usesFile is what deploy/ asks of the stoker binary. This module's tests
// write it from the manifests; the main module's tests check it against
// the binary (cmd/stoker/deploy_test.go), which this module cannot
// import without making the Kubernetes modules its requirements.
const usesFile = "testdata/uses.json"

// uses is the content of usesFile.
type uses struct {
	Note string `json:"note"`
	// Serve: every stoker container's arguments (serve and its flags).
	Serve []command `json:"serve"`
	// Drain: every preStop hook that runs stoker drain, with the grace
	// period its --timeout must stay under.
	Drain []command `json:"drain"`
	// Metrics: every metric a rule or the HPA reads from the binary.
	Metrics []metric `json:"metrics"`
}

type command struct {
	Where        string   `json:"where"`
	Args         []string `json:"args"`
	GraceSeconds int64    `json:"graceSeconds,omitempty"`
}

type metric struct {
	Where string `json:"where"`
	Name  string `json:"name"`
	// Always: the adapter lists its rule by this series, so every stoker
	// serve must export it from the start, with no job.
	Always bool `json:"always,omitempty"`
}

// metricName finds the stoker metrics a PromQL query reads.
var metricName = regexp.MustCompile(`\bstoker_[a-z_]+\b`)

// collectUses reads usesFile's content from the manifests.
func collectUses(t *testing.T) uses {
	t.Helper()
	u := uses{Note: "What deploy/ asks of the stoker binary, written by `cd deploy && go test -run TestDeployUses -update` " +
		"and checked against the binary by `go test ./cmd/stoker -run Deploy`."}
	for _, sc := range allStokerContainers(t) {
		u.Serve = append(u.Serve, command{Where: sc.where, Args: sc.c.Args})
		if h := sc.c.Lifecycle; h != nil && h.PreStop != nil && h.PreStop.Exec != nil {
			cmd := h.PreStop.Exec.Command
			if len(cmd) < 2 || cmd[0] != "/stoker" {
				t.Errorf("%s: preStop %q does not run /stoker", sc.where, cmd)
				continue
			}
			c := command{Where: sc.where + " preStop", Args: cmd[1:]}
			if g := sc.pod.TerminationGracePeriodSeconds; g != nil {
				c.GraceSeconds = *g
			} else {
				c.GraceSeconds = corev1.DefaultTerminationGracePeriodSeconds
			}
			u.Drain = append(u.Drain, c)
		}
	}
	hpa, rule := servingRule(t)
	u.Metrics = append(u.Metrics, metric{Where: "base/hpa.yaml", Name: hpa.Spec.Metrics[0].External.Metric.Name})
	if m := seriesName.FindStringSubmatch(rule.SeriesQuery); m != nil {
		u.Metrics = append(u.Metrics, metric{Where: "prometheus-adapter/values.yaml seriesQuery", Name: m[1], Always: true})
	}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(metricName.FindAllString(rule.MetricsQuery, -1)))) {
		u.Metrics = append(u.Metrics, metric{Where: "prometheus-adapter/values.yaml metricsQuery", Name: name})
	}
	return u
}

// TestDeployUses: testdata/uses.json is what the manifests say now (with
// -update, it is rewritten), and names every stoker container, the
// workers' preStop drain and the metrics the autoscaling path reads.
func TestDeployUses(t *testing.T) {
	u := collectUses(t)
	if len(u.Serve) < 2 || len(u.Drain) < 1 || len(u.Metrics) < 3 {
		t.Errorf("uses: %d serve, %d drain, %d metrics: want the workers and the coordinator, the workers' preStop, the HPA's and the rule's metrics",
			len(u.Serve), len(u.Drain), len(u.Metrics))
	}
	for _, c := range u.Drain {
		if c.Args[0] != "drain" {
			t.Errorf("%s: %q, want stoker drain", c.Where, c.Args)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(u); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(usesFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(usesFile)
	if err != nil || !bytes.Equal(old, b.Bytes()) {
		t.Errorf("%s is stale (%v): run `cd deploy && go test -run TestDeployUses -update`, then `go test ./cmd/stoker -run Deploy`; now:\n%s", usesFile, err, diffLines(string(old), b.String()))
	}
}

// diffLines lists the lines of b that a lacks, and of a that b lacks.
func diffLines(a, b string) string {
	var out strings.Builder
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for _, l := range bl {
		if !slices.Contains(al, l) {
			fmt.Fprintf(&out, "+ %s\n", l)
		}
	}
	for _, l := range al {
		if !slices.Contains(bl, l) {
			fmt.Fprintf(&out, "- %s\n", l)
		}
	}
	return out.String()
}
