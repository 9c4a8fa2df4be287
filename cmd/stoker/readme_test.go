package main

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeRow is a row of docs/operating.md's metrics table (once the
// README's): | `name` | `label`, ... or — | what |
var readmeRow = regexp.MustCompile("^\\| `(stoker_[a-z_]+)` \\| ([^|]*) \\| [^|]+ \\|$")

// TestReadmeMetrics: the metrics table of docs/operating.md (the
// README's before the docs moved there) names every metric the server
// registers, each with the labels it has (metric and label names are an
// interface: dashboards, rules and the HPA are written from it).
func TestReadmeMetrics(t *testing.T) {
	data, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for line := range strings.Lines(string(data)) {
		m := readmeRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		var labels []string
		if cell := strings.TrimSpace(m[2]); cell != "—" {
			for l := range strings.SplitSeq(cell, ",") {
				labels = append(labels, strings.Trim(strings.TrimSpace(l), "`"))
			}
		}
		if _, dup := documented[m[1]]; dup {
			t.Errorf("docs/operating.md: %s twice in the metrics table", m[1])
		}
		documented[m[1]] = labels
	}
	registered, _ := serverMetrics(t)
	if len(documented) < 10 {
		t.Fatalf("docs/operating.md: found %d rows in the metrics table", len(documented))
	}
	for _, name := range slices.Sorted(maps.Keys(registered)) {
		labels, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("docs/operating.md: %s{%s} is registered but not in the metrics table", name, strings.Join(registered[name], ","))
		case !slices.Equal(slices.Sorted(slices.Values(labels)), slices.Sorted(slices.Values(registered[name]))):
			t.Errorf("docs/operating.md: %s has labels %q in the metrics table, %q registered", name, labels, registered[name])
		}
	}
	for name := range documented {
		if _, ok := registered[name]; !ok {
			t.Errorf("docs/operating.md: %s is in the metrics table, the server registers no such metric", name)
		}
	}
}
