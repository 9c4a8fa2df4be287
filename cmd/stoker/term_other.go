//go:build !unix

package main

import "os"

// terminal is nil where the terminal's size cannot be asked: --watch
// prints plain lines.
func terminal(*os.File) *watchTerm { return nil }
