//go:build race

package racebuild

// Enabled is true: this is a -race build.
const Enabled = true
