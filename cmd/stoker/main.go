// Command stoker serves augmented image batches to trainers and measures
// the pipeline.
//
//	stoker serve   --listen ADDR --dataset NAME=PATH|URL [--manifest NAME=PATH|URL] [...]
//	stoker index   URL|DIR [--out PATH|URL]   (a dataset's manifest, so serve starts in seconds)
//	stoker bench pipeline --data DIR --threads N [--json]
//	stoker bench scale [--peers 1,2,3] [--rounds R] [--json]
//	stoker bench load [--streams 8] [--slow 4] [--seconds 60] [--json]
//	stoker bench backpressure [--scenario all] [--json]
//	stoker bench   (lists the benchmarks)
//	stoker preview --data DIR|URL -o grid.png
//	stoker mkdata  --out DIR [--n 2000]
//	stoker ops apply < cases.jsonl   (the ops after the geometry, alone: what the parity tests call)
//	stoker annotations check|masks FILE.json   (a COCO file as serve reads it; its masks as pycocotools makes them)
//	stoker status  ADDR
//	stoker metrics [--format text|markdown|json]   (every metric serve exports)
//	stoker drain   [--pid 1]   (a container's preStop: drain serve, wait for it to exit)
//	stoker --version
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc/experimental"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/internal/rpc"
)

// The proto codec takes its buffers from gRPC's default pool, which zeroes
// every buffer it hands out; for this process, which relays batches, use
// the pool that does not (see rpc.BufferPool). Only at init, as gRPC
// requires.
func init() { experimental.SetDefaultBufferPool(rpc.BufferPool) }

var commands = map[string]func(args []string) error{
	"serve":       runServe,
	"index":       runIndex,
	"bench":       bench.Run,
	"preview":     runPreview,
	"mkdata":      runMkdata,
	"status":      runStatus,
	"metrics":     runMetrics,
	"drain":       runDrain,
	"ops":         runOps,
	"annotations": runAnnotations,
}

// summaries say what each command does, in the order the top-level usage
// lists them.
var summaries = []struct{ name, what string }{
	{"serve", "serve datasets to trainers over gRPC, and lease batches to peers"},
	{"index", "write a dataset's manifest, so that serve starts in seconds"},
	{"status", "a server's jobs: images/s, stall, window, makers, advice (--watch to follow)"},
	{"metrics", "every metric serve exports (text, markdown or json)"},
	{"drain", "a container's preStop hook: drain a serve and wait for it to exit"},
	{"bench", "the benchmarks: the pipeline against torchvision, scaling out, load, stores"},
	{"preview", "a grid of augmented samples of a dataset, as the model will see them"},
	{"mkdata", "write a synthetic ImageFolder of photo-sized JPEGs"},
	{"ops", "the ops after the geometry, alone, on given pixels: what the parity tests call"},
	{"annotations", "what stoker reads of a COCO annotations file: check it, print its masks"},
}

// topUsage is what stoker prints for --help (to stdout), and without a
// command or with an unknown one (to stderr, exit 2): its first line names
// every command (TestReference checks each has a section there), then
// what each does.
func topUsage() string {
	names := make([]string, len(summaries))
	width := 0
	for i, c := range summaries {
		names[i] = c.name
		width = max(width, len(c.name))
	}
	var b strings.Builder
	for _, c := range summaries {
		fmt.Fprintf(&b, "  %-*s %s\n", width, c.name, c.what)
	}
	return "usage: stoker " + strings.Join(names, "|") + " [flags]\n\n" + b.String() +
		"\nstoker CMD -h for a command's flags; stoker --version for the version\n"
}

func main() {
	if len(os.Args) == 2 {
		switch os.Args[1] {
		case "--version", "-version", "version":
			fmt.Print(versionText())
			return
		case "--help", "-help", "-h", "help":
			fmt.Print(topUsage())
			return
		}
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		if len(os.Args) >= 2 {
			fmt.Fprintf(os.Stderr, "stoker: unknown command %q\n", os.Args[1])
		}
		fmt.Fprint(os.Stderr, topUsage())
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // the usage was asked for, and printed
		}
		fmt.Fprintln(os.Stderr, "stoker:", err)
		if errors.As(err, new(usageError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
