//go:build asan

package racebuild

// ASan is true: this is a go build -asan build, whose cgo calls allocate
// (allocation counts are the instrumentation's).
const ASan = true
