package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
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
// same executable.
func stokerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "stoker-bench-test-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "stoker")
		if out, err := exec.Command("go", "build", "-o", binPath, "../cmd/stoker").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}
