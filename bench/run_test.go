package bench

import (
	"strings"
	"testing"
)

// TestRunListsEverySubcommand: `stoker bench` alone, or with a word that
// is no benchmark, answers with the usage, which names every one.
func TestRunListsEverySubcommand(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"-h"}} {
		err := Run(args)
		if err == nil {
			t.Fatalf("Run(%q): no error", args)
		}
		for _, sub := range []string{"pipeline", "scale", "load", "backpressure"} {
			if !strings.Contains(err.Error(), "\n  "+sub+" ") {
				t.Errorf("Run(%q) does not list %s:\n%v", args, sub, err)
			}
		}
	}
	if err := Run([]string{"nope"}); !strings.Contains(err.Error(), `no benchmark "nope"`) {
		t.Errorf("Run(nope): %v", err)
	}
	if err := Run([]string{"pipeline"}); err == nil || !strings.Contains(err.Error(), "--data is required") {
		t.Errorf("Run(pipeline) without --data: %v", err)
	}
}
