package bench

import (
	"testing"
	"time"
)

// TestBenchStoreFields: `bench store --fields … --peers 1` runs the
// image-text job from a real S3 server with the fields and without, alone
// and through a relay, every epoch exactly once with every sample's
// fields its own (the benchmark checks both), and reports the targets'
// ratios: per epoch, and over the later epochs pooled.
func TestBenchStoreFields(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers and versitygw")
	}
	var rep storeReport
	if err := benchReport(t, 5*time.Minute, &rep, "store", "--data", "../testdata/photos", "--layout", "webdataset",
		"--per-shard", "10", "--shuffle", "block", "--transform", "clip", "--fields", "txt,json,__key__", "--peers", "1",
		"--rounds", "2", "--epochs", "3", "--timeout", "4m", "--json"); err != nil {
		t.Fatal(err)
	}
	want := []string{"bucket", "bucket, fields", "relay (1 peer)", "relay (1 peer), fields"}
	if len(rep.Configs) != len(want) || len(rep.Runs) != 2*len(want) {
		t.Fatalf("configs %+v, %d runs; want %q, each twice", rep.Configs, len(rep.Runs), want)
	}
	for i, c := range rep.Configs {
		if c.Name != want[i] || c.Fields != (i%2 == 1) || c.Peers != i/2 {
			t.Errorf("config %d: %+v, want %q", i, c, want[i])
		}
	}
	// Round 2 runs each pair the other way round.
	if rep.Runs[0].Config != "bucket" || rep.Runs[4].Config != "bucket, fields" {
		t.Errorf("runs in the order %q, %q, …, %q, %q", rep.Runs[0].Config, rep.Runs[1].Config, rep.Runs[4].Config, rep.Runs[5].Config)
	}
	for _, r := range rep.Runs {
		for e, ep := range r.Epochs {
			if ep.Images != 42 || ep.SampleErrors != 0 || ep.CPU <= 0 || (ep.PeerCPU > 0) != (r.Config[0] == 'r') {
				t.Errorf("%s, round %d, epoch %d: %+v", r.Config, r.Round, e+1, ep)
			}
		}
	}
	x := rep.FieldRatios
	if rep.Ratios != nil || x == nil || len(x.PerCoreFieldsOverNone) != 3 || len(x.CoordCPUFieldsOverNone) != 3 ||
		x.Later == nil || len(x.Later.CoordCPUFieldsOverNone) != 1 || x.Later.PerCoreFieldsOverNone[0] <= 0 {
		t.Errorf("ratios %+v, field ratios %+v", rep.Ratios, x)
	}
}
