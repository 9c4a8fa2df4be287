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
// checkCovered), and every package `go list ./...` prints has a row of
// its own that agrees with its doc comment (see checkDocs): a package
// added must bring its row.
func TestReadmeLayout(t *testing.T) {
	const root = "../.."
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	rows := map[string]string{} // a row's folder, without its slash: its description
	for line := range strings.Lines(string(data)) {
		m := layoutRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		folders = append(folders, m[1])
		rows[strings.TrimSuffix(m[1], "/")] = m[2]
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
	checkDocs(t, root, rows)
}

// checkDocs: every package `go list ./...` prints has a doc comment and a
// row of its own, and the row agrees with the comment's first sentence
// (go list's .Doc): they share at least two words of five letters or more
// besides the commonest (a row left behind by a package renamed, or
// written for another, shares none). A heuristic, not a proof: the row
// is the newcomer's summary, the doc comment the package's own.
func checkDocs(t *testing.T, root string, rows map[string]string) {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	lines := goList(t, "-f", "{{.Dir}}\t{{.Doc}}", "./...")
	if len(lines) < 40 {
		t.Fatalf("go list ./... printed %d packages", len(lines))
	}
	for _, line := range lines {
		dir, doc, _ := strings.Cut(line, "\t")
		rel, err := filepath.Rel(abs, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		row, ok := rows[rel]
		switch {
		case doc == "":
			t.Errorf("the package in %s/ has no doc comment (// Package x ..., in a doc.go of its own if need be)", rel)
		case !ok:
			t.Errorf("README's layout table has no row of its own for the package %s/ (%s)", rel, doc)
		default:
			if shared := sharedWords(doc, row); len(shared) < 2 {
				t.Errorf("README's row for %s/ and its doc comment share %v, fewer than two words: say what the package is\nrow: %s\ndoc: %s", rel, shared, row, doc)
			}
		}
	}
}

// commonWords are words of five letters or more that say nothing of a
// package by themselves.
var commonWords = map[string]bool{"about": true, "which": true, "their": true, "there": true, "these": true,
	"those": true, "where": true, "while": true, "other": true, "every": true, "after": true, "before": true,
	"being": true, "under": true, "stoker": true, "package": true, "command": true}

// sharedWords are the words of five letters or more, the common ones
// aside, that a and b share.
func sharedWords(a, b string) []string {
	words := func(s string) map[string]bool {
		w := map[string]bool{}
		for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r < 'a' || r > 'z' }) {
			if len(f) >= 5 && !commonWords[f] {
				w[f] = true
			}
		}
		return w
	}
	wa, wb := words(a), words(b)
	var out []string
	for w := range wa {
		if wb[w] {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
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
