package fn

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
)

// allocTest marks t as counting allocations: it skips under -asan
// (testkit.Alloc).
func allocTest(t *testing.T) {
	t.Helper()
	testkit.Alloc(t)
}
