package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/server"
)

// `stoker metrics`: every metric `stoker serve` exports, from the
// registry itself: a server is built as serve builds it, with every part
// that registers metrics on (over a dataset of four generated images in a
// temporary directory, removed after), and what it registers is listed,
// with serve's own (the Go runtime's, the process's, the /metrics
// handler's). Dashboards, alerts and the docs' reference are checked
// against it, so a name cannot drift from the binary's.

// runtimeCollectors are the metrics serve registers besides the server's.
func runtimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

// exportedMetric is one metric family serve exports.
type exportedMetric struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"` // counter, gauge, histogram, summary, untyped
	Labels []string `json:"labels"`
	Help   string   `json:"help"`
}

// runMetrics is `stoker metrics [--format text|markdown|json]`.
func runMetrics(args []string) error { return metricsTo(os.Stdout, args) }

func metricsTo(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	format := fs.String("format", "text", "text (NAME TYPE LABELS HELP, tab-separated), markdown (a table) or json")
	fs.Usage = helptext.Usage(fs, helptext.Head("metrics", "[--format text|markdown|json]", "Lists every metric stoker serve exports: its name, type, labels and help."))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("metrics: no arguments, got %q (stoker metrics --help)", fs.Args())
	}
	ms, err := exportedMetrics()
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	switch *format {
	case "text":
		for _, m := range ms {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, m.Type, strings.Join(cmpOr(m.Labels, []string{"-"}), ","), m.Help)
		}
	case "markdown":
		fmt.Fprintln(w, "| metric | type | labels | what |\n|---|---|---|---|")
		for _, m := range ms {
			labels := "—"
			if len(m.Labels) > 0 {
				labels = "`" + strings.Join(m.Labels, "`, `") + "`"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, labels, strings.ReplaceAll(m.Help, "|", `\|`))
		}
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(ms)
	default:
		return usageError{fmt.Errorf("metrics: --format %q: want text, markdown or json", *format)}
	}
	return nil
}

func cmpOr(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// exportedMetrics builds a server as serve does and lists what it
// registers, sorted by name.
func exportedMetrics() ([]exportedMetric, error) {
	dir, err := os.MkdirTemp("", "stoker-metrics-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	if err := bench.WriteSyntheticSet(context.Background(), data, 4, 1, 1); err != nil {
		return nil, err
	}
	rec := newRegistryRecorder()
	rec.MustRegister(runtimeCollectors()...)
	// Every part that registers metrics is on: the executor (its index
	// with it), the coefficient cache.
	cfg := server.Config{Datasets: map[string]string{"ds": data}, Workers: 1, CoefBudget: 1 << 20}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), rec)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	metricsMux(rec.reg, rec, false)
	return rec.list()
}

// registryRecorder is a registry that remembers what is registered with it:
// each metric's name, help and labels from its description, and its type
// from its collector (a vector) or from what it collects.
type registryRecorder struct {
	reg *prometheus.Registry
	got map[string]*exportedMetric
}

func newRegistryRecorder() *registryRecorder {
	return &registryRecorder{reg: prometheus.NewRegistry(), got: make(map[string]*exportedMetric)}
}

var (
	descFQName    = regexp.MustCompile(`fqName: "([^"]+)"`)
	descHelpText  = regexp.MustCompile(`help: ("(?:[^"\\]|\\.)*")`)
	descVarLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// Register registers c on the registry and records its metrics.
func (r *registryRecorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	kind := ""
	switch c.(type) {
	case *prometheus.CounterVec:
		kind = "counter"
	case *prometheus.GaugeVec:
		kind = "gauge"
	case *prometheus.HistogramVec:
		kind = "histogram"
	case *prometheus.SummaryVec:
		kind = "summary"
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		m := descFQName.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		e := &exportedMetric{Name: m[1], Type: kind}
		if h := descHelpText.FindStringSubmatch(s); h != nil {
			e.Help, _ = strconv.Unquote(h[1])
		}
		if l := descVarLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
			e.Labels = strings.Split(l[1], ",")
		}
		r.got[e.Name] = e
	}
	return nil
}

// MustRegister registers cs, panicking on an error.
func (r *registryRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c.
func (r *registryRecorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// list is what was registered, by name, the types of the metrics that are
// no vectors read from a gathering.
func (r *registryRecorder) list() ([]exportedMetric, error) {
	mfs, err := r.reg.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		if e := r.got[mf.GetName()]; e != nil {
			e.Type = typeName(mf.GetType())
		}
	}
	var out []exportedMetric
	for _, name := range slices.Sorted(maps.Keys(r.got)) {
		e := *r.got[name]
		if e.Type == "" {
			e.Type = "untyped"
		}
		out = append(out, e)
	}
	return out, nil
}

func typeName(t dto.MetricType) string {
	switch t {
	case dto.MetricType_COUNTER:
		return "counter"
	case dto.MetricType_GAUGE:
		return "gauge"
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		return "histogram"
	case dto.MetricType_SUMMARY:
		return "summary"
	}
	return "untyped"
}
