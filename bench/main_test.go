package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/buildlock"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// stokerBinary builds cmd/stoker once per test binary run: the benchmarks
// run as `stoker bench …`, which starts `stoker serve` processes of the
// same executable. It is bin/stoker-lab's build (-tags lab: bench/lab
// linked), which runs bench store and the autoscale scenario too; the
// product binary's refusal of those is TestLabless's.
func stokerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "stoker-bench-test-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "stoker")
		defer buildlock.Take()()
		if out, err := exec.Command("go", "build", "-tags", labTags(), "-o", binPath, "../cmd/stoker").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// labTags is lab and the tags GOFLAGS gives (make's GO_TAGS: netgo,
// osusergo), which a -tags on the command line would replace: with them
// the lab build compiles only the packages that differ by lab, not every
// one above net again.
func labTags() string {
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if tags, ok := strings.CutPrefix(f, "-tags="); ok && tags != "" {
			return tags + ",lab"
		}
	}
	return "lab"
}

// benchReport runs `stoker bench ARGS` (ARGS asking for --json) within
// limit (a hang guard, generous: a loaded machine runs the benchmark's
// processes slowly), decodes its last line, the JSON report, into rep and
// logs the lines before it. No report fails the test; the command's own failure is
// returned, with its stderr, for the test to weigh beside the report.
func benchReport(t *testing.T, limit time.Duration, rep any, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, stokerBinary(t), append([]string{"bench"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], rep); err != nil {
		t.Fatalf("bench %s: %v; the last line is not the JSON report: %v\nstdout:\n%s\nstderr:\n%s", args[0], runErr, err, stdout.String(), stderr.String())
	}
	t.Logf("\n%s", bytes.Join(lines[:len(lines)-1], []byte("\n")))
	if runErr != nil {
		return fmt.Errorf("bench %s: %w\nstderr:\n%s", args[0], runErr, stderr.String())
	}
	return nil
}
