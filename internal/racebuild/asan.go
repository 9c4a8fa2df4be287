//go:build asan

package racebuild

// ASan is true: this is a go build -asan build, where allocation counts
// are the instrumentation's.
const ASan = true
