// Package racebuild says whether the race detector is built in (go build
// -race, go test -race): its const Enabled is set by the race build tag.
//
// The tests of pure arithmetic (a fast path against its reference, bytes
// against bytes, bounds over many inputs) run on one goroutine, where the
// race detector has nothing to find and costs 10 to 100 times the time:
// they skip themselves under -race, and make test-go runs them once
// without it. ASan says the same of AddressSanitizer (go build -asan, make
// test-asan), under which allocation counts are the instrumentation's:
// the zero-allocation tests skip.
package racebuild
