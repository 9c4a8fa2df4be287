package main

import (
	"bytes"
	"context"
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
func runPeak(t *testing.T, ctx context.Context, env []string, args ...string) (string, int64, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, stokerBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var peak int64
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = ru.Maxrss << 10 // KiB on Linux
		}
	}
	return out.String(), peak, err
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
			for _, args := range [][]string{
				{"serve", "--listen", "127.0.0.1:0", "--metrics", "", "--dataset", "ds=" + s.URL("ds/"), "--memory-budget", strconv.Itoa(budget)},
				{"index", s.URL("ds/"), "--out", t.TempDir() + "/m"},
			} {
				cctx, cancel := context.WithTimeout(ctx, hangGuard)
				out, peak, err := runPeak(t, cctx, s.Env(), args...)
				timedOut := cctx.Err() != nil
				cancel()
				if err == nil || timedOut {
					t.Fatalf("%s: %v, want a refusal at start\n%s", args[0], err, out)
				}
				if strings.Contains(out, "panic") || !strings.Contains(out, tc.says) || !strings.Contains(out, "store answered outside its protocol") {
					t.Errorf("%s: the error does not say %q (or panicked):\n%.2000s", args[0], tc.says, out)
				}
				if len(out) > 16<<10 {
					t.Errorf("%s: %d bytes of output", args[0], len(out))
				}
				t.Logf("%s: peak RSS %d MiB", args[0], peak>>20)
				if peak > budget {
					t.Errorf("%s: peak RSS %d MiB over the %d MiB budget", args[0], peak>>20, budget>>20)
				}
			}
		})
	}
}
