package transform

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// mustTransform is NewTransform's Transform, or t's end.
func mustTransform(t testing.TB, layout Layout, ops ...optab.Op) *Transform {
	t.Helper()
	return testkit.Must[*Transform](t)(NewTransform(layout, ops...))
}

// allocTest marks t as counting allocations: it skips under -asan
// (testkit.Alloc).
func allocTest(t *testing.T) {
	t.Helper()
	testkit.Alloc(t)
}
