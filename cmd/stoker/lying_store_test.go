package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/storetest"
)

// runPeak runs the stoker binary with args and env added, and returns its
// output and its peak RSS (the kernel's ru_maxrss) in bytes.
//
// Not as this process's child: Go starts children with vfork, and Linux
// counts a child's RSS before its exec (this test binary's, which other
// tests may have made large) in its ru_maxrss. The test binary starts a
// fresh copy of itself (peakTrampoline), which runs stoker and reports
// stoker's peak: an upper bound, which counts the fresh copy's own RSS at
// the start (about 60 MiB) in the same way.
func runPeak(t *testing.T, ctx context.Context, env []string, args ...string) (string, int64, error) {
	t.Helper()
	argv, err := json.Marshal(append([]string{stokerBinary(t)}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(append(os.Environ(), env...), peakChildEnv+"="+string(argv))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	text := out.String()
	i := strings.LastIndex(text, peakLine)
	if i < 0 {
		t.Fatalf("the peak trampoline reported no peak (%v):\n%.2000s", err, text)
	}
	peak, perr := strconv.ParseInt(strings.TrimSpace(text[i+len(peakLine):]), 10, 64)
	if perr != nil {
		t.Fatalf("the peak trampoline's report %q: %v", text[i:], perr)
	}
	return text[:i], peak, err
}

// peakChildEnv names the command (a JSON list) a test binary started as a
// peak trampoline runs; peakLine is how it reports the peak.
const (
	peakChildEnv = "STOKER_TEST_PEAK_CHILD"
	peakLine     = "\nstoker-test-peak-rss: "
)

// peakTrampoline runs argv (JSON) with this process's stdio, dying with
// it, and reports its peak RSS; it returns the command's exit code.
func peakTrampoline(argv string) int {
	var args []string
	if err := json.Unmarshal([]byte(argv), &args); err != nil || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "peak trampoline: bad command:", err)
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var peak int64
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = ru.Maxrss << 10 // KiB on Linux
		}
	}
	fmt.Fprintf(os.Stderr, "%s%d\n", peakLine, peak)
	if cmd.ProcessState != nil {
		return cmd.ProcessState.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "peak trampoline:", err)
	return 2
}

// TestServeLyingListing (issue 38, rows 1, 2 and 6, on real processes): a
// bucket whose listing carries one 2 GB key (16,458 MiB of RSS against a
// 953 MiB budget before, then a panic), twenty 10 MB keys (1,169 MiB), or
// entries without LastModified (a nil-pointer panic of index and serve):
// `stoker serve` and `stoker index` refuse it at start with an error that
// names the store's answer, never panic, and their peak RSS stays within
// the budget.
func TestServeLyingListing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker processes")
	}
	ctx := processTest(t, 5*time.Minute)
	s := storetest.StartLyingS3(t, "bkt")
	s.PutTree(t, "ds/", writeDataset(t, 20, 2, 0))
	const budget = 953 << 20
	for _, tc := range []struct {
		name string
		lies storetest.Lies
		says string
	}{
		{"a 2 GB key", storetest.Lies{LongKeys: 1, LongKeyBytes: 2 << 30}, "a listing page of over 8388608 bytes"},
		{"twenty 10 MB keys", storetest.Lies{LongKeys: 20, LongKeyBytes: 10 << 20}, "a listing page of over 8388608 bytes"},
		{"twenty 2 KB keys", storetest.Lies{LongKeys: 20, LongKeyBytes: 2 << 10}, "20 keys over the 1024-byte key limit"},
		{"no LastModified", storetest.Lies{NoLastModified: true}, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.SetLies(tc.lies)
			defer s.SetLies(storetest.Lies{})
			refusedAtStart(t, ctx, s.Env(), s.URL("ds/"), tc.says, budget)
		})
	}
}

// TestServeLyingGCSListing: the same of a GCS whose listing carries one
// 2 GB name (the JSON decoder's before the GCS client was guarded) or
// entries without their generation (listed as version "0" before).
func TestServeLyingGCSListing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker processes")
	}
	ctx := processTest(t, 5*time.Minute)
	s := storetest.StartLyingGCS(t, "gb")
	s.PutTree(t, "ds/", writeDataset(t, 20, 2, 0))
	const budget = 953 << 20
	for _, tc := range []struct {
		name string
		lies storetest.GCSLies
		says string
	}{
		{"a 2 GB name", storetest.GCSLies{LongNames: 1, LongNameBytes: 2 << 30}, "a listing page of over 8388608 bytes"},
		{"no generation", storetest.GCSLies{NoGeneration: true}, "has no generation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.SetLies(tc.lies)
			defer s.SetLies(storetest.GCSLies{})
			refusedAtStart(t, ctx, s.Env(), s.URL("ds/"), tc.says, budget)
		})
	}
}

// refusedAtStart runs `stoker serve` and `stoker index` of the dataset at
// url, with env, and fails t unless both refuse it at start as the
// store's fault, saying says, without a panic and within budget bytes of
// peak RSS.
func refusedAtStart(t *testing.T, ctx context.Context, env []string, url, says string, budget int64) {
	t.Helper()
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--metrics", "", "--dataset", "ds=" + url, "--memory-budget", strconv.FormatInt(budget, 10)},
		{"index", url, "--out", t.TempDir() + "/m"},
	} {
		cctx, cancel := context.WithTimeout(ctx, hangGuard)
		out, peak, err := runPeak(t, cctx, env, args...)
		timedOut := cctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Fatalf("%s: %v, want a refusal at start\n%s", args[0], err, out)
		}
		if strings.Contains(out, "panic") || !strings.Contains(out, says) || !strings.Contains(out, "store answered outside its protocol") {
			t.Errorf("%s: the error does not say %q (or panicked):\n%.2000s", args[0], says, out)
		}
		if len(out) > 16<<10 {
			t.Errorf("%s: %d bytes of output", args[0], len(out))
		}
		t.Logf("%s: peak RSS %d MiB", args[0], peak>>20)
		if peak > budget {
			t.Errorf("%s: peak RSS %d MiB over the %d MiB budget", args[0], peak>>20, budget>>20)
		}
	}
}

// TestServeLongListing (issue 47): a listing of 400,000 keys of 1,000 bytes,
// each page under 8 MiB and each key under 1 KiB, took `serve` and `index`
// to 2.4 GB at a 953 MiB budget. What a listing holds (keys, versions, the
// index built from them) is counted as it grows: against a 400 MiB
// --memory-budget both fail at start with a message that names the size
// and the way out (`stoker index` and a manifest for serve, more budget
// for index), and their peak RSS stays within the budget.
func TestServeLongListing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker processes")
	}
	ctx := processTest(t, 5*time.Minute)
	s := storetest.StartLyingS3(t, "bkt")
	s.SetLies(storetest.Lies{ManyKeys: 400_000, ManyKeyBytes: 1000})
	const budget = 400 << 20
	for _, tc := range []struct {
		args []string
		says []string
	}{
		{[]string{"serve", "--listen", "127.0.0.1:0", "--metrics", "", "--dataset", "big=" + s.URL("ds/"), "--memory-budget", strconv.Itoa(budget)},
			[]string{"the listing and the index built from it hold", "over the", "--memory-budget (419430400)", "stoker index " + s.URL("ds/"), "--manifest big=FILE"}},
		{[]string{"index", s.URL("ds/"), "--out", t.TempDir() + "/m", "--memory-budget", strconv.Itoa(budget)},
			[]string{"the listing and the index built from it hold", "half of --memory-budget (419430400)"}},
	} {
		cctx, cancel := context.WithTimeout(ctx, hangGuard)
		out, peak, err := runPeak(t, cctx, s.Env(), tc.args...)
		timedOut := cctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Fatalf("%s: %v, want a refusal at start\n%.3000s", tc.args[0], err, out)
		}
		for _, w := range tc.says {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the error does not say %q:\n%.3000s", tc.args[0], w, out)
			}
		}
		t.Logf("%s: peak RSS %d MiB; %.600s", tc.args[0], peak>>20, out[max(0, strings.Index(out, "indexing")):])
		if peak > budget {
			t.Errorf("%s: peak RSS %d MiB over the %d MiB budget", tc.args[0], peak>>20, budget>>20)
		}
	}
	if st := s.Stats(); st.Lists >= 400 {
		t.Errorf("%d listing pages read: the listing was not stopped when it passed its bound", st.Lists)
	}
}
