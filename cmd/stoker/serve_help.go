package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/stoker-dev/stoker/internal/helptext"
)

// helpWidth is the longest line `stoker serve --help` prints, as every
// command's.
const helpWidth = helptext.Width

// serveGroups are serve's flags by what a user sets them for, in the order
// --help lists them; every flag is in one (TestServeHelpGroups), the
// benchmarks' in benchGroup, which --help-bench lists instead.
var serveGroups = []struct {
	title string
	flags []string
}{
	{"Serving", []string{"listen", "workers", "metrics", "health-listen", "addr-file", "while-locked", "shm", "grace", "log-format",
		"log-level", "pprof"}},
	{"Datasets", []string{"dataset", "annotations", "manifest", "cache-dir", "cache-budget", "cache-key-file", "store-timeout", "store-attempts"}},
	{"Peers (scale-out: a coordinator leasing batches to workers)", []string{"peers", "peer-refresh", "accept-work",
		"window", "lease-timeout", "verify-fraction", "cache-affinity"}},
	{"Security", []string{"tls-cert", "tls-key", "tls-client-ca", "auth-tokens", "peer-token-file", "peer-ca",
		"peer-cert", "peer-key", "peer-insecure-token"}},
	{"Limits (what one client, stream or file may take)", []string{"memory-budget", "max-streams",
		"max-streams-per-client", "max-work-streams", "max-work-streams-per-client", "max-work-memory-per-client",
		"max-batch-bytes", "max-sample-cpu", "max-measured-cpu",
		"first-message-timeout", "idle-timeout", "work-idle-timeout", "work-job-idle", "pixel-budget", "max-scans", "max-file-size"}},
	{"Tuning", []string{"gpus", "stall-target", "schedule", "share-floor", "work-share", "max-cpu-weight", "advise-window",
		"max-workers-recommended", "index-budget", "index-dir", "coef-budget", "partner-budget", "decode"}},
}

// benchGroup are the flags for benchmarks only, listed by --help-bench.
var benchGroup = []string{"bench-replay", "bench-rate", "bench-gpu-idle-file"}

// argNames name a flag's argument in --help where the flag package's type
// name ("string", "int") would say less.
var argNames = map[string]string{
	"listen": "ADDR", "metrics": "ADDR", "health-listen": "ADDR", "addr-file": "FILE", "while-locked": "FILE", "log-format": "text|json",
	"log-level": "LEVEL", "cache-dir": "DIR", "cache-budget": "BYTES", "cache-key-file": "FILE", "peers": "ADDR,...|dns:///NAME:PORT",
	"tls-cert": "FILE", "tls-key": "FILE", "tls-client-ca": "FILE", "auth-tokens": "FILE", "peer-token-file": "FILE",
	"peer-ca": "FILE", "peer-cert": "FILE", "peer-key": "FILE", "memory-budget": "BYTES", "max-batch-bytes": "BYTES",
	"pixel-budget": "PIXELS", "max-file-size": "BYTES", "max-work-memory-per-client": "BYTES", "gpus": "all|none|0,1,...", "schedule": "stall|fifo", "decode": "exact|fast",
	"index-budget": "BYTES", "index-dir": "DIR", "coef-budget": "BYTES", "partner-budget": "BYTES", "bench-gpu-idle-file": "FILE",
}

// typeArgs name the other flags' arguments by their type.
var typeArgs = map[string]string{"int": "N", "uint": "N", "duration": "DURATION", "float": "NUMBER", "string": "STRING"}

// defaultText is what --help says of a default that depends on the
// machine (so that the reference generated from it does not).
var defaultText = map[string]string{"workers": "the number of CPUs"}

const serveIntro = `usage: stoker serve --dataset NAME=PATH|URL [flags]

Serves datasets to trainers (stoker.Loader, client.Loader) over gRPC: it reads, decodes and
augments images on many goroutines, and streams uint8 batches; with --peers it also leases
batches to other stoker serve processes (workers) and checks what they send.

Examples:
  stoker serve --dataset imagenet=/data/imagenet/train
  stoker serve --dataset imagenet=s3://my-bucket/imagenet/train --metrics 127.0.0.1:9090
  stoker serve --listen 0.0.0.0:7070 --dataset imagenet=/data/train \
      --tls-cert server.pem --tls-key server.key --auth-tokens /etc/stoker/tokens
  stoker serve --dataset imagenet=/data/train --workers 8 --peers cpu1:7070,cpu2:7070
`

const serveOutro = `
Flags for benchmarks only: stoker serve --help-bench. Every flag and metric, and what to do
about each error: docs/reference.md and docs/operating.md in the repository.
`

// serveUsage writes serve's --help (bench: --help-bench) to w: the flags
// in their groups, each wrapped to helpWidth.
func serveUsage(w io.Writer, fs *flag.FlagSet, bench bool) {
	if bench {
		fmt.Fprint(w, "usage: stoker serve [flags]\n\nFor benchmarks only (bench/), never for training:\n")
		for _, name := range benchGroup {
			writeFlagHelp(w, fs.Lookup(name))
		}
		return
	}
	fmt.Fprint(w, serveIntro)
	for _, g := range serveGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil {
				writeFlagHelp(w, f)
			}
		}
	}
	if other := ungroupedFlags(fs); len(other) > 0 {
		fmt.Fprint(w, "\nOther:\n")
		for _, name := range other {
			writeFlagHelp(w, fs.Lookup(name))
		}
	}
	fmt.Fprint(w, serveOutro)
}

// ungroupedFlags are fs's flags in no group (a flag added without one:
// --help still lists it, under Other, and a test fails).
func ungroupedFlags(fs *flag.FlagSet) []string {
	known := map[string]bool{"help-bench": true}
	for _, g := range serveGroups {
		for _, n := range g.flags {
			known[n] = true
		}
	}
	for _, n := range benchGroup {
		known[n] = true
	}
	var other []string
	fs.VisitAll(func(f *flag.Flag) {
		if !known[f.Name] {
			other = append(other, f.Name)
		}
	})
	return other
}

// writeFlagHelp writes one flag: "  --name ARG" and its description (with
// its default) wrapped below it, indented.
func writeFlagHelp(w io.Writer, f *flag.Flag) {
	arg, usage := flag.UnquoteUsage(f)
	// A flag.Func's usage starts with its argument: "NAME=PATH: ...".
	if first, rest, ok := strings.Cut(usage, ": "); ok && arg == "value" && !strings.Contains(first, " ") {
		arg, usage = first, rest
	}
	if a, ok := argNames[f.Name]; ok {
		arg = a
	} else if a, ok := typeArgs[arg]; ok {
		arg = a
	}
	head := "  --" + f.Name
	if arg != "" {
		head += " " + arg
	}
	if def, ok := defaultText[f.Name]; ok {
		usage += " (default: " + def + ")"
	} else if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" {
		usage += " (default " + d + ")"
	}
	fmt.Fprintln(w, head)
	for _, line := range wrap(usage, helpWidth-6) {
		fmt.Fprintln(w, "      "+line)
	}
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) []string { return helptext.Wrap(s, width) }
