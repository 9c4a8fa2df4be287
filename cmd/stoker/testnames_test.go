package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The tests that run once, without -race, say so by name: an exactness
// test (it calls its package's exactTest(t) or exactSerialTest(t), which
// skip it under -race) is TestExact..., a CPU share measurement (it calls
// shareTest(t)) is TestShareCPU.... make test-go-race skips both prefixes
// (ONCE_ONLY) and make test-go-once runs them by prefix in EXACT_PKGS and
// SHARE_PKGS, so a test is run once whatever its body looks like.
var onceMarkers = map[string]string{ // marker -> the prefix its tests carry
	"exactTest":       "TestExact",
	"exactSerialTest": "TestExact",
	"shareTest":       "TestShareCPU",
}

// TestTestNames: every test that calls a marker carries its prefix, every
// test with a prefix calls its marker (or it would be skipped by name
// under -race and not be an exactness test), no other function calls a
// marker (a helper would hide the call from this rule: the test calls
// it itself), testkit.Exact is called by the markers alone, every package
// holding such tests is in the Makefile's list for the prefix, and the
// Makefile runs and skips the prefixes.
func TestTestNames(t *testing.T) {
	const root = "../.."
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	pkgList := func(name string) []string {
		m := regexp.MustCompile(`(?m)^` + name + ` := (.*)$`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("Makefile: no %s := ... line", name)
		}
		var out []string
		for _, p := range strings.Fields(string(m[1])) {
			out = append(out, strings.Trim(strings.TrimPrefix(p, "./"), "/"))
		}
		return out
	}
	lists := map[string][]string{"TestExact": pkgList("EXACT_PKGS"), "TestShareCPU": pkgList("SHARE_PKGS")}
	for _, want := range []string{"-skip '$(ONCE_ONLY)' ./...", "-run '^TestExact' $(EXACT_PKGS)", "-run '^TestShareCPU' $(SHARE_PKGS)", "ONCE_ONLY := ^(TestExact|TestShareCPU)"} {
		if !strings.Contains(string(mk), want) {
			t.Errorf("Makefile has no %q: the prefixes are what test-go-race skips and test-go-once runs", want)
		}
	}

	fset := token.NewFileSet()
	found := map[string]int{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "out" || d.Name() == "deploy") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(rel, "_test.go")
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name, calls := fn.Name.Name, markerCalls(fn.Body)
			_, isMarker := onceMarkers[name]
			if isMarker && test {
				continue
			}
			if calls["testkit.Exact"] {
				t.Errorf("%s: %s calls testkit.Exact: only a package's exactTest or exactSerialTest may (its tests are then named TestExact...)", rel, name)
			}
			isTest := fn.Recv == nil && strings.HasPrefix(name, "Test") && test
			for marker, prefix := range onceMarkers {
				switch {
				case !calls[marker]:
				case !isTest:
					t.Errorf("%s: %s calls %s: call it from the test itself, named %s..., so that its name says it runs once without -race", rel, name, marker, prefix)
				case !strings.HasPrefix(name, prefix):
					t.Errorf("%s: %s calls %s but is not named %s...: make test-go-once would never run it (rename it %s%s)", rel, name, marker, prefix, prefix, strings.TrimPrefix(name, "Test"))
				}
			}
			for _, prefix := range []string{"TestExact", "TestShareCPU"} {
				if !isTest || !strings.HasPrefix(name, prefix) {
					continue
				}
				found[prefix]++
				called := false
				for marker, p := range onceMarkers {
					called = called || p == prefix && calls[marker]
				}
				if !called {
					t.Errorf("%s: %s is named %s... but calls none of its markers: make test-go-race skips it by name, so it runs only once, without -race; call the marker or rename it", rel, name, prefix)
				}
				if dir := path.Dir(rel); !slices.Contains(lists[prefix], dir) {
					t.Errorf("%s: %s is in %s, which the Makefile's list for %s... lacks: add ./%s/ to it", rel, name, dir, prefix, dir)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found["TestExact"] < 30 || found["TestShareCPU"] < 1 {
		t.Errorf("found %d TestExact and %d TestShare tests: the walk is not read right", found["TestExact"], found["TestShareCPU"])
	}
}

// markerCalls is the markers body calls, closures included, and
// "testkit.Exact".
func markerCalls(body *ast.BlockStmt) map[string]bool {
	calls := map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch f := call.Fun.(type) {
		case *ast.Ident:
			if _, ok := onceMarkers[f.Name]; ok {
				calls[f.Name] = true
			}
		case *ast.SelectorExpr:
			if x, ok := f.X.(*ast.Ident); ok && x.Name == "testkit" && f.Sel.Name == "Exact" {
				calls["testkit.Exact"] = true
			}
		}
		return true
	})
	return calls
}
