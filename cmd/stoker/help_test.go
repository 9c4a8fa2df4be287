package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHelpAlike: every command's -h starts alike: "usage: stoker NAME ...",
// a blank line, then a sentence of what it does (not Go's raw "Usage of
// NAME:" flag dump), and exits 0.
func TestHelpAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := stokerBinary(t)
	for _, cmd := range [][]string{{"serve"}, {"status"}, {"index"}, {"drain"}, {"metrics"}, {"mkdata"}, {"preview"},
		{"annotations"}, {"ops"}, {"bench", "pipeline"}, {"bench", "scale"}, {"bench", "load"}, {"bench", "backpressure"},
		{"bench", "store"}, {"bench", "views"}, {"bench", "cost"}} {
		name := strings.Join(cmd, " ")
		out, err := exec.Command(bin, append(cmd, "-h")...).CombinedOutput()
		if err != nil {
			t.Errorf("stoker %s -h: %v\n%s", name, err, out)
			continue
		}
		lines := strings.Split(string(out), "\n")
		if len(lines) < 4 || !strings.HasPrefix(lines[0], "usage: stoker "+name) || lines[1] != "" || len(strings.Fields(lines[2])) < 3 {
			t.Errorf("stoker %s -h begins %q: want \"usage: stoker %s ...\", a blank line, a sentence", name, lines[:min(3, len(lines))], name)
		}
		if strings.Contains(string(out), "Usage of ") {
			t.Errorf("stoker %s -h prints Go's raw flag dump", name)
		}
	}
}
