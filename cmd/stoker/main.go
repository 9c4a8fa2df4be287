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
//	stoker preview --data DIR -o grid.png
//	stoker mkdata  --out DIR [--n 2000]
//	stoker ops apply < cases.jsonl   (the ops after the geometry, alone: what the parity tests call)
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
	"serve":   runServe,
	"index":   runIndex,
	"bench":   bench.Run,
	"preview": runPreview,
	"mkdata":  runMkdata,
	"status":  runStatus,
	"metrics": runMetrics,
	"drain":   runDrain,
	"ops":     runOps,
}

// topUsage is what stoker prints without a command: its first line names
// every command (TestReference checks each has a section there).
const topUsage = "usage: stoker serve|index|status|metrics|drain|bench|preview|mkdata|ops [flags]\n" +
	"  stoker CMD -h for a command's flags; stoker --version for the version\n"

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Print(versionText())
		return
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprint(os.Stderr, topUsage)
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
