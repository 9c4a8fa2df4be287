package bucket

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// counted is the value of the counter name in g whose labels are the
// label, value pairs given (0 when none is counted yet).
func counted(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// checkBytes fails unless got is r's bytes.
func checkBytes(t testing.TB, contents map[string][]byte, r source.Range, got []byte) {
	t.Helper()
	if want := contents[r.Obj.Key][r.Off : r.Off+r.Len]; !bytes.Equal(got, want) {
		t.Fatalf("%s [%d, +%d): wrong bytes", r.Obj.Key, r.Off, r.Len)
	}
}

// shuffled returns a permutation of rs.
func shuffled(rs []source.Range, seed uint64) []source.Range {
	out := append([]source.Range(nil), rs...)
	rand.New(rand.NewPCG(seed, 7)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
