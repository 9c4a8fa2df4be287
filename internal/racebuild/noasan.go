//go:build !asan

package racebuild

// ASan is false: this is not a go build -asan build.
const ASan = false
