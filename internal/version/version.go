// Package version says which stoker this is: the version stamped at build
// time (make build: -ldflags "-X github.com/stoker-dev/stoker/internal/version.stamped=...")
// or, without one, what the Go toolchain recorded of the module and its
// VCS state.
package version

import (
	"runtime/debug"
	"sync"
)

// stamped is set by the linker (-X); empty in a plain go build.
var stamped string

var computed = sync.OnceValue(func() string {
	if stamped != "" {
		return stamped
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	v := "devel-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	return v
})

// String is stoker's version: "v1.2.3", "v0.0.0-2026…-abcdef…", "devel-abcdef123456[-dirty]"
// or "devel".
func String() string { return computed() }
