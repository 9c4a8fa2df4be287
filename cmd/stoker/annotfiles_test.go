//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeHostileLabelFiles: a real `stoker serve` of a YOLO dataset
// whose label files are a link to /etc/passwd, a FIFO and a link to
// /dev/zero starts (the test's deadline fails a start that hangs), and
// serves each of those images as a per-sample error naming its label file
// and why (and logs each once, so); no byte of /etc/passwd reaches the
// trainer, and the others' targets are served. A COCO file whose parse would pass the memory
// budget is refused at start, before it is read, by serve and by `stoker
// index`.
func TestServeHostileLabelFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve")
	}
	parallelTest(t)
	ctx := processTest(t, 3*time.Minute)
	dir := t.TempDir()
	if out, errOut, err := runStoker(ctx, nil, "mkdata", "--coco", "--yolo", "--out", dir, "--n", "8"); err != nil {
		t.Fatalf("mkdata: %v\n%s%s", err, out, errOut)
	}
	lab := filepath.Join(dir, "labels", "train")
	hostile := map[string]string{ // image: what its error says
		"000000.jpg": "labels/train/000000.txt: file: field file: a symbolic link that does not resolve beneath the dataset's root",
		"000001.jpg": "labels/train/000001.txt: file: field file: not a regular file (a FIFO)",
		"000002.jpg": "labels/train/000002.txt: file: field file: a symbolic link that does not resolve beneath the dataset's root",
	}
	for _, n := range []string{"000000", "000001", "000002"} {
		if err := os.Remove(filepath.Join(lab, n+".txt")); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("/etc/passwd", filepath.Join(lab, "000000.txt")))
	must(syscall.Mkfifo(filepath.Join(lab, "000001.txt"), 0o644))
	must(os.Symlink("/dev/zero", filepath.Join(lab, "000002.txt")))
	images := filepath.Join(dir, "images", "train")
	p := launchServe(t, serveConfig{name: "hostile-labels", dataset: images, workers: 1, args: []string{"--annotations", "ds=" + filepath.Join(dir, "data.yaml")}})
	p.waitReady(t, ctx)
	spec := testJob(4, 1)
	spec.Targets = true
	ep := consumeEpoch(t, ctx, p.addr, spec, consumeOpts{})
	seen := map[string]bool{}
	served := 0
	for _, b := range ep.batches {
		if strings.Contains(string(b.data), "root:") {
			t.Errorf("a batch holds /etc/passwd's bytes")
		}
		served += len(b.hdr.GetIndices()) - len(b.hdr.GetErrors())
		for _, e := range b.hdr.GetErrors() {
			want, ok := hostile[e.GetName()]
			if !ok || !strings.Contains(e.GetReason(), want) {
				t.Errorf("sample %s failed: %q; want %q", e.GetName(), e.GetReason(), want)
			}
			if strings.Contains(e.GetReason(), "root:") {
				t.Errorf("an error echoes /etc/passwd: %q", e.GetReason())
			}
			seen[e.GetName()] = true
		}
		if tg := b.hdr.GetTargets(); tg != nil && strings.Contains(tg.String(), "root:") {
			t.Errorf("targets echo /etc/passwd")
		}
	}
	if len(seen) != len(hostile) || served != 8-len(hostile) {
		t.Errorf("failed samples %v, %d served; want %d failed, %d served", seen, served, len(hostile), 8-len(hostile))
	}
	p.kill() // and wait: its log is all read
	for name, want := range hostile {
		recs := p.findLogs(badFileMsg, map[string]string{"dataset": "ds", "file": name, "level": "WARN"})
		if len(recs) != 1 {
			t.Errorf("%s: logged %d times, want once", name, len(recs))
		} else if r, _ := recs[0]["reason"].(string); !strings.Contains(r, want) {
			t.Errorf("%s: logged with reason %q; want %q", name, r, want)
		}
	}

	// A COCO file whose size predicts a parse past the budget: refused
	// before it is read (a sparse file: its size alone says so).
	big := filepath.Join(t.TempDir(), "instances.json")
	f, err := os.Create(big)
	must(err)
	must(f.Truncate(1 << 30))
	must(f.Close())
	_, errOut, err := runStoker(ctx, nil, "serve", "--listen", "127.0.0.1:0", "--memory-budget", "1000000000",
		"--dataset", "ds="+images, "--annotations", "ds="+big)
	if err == nil || !strings.Contains(errOut, "annotations budget") || !strings.Contains(errOut, "raise --memory-budget") {
		t.Errorf("serve of a COCO file past the budget: %v\n%s", err, errOut)
	}
	_, errOut, err = runStoker(ctx, nil, "index", images, "--annotations", big, "--memory-budget", "1000000000", "--out", filepath.Join(t.TempDir(), "m"))
	if err == nil || !strings.Contains(errOut, "annotations budget") {
		t.Errorf("index of a COCO file past the budget: %v\n%s", err, errOut)
	}
}
