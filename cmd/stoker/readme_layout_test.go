package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutRow is a row of README.md's layout table: | `folder/` | what |.
var layoutRow = regexp.MustCompile("^\\| `([a-z0-9_./]+/)` \\| (.+) \\|$")

// layoutPath is a folder a row's description names: `bench/making`.
var layoutPath = regexp.MustCompile("`([a-z0-9_.]+(?:/[a-z0-9_.]+)+)`")

// TestReadmeLayout: every folder the README's layout table names exists
// and holds files (a Go package its Go files), and so does every folder
// its descriptions name: the table is where a newcomer starts, and a
// package moved or renamed must take its row along.
func TestReadmeLayout(t *testing.T) {
	const root = "../.."
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for line := range strings.Lines(string(data)) {
		m := layoutRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		folders = append(folders, m[1])
		for _, p := range layoutPath.FindAllStringSubmatch(m[2], -1) {
			if filepath.Ext(p[1]) == "" { // a folder, not a file
				folders = append(folders, p[1])
			}
		}
	}
	if len(folders) < 10 {
		t.Fatalf("README: found %d folders in the layout table", len(folders))
	}
	for _, f := range folders {
		dir := filepath.Join(root, filepath.FromSlash(f))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Errorf("README's layout table names %s: %v", f, err)
			continue
		}
		goFiles := 0
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".go") {
				goFiles++
			}
		}
		switch {
		case len(entries) == 0:
			t.Errorf("README's layout table names %s, which is empty", f)
		case isGoPackageName(f) && goFiles == 0:
			t.Errorf("README's layout table names %s, which holds no Go package", f)
		}
	}
}

// isGoPackageName reports whether a folder of the table is meant to be a
// Go package: the module's Go trees.
func isGoPackageName(f string) bool {
	for _, p := range []string{"pipeline", "server", "internal/", "client", "cmd/", "bench"} {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}
