// Package testkit holds what the pipeline's tests and its rooms' tests
// (pipeline/fn, pipeline/transform, pipeline/kernels, pipeline/policy)
// share beside the files they decode (pipeline/internal/testfiles): the
// skips of the exactness and allocation tests and a test's must. One
// copy, so every room's tests skip and fail alike.
package testkit

import (
	"testing"

	"github.com/stoker-dev/stoker/internal/racebuild"
)

// Exact skips t under -race: an exactness or bounds test (arithmetic on
// one goroutine, bytes against bytes), where the race detector has
// nothing to find and multiplies the time by 10 to 100. make test-go runs
// it once more without -race: the tests named TestExact..., whose
// package's exactTest(t) calls this (TestTestNames, cmd/stoker, holds the
// names and the calls together).
func Exact(t testing.TB) {
	t.Helper()
	if racebuild.Enabled {
		t.Skip("an exactness test: make test-go-once runs it without -race (-run '^TestExact')")
	}
}

// Alloc skips t, a test that counts allocations, under -asan (make
// test-asan): there the allocations are the instrumentation's, Go's escape
// analysis and cgo calls allocate differently.
func Alloc(t testing.TB) {
	t.Helper()
	if racebuild.ASan {
		t.Skip("counts allocations: under -asan they are the instrumentation's")
	}
}

// Must is a call's value, or t's end with the call's error:
// Must[*T](t)(NewT(...)).
func Must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
