// Package lab is the benchmarks' share of the tests' harnesses: an S3
// server on loopback (internal/storetest's versitygw), a proxy adding
// latency (internal/faultproxy) and a DNS server (internal/localnet),
// registered with bench (bench.UseLab) for `stoker bench store` and
// `stoker bench backpressure --scenario autoscale`. The product binary
// does not link it; bin/stoker-lab does (`make lab`: go build -tags lab
// ./cmd/stoker, whose lab.go imports this package).
package lab

import (
	"time"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/localnet"
	"github.com/stoker-dev/stoker/internal/storetest"
)

func init() { bench.UseLab(harness{}) }

// harness is bench.Lab over the tests' packages.
type harness struct{}

func (harness) WriteShards(t bench.LabT, src, dst string, perShard int) {
	storetest.WriteShards(t, src, dst, perShard)
}

func (harness) Bucket(t bench.LabT, dir, local string, latencies []time.Duration) (bench.LabBucket, error) {
	s3 := storetest.StartS3(t, dir)
	s3.CreateBucket(t, "bench")
	s3.PutTree(t, "bench", "data/", local)
	b := bench.LabBucket{URL: s3.URL("bench", "data/"), Direct: s3.Env()}
	for _, lat := range latencies {
		p, err := faultproxy.New(s3.Endpoint, 1, faultproxy.Plan{Latency: lat})
		if err != nil {
			return bench.LabBucket{}, err
		}
		t.Cleanup(func() { p.Close() })
		b.Via = append(b.Via, s3.EnvFor(p.URL()))
	}
	return b, nil
}

func (harness) DNS(name string) (bench.LabDNS, error) { return localnet.StartDNS(name) }
