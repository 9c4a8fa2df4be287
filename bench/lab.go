package bench

import (
	"context"
	"fmt"
	"time"
)

// The lab: what two benchmarks need that is the tests' harness, not the
// product's, and that the product binary (cmd/stoker) does not link: a real
// S3 server on loopback with a proxy adding latency (internal/storetest,
// internal/faultproxy), for `stoker bench store`, and a DNS server
// answering for the workers' name (internal/localnet), for `stoker bench
// backpressure --scenario autoscale`. Package bench/lab provides it and
// registers it (UseLab) when linked: `make lab` builds bin/stoker-lab, the
// same stoker with bench/lab linked (go build -tags lab ./cmd/stoker:
// cmd/stoker/lab.go), which runs every subcommand as bin/stoker does and
// these two besides. bin/stoker parses their flags (so --help works) and
// then says where they are.

// LabT is what the lab's helpers ask of their caller: internal/storetest's
// T, which benchT is outside a test. Fatal and Fatalf must not return.
type LabT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Error(args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Failed() bool
	Context() context.Context
}

// LabBucket is a dataset put into the lab's S3 server.
type LabBucket struct {
	URL    string     // s3://bench/data/
	Direct []string   // the AWS variables that reach the server directly
	Via    [][]string // per latency asked for, those that reach it through a proxy adding it
}

// LabDNS is a DNS server on 127.0.0.1 answering A queries for one name
// with the addresses last Set.
type LabDNS interface {
	Addr() string
	Set(ips ...string)
	Close()
}

// Lab is the harness bench/lab registers.
type Lab interface {
	// WriteShards writes src's ImageFolder into dst as tar shards of
	// perShard samples (WebDataset's layout).
	WriteShards(t LabT, src, dst string, perShard int)
	// Bucket starts an S3 server keeping its files under dir, puts
	// local's files under s3://bench/data/, and starts one proxy per
	// latency; all stop with t's cleanups.
	Bucket(t LabT, dir, local string, latencies []time.Duration) (LabBucket, error)
	// DNS starts a DNS server answering for name, with no address yet.
	DNS(name string) (LabDNS, error)
}

var lab Lab

// UseLab registers the lab's harness (bench/lab's init).
func UseLab(l Lab) { lab = l }

// needLab returns the lab, or an error saying where what needs it runs.
// cmd is the command as typed after `stoker `.
func needLab(cmd, needs string) (Lab, error) {
	if lab == nil {
		return nil, fmt.Errorf("stoker %s needs %s, a test harness the product binary does not link: "+
			"`make lab` builds bin/stoker-lab (go build -tags lab ./cmd/stoker), the same stoker with it; run bin/stoker-lab %s",
			cmd, needs, cmd)
	}
	return lab, nil
}
