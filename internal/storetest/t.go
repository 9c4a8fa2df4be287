package storetest

import "context"

// T is what the helpers need of their caller: a *testing.T or *testing.B
// has it (testing.TB), and so does the runner of `stoker bench store`,
// which starts the same stores outside a test. Fatal and Fatalf must not
// return.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Error(args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Failed() bool
	Context() context.Context
}
