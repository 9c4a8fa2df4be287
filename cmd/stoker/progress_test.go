package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/progress"
	"github.com/stoker-dev/stoker/internal/storetest"
)

// A plain progress line, as internal/progress writes it where stderr is
// not a terminal: "TIME PREFIX: PHASE: FIGURES".
var plainProgress = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) (stoker [a-z]+): ([a-z ]+): (.*)$`)

// progressLines is the plain progress lines of stderr with the given
// prefix ("stoker mkdata"): their phase and figures. Any other line fails
// the test.
func progressLines(t *testing.T, stderr, prefix string) (phases, figures []string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		m := plainProgress.FindStringSubmatch(line)
		if m == nil || m[2] != prefix {
			t.Fatalf("not a plain %q progress line: %q\nstderr:\n%s", prefix, line, stderr)
		}
		if _, err := time.Parse(time.RFC3339, m[1]); err != nil {
			t.Errorf("progress line stamped %q: %v", m[1], err)
		}
		if strings.Contains(line, "\r") || strings.Contains(line, "\033") {
			t.Errorf("a plain progress line rewrites in place: %q", line)
		}
		phases, figures = append(phases, m[3]), append(figures, m[4])
	}
	return phases, figures
}

// ofTotal matches the figures of a phase whose total is known: "k of n",
// optionally bytes, "(rate unit/s[, bytes/s])" and, before the end, an ETA.
var ofTotal = regexp.MustCompile(`^(\d+) of (\d+)(, \S+ [kMGT]?B of \S+ [kMGT]?B)?(?: \(([\d.]+) ([a-z]+)/s(, \S+ [kMGT]?B/s)?\)(, ETA \S+)?)?$`)

// checkCounted checks the figures of a phase of n units: every line a
// count of n, not decreasing, with a rate once some are done, an ETA on
// while some are left and none once all are done; the last has all n.
func checkCounted(t *testing.T, figures []string, n int, unit string) {
	t.Helper()
	last := -1
	for _, f := range figures {
		m := ofTotal.FindStringSubmatch(f)
		if m == nil {
			t.Fatalf("figures %q: want \"k of %d (R %s/s)[, ETA D]\"", f, n, unit)
		}
		done, _ := strconv.Atoi(m[1])
		if total, _ := strconv.Atoi(m[2]); total != n || done < last || done > n {
			t.Errorf("figures %q after %d done: want a count to %d that does not go back", f, last, n)
		}
		last = done
		if done > 0 && (m[4] == "" || m[5] != unit) {
			t.Errorf("figures %q: no rate in %s/s", f, unit)
		}
		if eta := m[7] != ""; done > 0 && eta != (done < n) {
			t.Errorf("figures %q: want an ETA while some are left, none once all are done", f)
		}
	}
	if last != n {
		t.Errorf("the last progress line is %q: want all %d %s", figures[len(figures)-1], n, unit)
	}
}

// TestMkdataProgressPlain: `stoker mkdata` with stderr not a terminal
// writes plain, time-stamped progress lines ("stoker mkdata: writing
// images: k of N (R images/s), ETA D"), the last with all N images and no
// ETA; its stdout says what it wrote.
func TestMkdataProgressPlain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stoker binary")
	}
	ctx := testCtx(t, hangGuard)
	stokerBinary(t)
	const n = 24
	dir := filepath.Join(t.TempDir(), "data")
	out, stderr, err := runStoker(ctx, nil, "mkdata", "--out", dir, "--n", strconv.Itoa(n), "--classes", "3")
	if err != nil {
		t.Fatalf("stoker mkdata: %v\n%s%s", err, out, stderr)
	}
	if want := fmt.Sprintf("wrote %d images in 3 classes to %s\n", n, dir); out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	phases, figures := progressLines(t, stderr, "stoker mkdata")
	for _, p := range phases {
		if p != "writing images" {
			t.Errorf("phase %q, want \"writing images\"", p)
		}
	}
	checkCounted(t, figures, n, "images")
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(files) != n {
		t.Errorf("%d files written, want %d", len(files), n)
	}
}

// TestIndexProgressPlain: `stoker index` with stderr not a terminal ends
// its listing of an ImageFolder with a plain line of all its objects
// ("stoker index: listing: N objects (R/s)"), and its read of WebDataset
// shards with one of all its shards and all their bytes ("reading shards:
// S of S, B of B (R shards/s, BR/s)").
func TestIndexProgressPlain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stoker binary")
	}
	ctx := processTest(t, hangGuard)
	const n = 24
	data := writeDataset(t, n, 3, 0)

	out, stderr, err := runStoker(ctx, nil, "index", data)
	if err != nil {
		t.Fatalf("stoker index: %v\n%s%s", err, out, stderr)
	}
	if !strings.HasPrefix(out, "wrote ") {
		t.Errorf("stdout %q: want what it wrote", out)
	}
	phases, figures := progressLines(t, stderr, "stoker index")
	// The objects listed so far, without a total (a listing has none);
	// the rate needs time to have passed since the phase's first figures.
	listing := regexp.MustCompile(`^(\d+) objects( \([\d.]+/s\))?$`)
	last := -1
	for i, p := range phases {
		m := listing.FindStringSubmatch(figures[i])
		if p != "listing" || m == nil {
			t.Fatalf("line %q: %q, want \"listing: K objects (R/s)\"", p, figures[i])
		}
		last, _ = strconv.Atoi(m[1])
	}
	if last != n {
		t.Errorf("the last progress line is %q: want all %d objects", figures[len(figures)-1], n)
	}

	shards := t.TempDir()
	names, bytes := writeShards(t, data, shards, 5)
	// One shard at a time: the first figures come before the last.
	out, stderr, err = runStoker(ctx, nil, "index", shards, "--concurrency", "1")
	if err != nil {
		t.Fatalf("stoker index of shards: %v\n%s%s", err, out, stderr)
	}
	phases, figures = progressLines(t, stderr, "stoker index")
	for _, p := range phases {
		if p != "reading shards" {
			t.Errorf("phase %q, want \"reading shards\"", p)
		}
	}
	checkCounted(t, figures, len(names), "shards")
	want := fmt.Sprintf("%d of %d, %s of %s (", len(names), len(names), progress.Bytes(bytes), progress.Bytes(bytes))
	if last := figures[len(figures)-1]; !strings.HasPrefix(last, want) || !strings.HasSuffix(last, "B/s)") {
		t.Errorf("the last progress line is %q: want %q..., with a byte rate", last, want)
	}
}

// TestServeStartProgress: a server whose start reads a dataset's shards
// for longer than progress.DefaultEvery (here, WebDataset shards in S3,
// no manifest, one shard's read held by a fault proxy for longer than
// that) logs its progress: an "opening dataset" line naming the dataset,
// with the shards read, of all of them, their bytes and the rates. A quick
// start logs none (internal/progress's unit tests); the wait is the
// threshold's, a constant the binary has no flag for.
func TestServeStartProgress(t *testing.T) {
	waitingTest(t)
	ctx := processTest(t, 3*time.Minute)
	data := writeDataset(t, 24, 3, 0)
	shards := t.TempDir()
	names, bytes := writeShards(t, data, shards, 5)
	s := s3Store(t)
	s.PutTree(t, "bkt", "wds/", shards)
	// The phase's time runs from its first figures, the first shard read,
	// to its last, the held shard's: the hold leaves the other shards
	// (loopback reads of 2 MB) 5 s to be read and still be over it.
	held := "wds/" + filepath.Base(names[len(names)-1])
	_, env := faultProxy(t, s, 1, faultproxy.Plan{
		Down:     faultproxy.Stall,
		StallFor: progress.DefaultEvery + 5*time.Second,
		Only: func(r *http.Request) bool {
			_, key := faultproxy.Key(r)
			return r.Method == http.MethodGet && key == held
		},
	})
	srv := startServe(t, ctx, serveConfig{name: "serve", dataset: s.URL("bkt", "wds/"), workers: 1, env: env})
	// The dataset is open before the server listens.
	lines := srv.findLogs("opening dataset", map[string]string{"dataset": "ds"})
	if len(lines) == 0 {
		t.Fatalf("no \"opening dataset\" progress line in the log of a start that took over %v", progress.DefaultEvery)
	}
	var figures []string
	for _, l := range lines {
		p, _ := l["progress"].(string)
		f, ok := strings.CutPrefix(p, "reading shards: ")
		if !ok {
			t.Fatalf("progress %q: want \"reading shards: ...\"", p)
		}
		figures = append(figures, f)
	}
	checkCounted(t, figures, len(names), "shards")
	want := fmt.Sprintf("%d of %d, %s of %s (", len(names), len(names), progress.Bytes(bytes), progress.Bytes(bytes))
	if last := figures[len(figures)-1]; !strings.HasPrefix(last, want) || !strings.HasSuffix(last, "B/s)") {
		t.Errorf("the last progress line is %q: want %q..., with a byte rate", last, want)
	}
}

// writeShards writes data's images into n WebDataset shards in dir and
// returns the shards' paths and their bytes in all.
func writeShards(t *testing.T, data, dir string, n int) (names []string, bytes int64) {
	t.Helper()
	storetest.WriteShards(t, data, dir, n)
	names, _ = filepath.Glob(filepath.Join(dir, "*.tar"))
	for _, name := range names {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		bytes += fi.Size()
	}
	return names, bytes
}
