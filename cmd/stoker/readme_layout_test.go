package main

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
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
// package moved or renamed must take its row along. The other way round,
// every folder at the top and every Go package is in the table (see
// checkCovered): a package added must bring its row.
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
	checkCovered(t, root, folders)
}

// checkCovered checks that the layout table covers the repository: every
// folder at its top has a row, or rows for folders inside it (internal/);
// every Go package inside an internal folder has a row of its own, and
// every other one its own or a folder's above it (bench/ for bench/making).
// Hidden folders, those the top-level .gitignore names (build outputs)
// and testdata below the top, which Go ignores, are not the layout.
func checkCovered(t *testing.T, root string, folders []string) {
	t.Helper()
	named := map[string]bool{}
	for _, f := range folders {
		named[strings.TrimSuffix(f, "/")] = true
	}
	covered := func(dir string) bool {
		for d := dir; d != "."; d = path.Dir(d) {
			if named[d] {
				return true
			}
		}
		return false
	}
	ignored := map[string]bool{}
	if data, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for line := range strings.Lines(string(data)) {
			line = strings.TrimSpace(line)
			if name, ok := strings.CutPrefix(line, "/"); ok && !strings.Contains(strings.TrimSuffix(name, "/"), "/") {
				ignored[strings.TrimSuffix(name, "/")] = true
			}
		}
	}
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || ignored[name] {
			continue
		}
		if !named[name] && !slices.ContainsFunc(folders, func(f string) bool { return strings.HasPrefix(f, name+"/") && f != name+"/" }) {
			t.Errorf("README's layout table has no row for the top-level folder %s/", name)
		}
	}
	var pkgs []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				ignored[rel] || name == "testdata" && strings.Contains(rel, "/")) {
				return filepath.SkipDir
			}
			return nil
		}
		if dir := path.Dir(rel); strings.HasSuffix(rel, ".go") && dir != "." && !slices.Contains(pkgs, dir) {
			pkgs = append(pkgs, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found %d Go packages under %s", len(pkgs), root)
	}
	for _, p := range pkgs {
		internal := slices.Contains(strings.Split(p, "/"), "internal")
		switch {
		case internal && !named[p]:
			t.Errorf("README's layout table has no row for the internal package %s/", p)
		case !internal && !covered(p):
			t.Errorf("README's layout table covers no folder of the Go package %s/", p)
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
