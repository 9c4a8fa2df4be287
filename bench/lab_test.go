package bench

import (
	"strings"
	"testing"
)

// TestLabless: without bench/lab linked (the product binary, and this
// test binary), bench store and the autoscale scenario parse their flags
// and then say what they need and where it is (bin/stoker-lab, make lab),
// before any work; the other scenarios need no lab.
func TestLabless(t *testing.T) {
	if lab != nil {
		t.Fatal("bench's own tests link bench/lab: this test checks the product binary's refusal")
	}
	for _, args := range [][]string{
		{"store", "--n", "1"},
		{"backpressure", "--scenario", "autoscale"},
	} {
		err := Run(args)
		if err == nil || !strings.Contains(err.Error(), "make lab") || !strings.Contains(err.Error(), "bin/stoker-lab bench "+args[0]) {
			t.Errorf("stoker bench %v without bench/lab: %v; want the error naming make lab and bin/stoker-lab", args, err)
		}
	}
}
