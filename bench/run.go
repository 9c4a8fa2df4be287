package bench

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/internal/helptext"
)

// subcommands are `stoker bench`'s, in the order its usage lists them.
var subcommands = []struct {
	name, what string
	run        func(args []string) error // the arguments after the name
}{
	{"pipeline", "one machine's decode and augment rate per core (--data DIR --threads N)",
		func(args []string) error { return runBench(append([]string{"pipeline"}, args...)) }},
	{"views", "a sample of several views (--transform dinov2) made from one decode against its views as separate jobs: CPU per sample", runViews},
	{"scale", "scale-out over stoker serve worker processes: images/s, CPU per image, protocol overhead", runScale},
	{"load", "many trainer streams, half of them slow, against one server: memory and fairness", runLoad},
	{"backpressure", "the window controller and the advisor against simulated trainers (--scenario autoscale: bin/stoker-lab, make lab)", runBackpressure},
	{"cost", "the cost model's calibration: each kernel family's ns per pixel, the decode's per source pixel, every preset's CPU per sample against the prediction (--data DIR)", runCost},
	{"store", "a dataset in object storage (a real S3 server on loopback, latency added) against local disk: CPU, GETs and bytes per image (bin/stoker-lab, make lab)", runStore},
}

// usage lists every subcommand.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: stoker bench SUB [flags]   (stoker bench SUB -h for its flags)\n")
	for _, c := range subcommands {
		for i, line := range helptext.Wrap(c.what, helptext.Width-16) {
			if i > 0 {
				c.name = ""
			}
			fmt.Fprintf(&b, "  %-13s %s\n", c.name, line)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Run is `stoker bench SUB`; without SUB, or with another word, it
// returns the usage, which lists every SUB.
func Run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("bench: which benchmark?\n%s", usage())
	}
	for _, c := range subcommands {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return fmt.Errorf("%s", usage())
	}
	return fmt.Errorf("bench: no benchmark %q\n%s", args[0], usage())
}
