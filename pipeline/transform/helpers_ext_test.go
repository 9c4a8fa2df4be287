package transform_test

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
	"github.com/stoker-dev/stoker/pipeline/internal/testops"
)

// The external tests' helpers: NewTransform's must and the op lists they
// share with the root's tests (pipeline/internal/testops, which imports
// this package, so only an external test may use it).
var (
	mustTransform = testops.MustTransform
	recipeOps     = testops.Recipe
	tvPolicies    = testops.TVPolicies
	lsjOps        = testops.LSJ
	segOps        = testops.Seg
	yoloOps       = testops.Named
	geomPlan      = testops.GeomPlan
)

// allocTest marks t as counting allocations: it skips under -asan
// (testkit.Alloc).
func allocTest(t *testing.T) {
	t.Helper()
	testkit.Alloc(t)
}
