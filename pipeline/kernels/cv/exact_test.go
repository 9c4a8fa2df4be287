package cv

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
)

// exactTest marks t as an exactness test: arithmetic on one goroutine (the
// C paths against the Go ones byte for byte, a footprint or a mosaic
// against its naive reference, exact sums in math/big), where the race
// detector has nothing to find and costs 10 to 100 times the time. It
// skips under -race; make test-go runs it once more, without -race
// (its tests are named TestExact...: make test-go-once runs -run
// '^TestExact'). It runs in parallel with the other
// exactness tests: each has its own images and state.
func exactTest(t *testing.T) {
	t.Helper()
	testkit.Exact(t)
	t.Parallel()
}
