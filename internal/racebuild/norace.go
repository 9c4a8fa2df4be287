//go:build !race

package racebuild

// Enabled is false: this is not a -race build.
const Enabled = false
