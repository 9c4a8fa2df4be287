package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeCoefBudget runs a real server with the default --coef-budget
// (on: a quarter of --memory-budget): its coefficient cache admits every
// file in the second epoch and serves MCUs in the third, whose batches are
// the very batches of a server without a cache (--coef-budget -1); and a
// budget over half of --memory-budget is refused at start, saying why.
func TestServeCoefBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	ctx := processTest(t, 5*time.Minute)
	const n = 24
	data := writeDataset(t, n, 3, 0)

	const memory = 1 << 30
	cached := startServe(t, ctx, serveConfig{name: "coefs", dataset: data, workers: 2, args: []string{"--memory-budget", "1073741824"}})
	// A file is admitted on its second decode (the index has seen it):
	// the first epoch stores nothing, the second every file. (A batch made
	// twice in the first epoch, a lease that timed out on a loaded machine,
	// decodes its files a second time: they are admitted then, and each is
	// an index hit.)
	consumeEpoch(t, ctx, cached.addr, testJob(8, 1), consumeOpts{})
	if f, h := cached.metric(t, ctx, "stoker_coef_cache_files"), cached.metric(t, ctx, "stoker_index_hits_total"); f > h {
		t.Errorf("stoker_coef_cache_files %v after a first epoch with %v index hits: a file admitted on its first decode", f, h)
	}
	consumeEpoch(t, ctx, cached.addr, testJob(8, 2), consumeOpts{})
	if f := cached.metric(t, ctx, "stoker_coef_cache_files"); f != n {
		t.Errorf("stoker_coef_cache_files %v after a second epoch, want %d", f, n)
	}
	if b := cached.metric(t, ctx, "stoker_coef_cache_bytes"); !(b > 0 && b <= memory/4) {
		t.Errorf("stoker_coef_cache_bytes %v, want within (0, budget]", b)
	}
	hit0 := cached.metric(t, ctx, "stoker_coef_cache_mcus_hit_total")
	got := consumeEpoch(t, ctx, cached.addr, testJob(8, 3), consumeOpts{})
	hit, all := cached.metric(t, ctx, "stoker_coef_cache_mcus_hit_total"), cached.metric(t, ctx, "stoker_coef_cache_mcus_total")
	if !(hit > hit0 && hit <= all) {
		t.Errorf("third epoch: MCUs from the cache %v (before it %v) of %v", hit, hit0, all)
	}

	none := startServe(t, ctx, serveConfig{name: "no-coefs", dataset: data, workers: 2, args: []string{"--coef-budget", "-1"}})
	want := consumeEpoch(t, ctx, none.addr, testJob(8, 3), consumeOpts{})
	if len(got.batches) != len(want.batches) {
		t.Fatalf("%d batches with the cache, %d without", len(got.batches), len(want.batches))
	}
	for i := range want.batches {
		if got.batches[i].sum() != want.batches[i].sum() {
			t.Errorf("batch %d differs with the coefficient cache", i)
		}
	}

	cctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	out, err := exec.CommandContext(cctx, stokerBinary(t), "serve", "--listen", "127.0.0.1:0", "--dataset", "ds="+data,
		"--memory-budget", "500000000", "--coef-budget", "300000000").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || cctx.Err() != nil {
		t.Fatalf("--coef-budget over half of --memory-budget: %v, want a non-zero exit at start\n%s", err, out)
	}
	if !strings.Contains(string(out), "coef budget 300000000 is more than half of the memory budget 500000000") {
		t.Errorf("the refusal does not say why:\n%s", out)
	}
}

// TestServeTranscodes runs a real server over progressive JPEGs (the
// photo set's progressive photo, each copy told apart by a comment
// segment, so each is a file of its own) beside baseline ones: the
// coefficient cache transcodes each progressive file in its first epoch
// (stoker_coef_cache_transcoded_files, _bytes), the third decodes them from
// the transcodes (stoker_coef_cache_transcode_hits_total), and its batches
// are the very batches of a server without a cache (--coef-budget -1).
func TestServeTranscodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	ctx := processTest(t, 5*time.Minute)
	prog, err := os.ReadFile("../../testdata/photos/bythewater/000001-progressive.jpg")
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Glob("../../testdata/photos/*/00000[2-9].jpg")
	if err != nil || len(base) < 4 {
		t.Fatalf("baseline photos: %v, %d", err, len(base))
	}
	root := t.TempDir()
	const nprog = 6
	for c, files := range map[string]int{"prog": nprog, "base": 4} {
		dir := filepath.Join(root, c)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range files {
			var b []byte
			if c == "prog" {
				com := fmt.Sprintf("copy %d", i)
				b = append([]byte{0xFF, 0xD8, 0xFF, 0xFE, 0, byte(2 + len(com))}, com...)
				b = append(b, prog[2:]...)
			} else if b, err = os.ReadFile(base[i]); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.jpg", i)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cached := startServe(t, ctx, serveConfig{name: "coefs", dataset: root, workers: 2, args: []string{"--memory-budget", "1073741824"}})
	consumeEpoch(t, ctx, cached.addr, testJob(4, 1), consumeOpts{})
	consumeEpoch(t, ctx, cached.addr, testJob(4, 2), consumeOpts{})
	if f, b := cached.metric(t, ctx, "stoker_coef_cache_transcoded_files"), cached.metric(t, ctx, "stoker_coef_cache_transcoded_bytes"); f != nprog || b < nprog*float64(len(prog))/2 || b > cached.metric(t, ctx, "stoker_coef_cache_bytes") {
		t.Errorf("after a second epoch: %v files transcoded, %v bytes; want %d files of about %d bytes each", f, b, nprog, len(prog))
	}
	if f := cached.metric(t, ctx, "stoker_coef_cache_transcode_fallbacks_total"); f != 0 {
		t.Errorf("%v transcodes refused", f)
	}
	hits0 := cached.metric(t, ctx, "stoker_coef_cache_transcode_hits_total")
	got := consumeEpoch(t, ctx, cached.addr, testJob(4, 3), consumeOpts{})
	if hits := cached.metric(t, ctx, "stoker_coef_cache_transcode_hits_total"); hits < hits0+nprog {
		t.Errorf("third epoch: %v decodes from transcodes (before it %v), want %d more", hits, hits0, nprog)
	}

	none := startServe(t, ctx, serveConfig{name: "no-coefs", dataset: root, workers: 2, args: []string{"--coef-budget", "-1"}})
	want := consumeEpoch(t, ctx, none.addr, testJob(4, 3), consumeOpts{})
	if len(got.batches) != len(want.batches) {
		t.Fatalf("%d batches with the cache, %d without", len(got.batches), len(want.batches))
	}
	for i := range want.batches {
		if got.batches[i].sum() != want.batches[i].sum() {
			t.Errorf("batch %d differs with the transcodes", i)
		}
	}
}
