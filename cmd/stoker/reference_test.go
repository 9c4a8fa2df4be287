package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/pipeline/ops"
)

// docs/reference.md is generated from the binary: every command's --help
// as it prints it, and every metric stoker serve registers with its type,
// labels and help. TestReference regenerates it and fails on a
// difference; -update rewrites the file:
//
//	go test ./cmd/stoker -run TestReference -update

var updateReference = flag.Bool("update", false, "rewrite docs/reference.md from the binary (TestReference)")

const referencePath = "../../docs/reference.md"

// referenceCommands are the command lines whose --help the reference
// shows, under their headings.
var referenceCommands = []struct {
	heading string
	args    []string
	note    string
}{
	{"stoker serve", []string{"serve", "--help"}, "Serve datasets to trainers, and lease batches to peers."},
	{"stoker serve --help-bench", []string{"serve", "--help-bench"}, "The flags for benchmarks only."},
	{"stoker index", []string{"index", "--help"}, "Write a dataset's manifest, so that serve starts in seconds."},
	{"stoker status", []string{"status", "--help"}, "A server's jobs: images/s, stall, window, makers, advice."},
	{"stoker drain", []string{"drain", "--help"}, "A container's preStop hook: drain a serve and wait for it to exit."},
	{"stoker metrics", []string{"metrics", "--help"}, "Every metric stoker serve exports, from its registry (text, markdown or json)."},
	{"stoker mkdata", []string{"mkdata", "--help"}, "Write a synthetic ImageFolder of photo-sized JPEGs."},
	{"stoker preview", []string{"preview", "--help"}, "A grid of augmented samples, as the model will see them."},
	{"stoker ops", []string{"ops", "--help"}, "The ops after the geometry, alone, on given pixels: what the parity tests call."},
	{"stoker annotations", []string{"annotations", "--help"}, "A COCO annotations file as serve reads it: what is malformed, and its masks as pycocotools makes them."},
	{"stoker bench", []string{"bench", "--help"}, "The benchmarks (BENCHMARKS.md says what each measured)."},
	{"stoker bench pipeline", []string{"bench", "pipeline", "--help"}, ""},
	{"stoker bench scale", []string{"bench", "scale", "--help"}, ""},
	{"stoker bench load", []string{"bench", "load", "--help"}, ""},
	{"stoker bench backpressure", []string{"bench", "backpressure", "--help"}, ""},
	{"stoker bench store", []string{"bench", "store", "--help"}, ""},
}

// TestReference: docs/reference.md is what the binary says of its flags
// and metrics.
func TestReference(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	got := renderReference(t)
	if *updateReference {
		if err := os.WriteFile(referencePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", referencePath)
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < min(len(gl), len(wl)) && gl[i] == wl[i] {
			i++
		}
		line := func(ls []string) string {
			if i < len(ls) {
				return ls[i]
			}
			return "(end of file)"
		}
		t.Errorf("docs/reference.md is not what the binary says (run go test ./cmd/stoker -run TestReference -update, "+
			"and commit it); first difference at line %d:\n  file:   %q\n  binary: %q", i+1, line(wl), line(gl))
	}
}

// renderReference is docs/reference.md as the binary would have it.
func renderReference(t *testing.T) string {
	bin := stokerBinary(t)
	var b strings.Builder
	b.WriteString("# Reference: commands, flags and metrics\n\n" +
		"Every command's flags as `stoker CMD --help` prints them, and every metric `stoker serve` exports.\n" +
		"Generated from the binary by `go test ./cmd/stoker -run TestReference -update`; the same test\n" +
		"fails when this file and the binary differ, so do not edit it: change the flag's or the metric's\n" +
		"text in the code and regenerate. What the flags are for, by task: [operating.md](operating.md),\n" +
		"[datasets.md](datasets.md), [scaling-out.md](scaling-out.md), [security.md](security.md).\n\n")
	b.WriteString("- [Commands](#commands)\n")
	for _, c := range referenceCommands {
		fmt.Fprintf(&b, "- [%s](#%s)\n", c.heading, anchor(c.heading))
	}
	b.WriteString("- [Ops](#ops)\n- [Metrics](#metrics)\n\n## Commands\n\n```text\n")
	code, usage := runHelp(t, bin, "--help")
	if code != 0 {
		t.Errorf("stoker --help exited %d, want 0", code)
	}
	checkHelpWidth(t, "stoker", usage)
	checkUsageCommands(t, usage)
	b.WriteString(usage)
	b.WriteString("```\n")
	for _, c := range referenceCommands {
		fmt.Fprintf(&b, "\n## %s\n\n", c.heading)
		if c.note != "" {
			b.WriteString(c.note + "\n\n")
		}
		code, out := runHelp(t, bin, c.args...)
		checkHelpWidth(t, "stoker "+strings.Join(c.args, " "), out)
		if code != 0 && !slices.Equal(c.args, []string{"bench", "--help"}) {
			t.Errorf("stoker %s exited %d:\n%s", strings.Join(c.args, " "), code, out)
		}
		b.WriteString("```text\n" + out + "```\n")
	}
	b.WriteString("\n## Ops\n\n" +
		"The ops a transform is made of, as `stoker ops list --json` prints them from the server's op registry\n" +
		"(`pipeline/ops`, `pipeline/transform`): where each stands (the geometry, fused into the decode, first; the ops after it, in\n" +
		"order; the containers), what it does to a job's targets, and its arguments with torchvision's\n" +
		"defaults. `stoker.transforms` has a class of each name taking the same arguments (a test holds them\n" +
		"to this table; a *named* op's class is generated from it); every op travels as a `NamedOp`. What they do, with examples:\n" +
		"[transforms.md](transforms.md), [detection.md](detection.md).\n\n" +
		"| op | place | targets | arguments | what it does |\n|---|---|---|---|---|\n")
	for _, op := range referenceOps(t, bin) {
		var args []string
		for _, p := range op.Params {
			a := p.Name
			if p.KeywordOnly {
				a = "*" + a
			}
			if !p.Required {
				a += "=" + p.Default
			}
			args = append(args, "`"+a+"`")
		}
		place := op.Place
		if op.Named {
			place += " (named)"
		}
		targets := op.Targets
		if op.NeedsTargets {
			targets += " (needs them)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", op.Name, place, targets, strings.Join(args, ", "), strings.ReplaceAll(op.Doc, "|", `\|`))
	}
	b.WriteString("\n## Metrics\n\n" +
		"`stoker serve --metrics ADDR` serves them at `/metrics`, beside the Go runtime's (`go_*`) and the\n" +
		"process's (`process_*`). Per-job series carry the label `stoker_job` and are deleted when the job's\n" +
		"stream ends. Which to watch, and what they tell: [operating.md](operating.md#metrics).\n\n" +
		"| metric | type | labels | help |\n|---|---|---|---|\n")
	for _, m := range referenceMetrics(t) {
		labels := "—"
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.kind, labels, strings.ReplaceAll(m.help, "|", `\|`))
	}
	return b.String()
}

// checkHelpWidth fails the test for every line of a command's help wider
// than helptext.Width columns (a tab reaching the next multiple of 8).
func checkHelpWidth(t *testing.T, cmd, help string) {
	t.Helper()
	for i, line := range strings.Split(help, "\n") {
		if n := helptext.Columns(line); n > helptext.Width {
			t.Errorf("%s: line %d is %d columns, over %d (wrap it as helptext does): %q", cmd, i+1, n, helptext.Width, line)
		}
	}
}

// usageCommands matches the top-level usage's first line, which names
// every command: "usage: stoker serve|index|... [flags]".
var usageCommands = regexp.MustCompile(`^usage: stoker ([a-z|]+) `)

// checkUsageCommands: every command the top-level usage names, and every
// command main runs, has a section of the reference, and they are the
// same commands.
func checkUsageCommands(t *testing.T, usage string) {
	t.Helper()
	m := usageCommands.FindStringSubmatch(usage)
	if m == nil {
		t.Fatalf("the top-level usage names no commands: %q", usage)
	}
	named := strings.Split(m[1], "|")
	headed := map[string]bool{}
	for _, c := range referenceCommands {
		headed[c.args[0]] = true
	}
	for _, c := range named {
		if !headed[c] {
			t.Errorf("the usage names %q, and the reference has no section for it (add it to referenceCommands)", c)
		}
		if commands[c] == nil {
			t.Errorf("the usage names %q, which is no command", c)
		}
	}
	for c := range commands {
		if !slices.Contains(named, c) {
			t.Errorf("command %q is not in the top-level usage's first line", c)
		}
	}
}

// runHelp runs the binary with args and returns its exit code and what it
// printed, a leading "stoker: " (an error's prefix) dropped and the line
// ends trimmed.
func runHelp(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("stoker %s: %v", strings.Join(args, " "), err)
	}
	var lines []string
	for line := range strings.Lines(strings.TrimPrefix(out.String(), "stoker: ")) {
		lines = append(lines, strings.TrimRight(line, " \t\n"))
	}
	return code, strings.Join(lines, "\n") + "\n"
}

// anchor is the forge's anchor of a heading: lower case, spaces to
// hyphens, other punctuation dropped.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// metricDoc is one metric the server registers.
type metricDoc struct {
	name, kind, help string
	labels           []string
}

// referenceMetrics are the metrics server.New registers, by name, with
// every optional part on: what `stoker metrics` lists, less the Go
// runtime's, the process's and the /metrics handler's own.
func referenceMetrics(t *testing.T) []metricDoc {
	ms, err := exportedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	var out []metricDoc
	for _, m := range ms {
		if strings.HasPrefix(m.Name, "go_") || strings.HasPrefix(m.Name, "process_") || strings.HasPrefix(m.Name, "promhttp_") {
			continue
		}
		if m.Type == "" {
			t.Errorf("metric %s: no type found (neither a vector nor gathered)", m.Name)
		}
		out = append(out, metricDoc{name: m.Name, kind: m.Type, help: m.Help, labels: m.Labels})
	}
	if len(out) < 10 {
		t.Fatalf("found %d metrics", len(out))
	}
	return out
}

// referenceOps are the binary's ops, as `stoker ops list --json` prints
// them.
func referenceOps(t *testing.T, bin string) []ops.OpSchema {
	t.Helper()
	out, err := exec.Command(bin, "ops", "list", "--json").Output()
	if err != nil {
		t.Fatalf("stoker ops list --json: %v", err)
	}
	var ops []ops.OpSchema
	if err := json.Unmarshal(out, &ops); err != nil {
		t.Fatalf("stoker ops list --json: %v\n%s", err, out)
	}
	if len(ops) == 0 {
		t.Fatal("stoker ops list --json lists no ops")
	}
	return ops
}
