package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// bigPhotoScript writes argv[3] copies of argv[1] upscaled to 5640x3172
// (17.9 MP, the photo's size) with some grain (a photo's
// entropy, not a smooth upscale's), as progressive JPEGs of quality 92
// named img00000.jpg... under the directory argv[2]/class00.
const bigPhotoScript = `
import sys, os
from PIL import Image
src, root, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
im = Image.open(src).convert("RGB").resize((5640, 3172), Image.BICUBIC)
grain = Image.effect_noise((5640, 3172), 40).convert("RGB")
im = Image.blend(im, grain, 0.2)
os.makedirs(os.path.join(root, "class00"))
first = os.path.join(root, "class00", "img00000.jpg")
im.save(first, quality=92, progressive=True)
for i in range(1, n):
    os.link(first, os.path.join(root, "class00", "img%05d.jpg" % i))
`

// writeBigPhotos makes the dataset of n copies of a progressive 17.9 MP
// photo with PIL, from the repository's .venv (make setup) or
// $STOKER_PYTHON.
func writeBigPhotos(t *testing.T, ctx context.Context, n int) string {
	t.Helper()
	py := os.Getenv("STOKER_PYTHON")
	if py == "" {
		var err error
		if py, err = filepath.Abs("../../.venv/bin/python"); err != nil {
			t.Fatal(err)
		}
	}
	src, err := filepath.Abs("../../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "big")
	out, err := exec.CommandContext(ctx, py, "-c", bigPhotoScript, src, root, fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("making the photos with %s (PIL; make setup builds .venv, or set STOKER_PYTHON): %v\n%s", py, err, out)
	}
	return root
}

// startHogs starts a busy loop on every core, killed when the test ends.
func startHogs(t *testing.T) {
	t.Helper()
	for range runtime.NumCPU() {
		hog := exec.Command("sh", "-c", "while :; do :; done")
		if err := hog.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			hog.Process.Kill()
			hog.Wait()
		})
	}
}

// leaseTimeout is TestBigProgressivePhotosNoReLease's --lease-timeout:
// the default, as in the issue. Not the harness's 2 s: a lease's
// deadline follows its samples begun and finished and its kernels'
// steps, and one decode of such a photo is a single step that a host
// this loaded may stretch past 2 s (the batch is then leased twice: seen
// here with 2 s, on 2 cores with the hogs and other load).
const leaseTimeout = 10 * time.Second

// TestBigProgressivePhotosNoReLease is issue 47's slow batch as it came:
// 12 copies of a progressive photo of 17.9 MP (5640x3172), batch 12, one
// worker (--workers 1), the default lease timeout (10 s), and a busy
// loop on every core beside the server: the batch takes many lease
// timeouts to make (each photo is a full decode: the default exact
// decode), and the epoch completes with one lease, none failed, none
// made twice (the lease's deadline follows its maker's progress). Before
// that the batch was leased 8 times and the job failed.
func TestBigProgressivePhotosNoReLease(t *testing.T) {
	ctx := processTest(t, 4*time.Minute)
	ds := writeBigPhotos(t, ctx, 12)
	fi, err := os.Stat(filepath.Join(ds, "class00", "img00000.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	p := startServe(t, ctx, serveConfig{name: "serve", dataset: ds, workers: 1, args: []string{"--lease-timeout", leaseTimeout.String()}})
	startHogs(t)
	spec := testJob(12, 1)
	start := time.Now()
	res := consumeEpoch(t, ctx, p.addr, spec, consumeOpts{})
	took := time.Since(start)
	checkEpoch(t, res, spec, 12)
	ms, err := p.metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leases, failed := sumSeries(ms, "stoker_leases_total"), sumSeries(ms, "stoker_lease_failures_total")
	t.Logf("12 photos of %.1f MB, batch 12, --workers 1, %d hogs: the epoch in %v (%.0f lease timeouts): %v leases, %v failed",
		float64(fi.Size())/1e6, runtime.NumCPU(), took.Round(time.Millisecond), took.Seconds()/leaseTimeout.Seconds(), leases, failed)
	if leases != 1 || failed != 0 {
		t.Errorf("%v leases, %v failed; want the one batch leased once, none failed", leases, failed)
	}
}
