package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/storetest"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestIndexAndServeAzure: an ImageFolder and its shards in Azure Blob
// Storage (Azurite): `stoker index` of each writes a manifest beside the
// data with the local copy's fingerprint, and `stoker serve` of the
// azblob:// URL, from that manifest, sends the same batches, byte for
// byte, as the local copy; a second server reaches the store by a
// connection string alone. No credential shows in a log.
func TestIndexAndServeAzure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and Azurite processes")
	}
	ctx := processTest(t, 4*time.Minute)
	const n = 24
	data := writeDataset(t, n, 3, 0)
	shards := t.TempDir()
	storetest.WriteShards(t, data, shards, 5)
	a := storetest.StartAzure(t, t.TempDir())
	a.CreateContainer(t, "ctr")
	a.PutTree(t, "ctr", "if/", data)
	a.PutTree(t, "ctr", "wds/", shards)
	for _, kv := range a.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	localFP := strings.Fields(runIndexCmd(t, ctx, nil, linkTree(t, data)))
	out := runIndexCmd(t, ctx, nil, a.URL("ctr", "if/"))
	if !strings.HasPrefix(out, "wrote azblob://ctr/if/.stoker/manifest: imagefolder, 24 samples in 24 objects, 3 classes") ||
		!strings.Contains(out, "fingerprint "+localFP[len(localFP)-3]) {
		t.Fatalf("stoker index of the container said %q; the local copy's: %q", out, localFP)
	}
	out = runIndexCmd(t, ctx, nil, a.URL("ctr", "wds/"))
	if !strings.HasPrefix(out, "wrote azblob://ctr/wds/.stoker/manifest: webdataset, 24 samples in 5 objects") {
		t.Fatalf("stoker index of the shards said %q", out)
	}
	serve := func(name, dataset string) *serveProc {
		return launchServe(t, serveConfig{name: name, dataset: dataset, workers: 1})
	}
	procs := map[string]*serveProc{
		"local": serve("local", data), "azure": serve("azure", a.URL("ctr", "if/")),
		"wds": serve("wds", shards), "azure wds": serve("azure wds", a.URL("ctr", "wds/")),
	}
	// The same store by its connection string alone.
	t.Setenv("AZURE_STORAGE_ACCOUNT", "")
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_DOMAIN", "")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", a.ConnectionString())
	procs["azure by connection string"] = serve("azure by connection string", a.URL("ctr", "if/"))
	for _, p := range procs {
		p.waitReady(t, ctx)
	}
	same := func(what string, spec *stokerv1.JobSpec, want string, others ...string) {
		t.Helper()
		fp, sums := epochSums(t, ctx, procs[want].addr, spec, n)
		for _, o := range others {
			ofp, osums := epochSums(t, ctx, procs[o].addr, spec, n)
			if ofp != fp || len(osums) != len(sums) {
				t.Errorf("%s: %s has fingerprint %s and %d batches, %s %s and %d", what, o, ofp, len(osums), want, fp, len(sums))
				continue
			}
			for k := range sums {
				if osums[k] != sums[k] {
					t.Errorf("%s: batch %d from %s differs from %s's", what, k, o, want)
				}
			}
		}
	}
	same("imagefolder", testJob(5, 7), "local", "azure", "azure by connection string")
	same("webdataset", testJob(5, 7), "wds", "azure wds")
	for name, p := range procs {
		if strings.HasPrefix(name, "azure") && len(p.findLogs("dataset opened from its manifest", map[string]string{"dataset": "ds"})) != 1 {
			t.Errorf("%s did not open the dataset from its manifest", name)
		}
		if strings.Contains(p.logs.String(), storetest.AzuriteKey) {
			t.Errorf("%s logged the account key", name)
		}
	}
}
