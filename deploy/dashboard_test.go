package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// dashboardFile is the Grafana dashboard over stoker's metrics.
const dashboardFile = "dashboard/stoker.json"

// dashboard is what the test reads of a Grafana dashboard: its panels
// (rows hold theirs when collapsed) and its template variables.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"` // a string, or {"query": ...}
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int     `json:"id"`
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	Datasource *source `json:"datasource"`
	Panels     []panel `json:"panels"`
	Targets    []struct {
		RefID      string  `json:"refId"`
		Expr       string  `json:"expr"`
		Datasource *source `json:"datasource"`
	} `json:"targets"`
}

type source struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is one PromQL query of the dashboard, and where it is.
type query struct{ where, expr string }

// readDashboard reads dashboardFile strictly: a field out of place is an
// error only to Grafana, but a file that is not JSON is one here.
func readDashboard(t *testing.T) (dashboard, []query) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []query
	var walk func(ps []panel)
	ids := map[int]string{}
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q have the same id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != "${datasource}") {
				t.Errorf("panel %q: datasource %+v, want the dashboard's variable ${datasource}", p.Title, p.Datasource)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				qs = append(qs, query{fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		// Grafana's label_values(METRIC, LABEL): the METRIC is PromQL.
		lv := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`).FindStringSubmatch(q)
		if lv == nil {
			t.Errorf("variable %s: query %q, want label_values(METRIC, LABEL)", v.Name, q)
			continue
		}
		qs = append(qs, query{"variable " + v.Name, lv[1]})
	}
	return d, qs
}

// grafanaVars are Grafana's variables in a query, replaced before parsing:
// an interval by one, any other by a word (they stand in label values).
var (
	intervalVar = regexp.MustCompile(`\$__(rate_)?interval|\$\{__(rate_)?interval\}`)
	otherVar    = regexp.MustCompile(`\$\{?\w+\}?`)
)

// promql is Prometheus's parser, with the functions a Prometheus server
// accepts by default (no experimental ones).
var promql = parser.NewParser(parser.Options{})

// metricNames parses expr with Prometheus's own parser and returns the
// metric names its selectors read.
func metricNames(expr string) ([]string, error) {
	expr = intervalVar.ReplaceAllString(expr, "5m")
	expr = otherVar.ReplaceAllString(expr, "x")
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				if m.Type != labels.MatchEqual {
					errs = append(errs, fmt.Sprintf("a selector matches names by %s: the test cannot check it", m.Type))
				}
				name = m.Value
			}
		}
		if name == "" {
			errs = append(errs, "a selector without a metric name")
		}
		names = append(names, name)
		return nil
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return names, nil
}

// exportedMetric is a line of `stoker metrics --format json`.
type exportedMetric struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Labels []string `json:"labels"`
}

var (
	binaryOnce    sync.Once
	binaryMetrics map[string]exportedMetric
	binaryErr     error
)

// stokerMetrics are the metrics the stoker binary exports, as it lists
// them (`stoker metrics`): the binary named by STOKER_BIN, else one built
// from this repository's main module.
func stokerMetrics(t *testing.T) map[string]exportedMetric {
	t.Helper()
	binaryOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		bin := os.Getenv("STOKER_BIN")
		if bin == "" {
			dir, err := os.MkdirTemp("", "stoker-dashboard-test-")
			if err != nil {
				binaryErr = err
				return
			}
			defer os.RemoveAll(dir)
			bin = filepath.Join(dir, "stoker")
			build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/stoker")
			build.Dir = ".." // the main module
			if out, err := build.CombinedOutput(); err != nil {
				binaryErr = fmt.Errorf("go build ./cmd/stoker: %v\n%s", err, out)
				return
			}
		}
		out, err := exec.CommandContext(ctx, bin, "metrics", "--format", "json").Output()
		if err != nil {
			binaryErr = fmt.Errorf("%s metrics: %v", bin, err)
			return
		}
		var ms []exportedMetric
		if err := json.Unmarshal(out, &ms); err != nil {
			binaryErr = fmt.Errorf("stoker metrics --format json: %v", err)
			return
		}
		binaryMetrics = map[string]exportedMetric{}
		for _, m := range ms {
			binaryMetrics[m.Name] = m
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryMetrics
}

// exported reports whether the series name is one of ms's: a metric, or a
// histogram's or summary's _bucket, _sum or _count.
func exported(ms map[string]exportedMetric, name string) bool {
	if _, ok := ms[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if m, found := ms[base]; ok && found && (m.Type == "histogram" || m.Type == "summary" && suffix != "_bucket") {
			return true
		}
	}
	return false
}

// TestDashboard: every query of the Grafana dashboard parses with
// Prometheus's own PromQL parser, and each metric it reads is one the
// stoker binary exports (`stoker metrics`); the dashboard shows what an
// operator looks for (per job: images/s, GPU idle, the stall by stage,
// the window, recommended vs ready workers, lease failures by reason; per
// worker: leases, CPU).
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the stoker binary")
	}
	d, qs := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q: want both", d.UID, d.Title)
	}
	ms := stokerMetrics(t)
	if len(ms) < 20 {
		t.Fatalf("stoker metrics listed %d metrics", len(ms))
	}
	read := map[string]bool{}
	for _, q := range qs {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Errorf("%s: %q: %v", q.where, q.expr, err)
			continue
		}
		for _, name := range names {
			read[name] = true
			if !exported(ms, name) {
				t.Errorf("%s reads %s, which the stoker binary does not export (stoker metrics)", q.where, name)
			}
		}
	}
	for _, want := range []string{
		"stoker_images_per_second", "stoker_gpu_idle_ratio", "stoker_input_stall_ratio", "stoker_trainer_step_ratio",
		"stoker_making_share", "stoker_bottleneck", "stoker_send_ratio", "stoker_credit_wait_ratio", "stoker_window",
		"stoker_workers_recommended", "stoker_peers_recommended", "stoker_peers_ready", "stoker_lease_failures_total",
		"stoker_work_leases_total", "process_cpu_seconds_total",
	} {
		if !read[want] {
			t.Errorf("the dashboard shows no %s", want)
		}
	}
	t.Logf("%d queries read %d metrics: %s", len(qs), len(read), strings.Join(slices.Sorted(maps.Keys(read)), " "))
}

// TestDashboardQueryCheck: the check itself finds what it must: a name the
// binary does not export, a query that does not parse, a name matched by
// a regular expression.
func TestDashboardQueryCheck(t *testing.T) {
	ms := map[string]exportedMetric{"stoker_window": {Type: "gauge"}, "stoker_lease_seconds": {Type: "histogram"}}
	for _, tc := range []struct {
		expr string
		ok   bool
	}{
		{`stoker_window{stoker_job=~"$job"}`, true},
		{`histogram_quantile(0.9, sum by (le) (rate(stoker_lease_seconds_bucket[$__rate_interval])))`, true},
		{`stoker_windows{stoker_job=~"$job"}`, false},
		{`stoker_window_bucket`, false},
		{`sum(rate(stoker_window[5m]`, false},
		{`{__name__=~"stoker_.*"}`, false},
	} {
		names, err := metricNames(tc.expr)
		ok := err == nil
		for _, n := range names {
			ok = ok && exported(ms, n)
		}
		if ok != tc.ok {
			t.Errorf("%q: passes %v (names %q, %v), want %v", tc.expr, ok, names, err, tc.ok)
		}
	}
}
