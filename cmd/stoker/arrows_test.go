package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the module's import path.
const module = "github.com/stoker-dev/stoker"

// TestArrows: the arrows docs/ARCHITECTURE.md's table ("The arrows")
// allows hold, as `go list -deps` sees the packages (without their
// tests). The table is the rules, as Go's go/build/deps_test.go keeps its
// own: each row is from (packages, `x/...` for a subtree), a rule and to
// (packages, prefixes, `std`, `leaf`); this test only reads and applies
// them.
func TestArrows(t *testing.T) {
	rules := readArrows(t, "../../docs/ARCHITECTURE.md")
	if len(rules) < 10 {
		t.Fatalf("docs/ARCHITECTURE.md: %d rows in the arrows' table", len(rules))
	}
	g := listGraph(t)
	for _, r := range rules {
		froms := g.match(r.from)
		if len(froms) == 0 {
			t.Errorf("arrows' row %q: no package is %v", r.line, r.from)
			continue
		}
		switch r.rule {
		case "links only", "never links":
			for _, p := range froms {
				for _, d := range g.deps[p] {
					allowed := r.rule == "links only" && (g.std[d] || g.in(d, r.to))
					banned := r.rule == "never links" && g.in(d, r.to)
					if r.rule == "links only" && !allowed || banned {
						t.Errorf("%s links %s: the arrows' table says %s %s (%s)", g.short(p), g.short(d), r.rule, r.toText, r.why)
					}
				}
			}
		case "imports only", "imports of the module only", "never imports":
			for _, p := range froms {
				for _, imp := range g.imports[p] {
					var bad bool
					switch r.rule {
					case "imports only":
						bad = !g.std[imp] && !g.in(imp, r.to)
					case "imports of the module only":
						bad = strings.HasPrefix(imp, module+"/") && !g.in(imp, r.to)
					case "never imports":
						bad = g.in(imp, r.to)
					}
					if bad {
						t.Errorf("%s imports %s: the arrows' table says %s %s (%s)", g.short(p), g.short(imp), r.rule, r.toText, r.why)
					}
				}
			}
		case "imported only by":
			for _, p := range g.module {
				for _, imp := range g.imports[p] {
					if slices.Contains(froms, imp) && !g.in(p, r.to) && p != imp {
						t.Errorf("%s imports %s: the arrows' table says it is imported only by %s (%s)", g.short(p), g.short(imp), r.toText, r.why)
					}
				}
			}
		default:
			t.Errorf("arrows' row %q: no rule %q", r.line, r.rule)
		}
	}
}

// arrow is a row of the arrows' table.
type arrow struct {
	from, to          []string
	rule, toText, why string
	line              string
}

var arrowToken = regexp.MustCompile("`([^`]+)`")

// readArrows reads the table under the heading "### The arrows".
func readArrows(t *testing.T, path string) []arrow {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n### The arrows\n")
	if !ok {
		t.Fatalf("%s: no heading \"### The arrows\"", path)
	}
	var rows []arrow
	inTable := false
	for line := range strings.Lines(rest) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 || strings.TrimSpace(cells[1]) == "rule" || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		r := arrow{rule: strings.TrimSpace(cells[1]), toText: strings.TrimSpace(cells[2]), why: strings.TrimSpace(cells[3]), line: line}
		for _, m := range arrowToken.FindAllStringSubmatch(cells[0], -1) {
			r.from = append(r.from, m[1])
		}
		for _, m := range arrowToken.FindAllStringSubmatch(cells[2], -1) {
			r.to = append(r.to, m[1])
		}
		if len(r.from) == 0 || len(r.to) == 0 {
			t.Errorf("%s: arrows' row %q names no package in from or to", path, line)
			continue
		}
		rows = append(rows, r)
	}
	return rows
}

// graph is `go list -deps ./...`: every package the module's link, with
// their imports and deps.
type graph struct {
	module        []string // the module's packages
	std           map[string]bool
	imports, deps map[string][]string
	leafs         map[string]bool
}

func listGraph(t *testing.T) *graph {
	t.Helper()
	g := &graph{std: map[string]bool{}, imports: map[string][]string{}, deps: map[string][]string{}, leafs: map[string]bool{}}
	for _, line := range goList(t, "-deps", "-f", "{{.ImportPath}}\t{{.Standard}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("go list: %q", line)
		}
		p := f[0]
		g.std[p] = f[1] == "true"
		g.imports[p], g.deps[p] = strings.Fields(f[2]), strings.Fields(f[3])
		if strings.HasPrefix(p, module+"/") {
			g.module = append(g.module, p)
		}
	}
	for _, p := range g.module {
		g.leafs[p] = !slices.ContainsFunc(g.deps[p], func(d string) bool { return !g.std[d] })
	}
	return g
}

// full is a table's package pattern as an import path pattern.
func full(pat string) string {
	if strings.Contains(strings.SplitN(pat, "/", 2)[0], ".") {
		return pat // a host: another module's
	}
	return module + "/" + pat
}

// in reports whether pkg is one of pats: a package, a subtree (x/...),
// std or leaf.
func (g *graph) in(pkg string, pats []string) bool {
	for _, pat := range pats {
		switch {
		case pat == "std":
			if g.std[pkg] {
				return true
			}
		case pat == "leaf":
			if g.leafs[pkg] {
				return true
			}
		case strings.HasSuffix(pat, "/..."):
			root := full(strings.TrimSuffix(pat, "/..."))
			if pkg == root || strings.HasPrefix(pkg, root+"/") {
				return true
			}
		case pkg == full(pat):
			return true
		}
	}
	return false
}

// match is the module's packages among pats.
func (g *graph) match(pats []string) []string {
	var out []string
	for _, p := range g.module {
		if g.in(p, pats) {
			out = append(out, p)
		}
	}
	return out
}

// short is p without the module's path.
func (g *graph) short(p string) string { return strings.TrimPrefix(p, module+"/") }

// goList runs `go list args...` at the module's root: its output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// Bounds of server/'s top level (issue 36): its rooms (the job, the
// makers, the plan, the limits, the coordinator) are packages of their
// own under server/internal, and what is left is files of one concern.
const (
	maxServerFiles     = 20  // non-test .go files, of every build
	maxServerFileLines = 500 // lines of each
)

// TestLayout: server/'s top level holds at most maxServerFiles non-test
// files, none over maxServerFileLines lines (that nothing below it links
// it is a row of the arrows' table).
func TestLayout(t *testing.T) {
	files, err := filepath.Glob("../../server/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		n++
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if lines := bytes.Count(b, []byte("\n")); lines > maxServerFileLines {
			t.Errorf("%s: %d lines, over %d: split it by concern, or move a room of it under server/internal", filepath.Base(f), lines, maxServerFileLines)
		}
	}
	if n == 0 || n > maxServerFiles {
		t.Errorf("server/ has %d non-test .go files at its top level; want 1..%d", n, maxServerFiles)
	}
}

// Bounds of pipeline's packages: each room below the root holds at most
// maxRoomFiles non-test .go and .c files, of every build; the root at most
// maxPipelineRootFiles, a bound lowered as rooms are carved out of it
// (kernels: 93 to 77; then 82 with five detection files, until the ops
// room takes them; dataset: 82 to 66; the op registry's family files,
// 66 to 80, until the ops room takes them; turbo.c cut in two, 81; the
// codec's C and its link flags, 81 to 70; the decoder index, 70 to 68;
// the coefficient cache, the transcodes' bookkeeping and the decodes that
// use them, 68 to 64; the targets' kernels and wire, 64 to 61; the
// functional ops, 61 to 60; the per-thread CPU clock's system calls, 60
// to 58; the Decoder's targets and trace out of the ops' files, 59,
// until the ops room takes them; the augmentation policies, 59 to 55;
// the identity's cgo and non-cgo halves, which pipeline/codec answers in
// both builds, folded into identity.go, 55 to 53; the op table, 53 to
// 39; the Transform, 39 to 20, with cpuclock.go folded into
// queue_sched.go and names.go for the rooms' internals): at
// maxRoomFiles. Issue 65 made the caps guides, not reasons to cut one
// concern in three: a room at most 25 files, a file at most 800 lines.
const (
	maxRoomFiles         = 25
	maxPipelineRootFiles = 20
)

// Bounds of pipeline/'s files: a Go file of at most pipelineGoLines
// lines, a C file of at most pipelineCLines. pipelineOversize lists the
// files still over them, each at most the lines it has now: they are to be
// cut along their seams as the pipeline's rooms are carved (codec, ops,
// datasets), and none may grow meanwhile; an entry whose file is back
// under the bound must go.
const (
	pipelineGoLines = 800
	pipelineCLines  = 1000
)

var pipelineOversize = map[string]int{}

// TestPipelineRooms: no package under pipeline/ imports pipeline itself
// (the rooms are below the executor, never above it), and pipeline/'s
// files and packages keep to their bounds.
func TestPipelineRooms(t *testing.T) {
	for _, line := range goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./pipeline/...") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			if imp == module+"/pipeline" {
				t.Errorf("%s imports %s: an arrow up into the pipeline's root", pkg, imp)
			}
		}
	}
	files := map[string]int{} // non-test .go and .c files, by directory
	seen := map[string]bool{}
	err := filepath.WalkDir("../../pipeline", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return err
		}
		name := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		limit := 0
		switch {
		case strings.HasSuffix(name, "_test.go"):
		case strings.HasSuffix(name, ".go"):
			limit = pipelineGoLines
		case strings.HasSuffix(name, ".c"):
			limit = pipelineCLines
		}
		if limit == 0 {
			return nil
		}
		files[filepath.Dir(name)]++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := bytes.Count(b, []byte("\n"))
		if most, ok := pipelineOversize[name]; ok {
			seen[name] = true
			if lines > most {
				t.Errorf("%s: %d lines, more than the %d it had: cut it along a seam instead of growing it", name, lines, most)
			} else if lines <= limit {
				t.Errorf("%s: %d lines, within the bound of %d now: drop its entry from pipelineOversize", name, lines, limit)
			}
		} else if lines > limit {
			t.Errorf("%s: %d lines, over %d: split it by concern", name, lines, limit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range pipelineOversize {
		if !seen[name] {
			t.Errorf("pipelineOversize lists %s, which is gone: drop its entry", name)
		}
	}
	for dir, n := range files {
		switch {
		case dir == "pipeline" && n > maxPipelineRootFiles:
			t.Errorf("pipeline/ has %d non-test .go and .c files at its top level, over %d: carve a room out of it instead", n, maxPipelineRootFiles)
		case dir != "pipeline" && n > maxRoomFiles:
			t.Errorf("%s has %d non-test .go and .c files, over %d: split the room", dir, n, maxRoomFiles)
		}
	}
	if files["pipeline/kernels"] == 0 || files["pipeline/dataset"] == 0 || files["pipeline/codec"] == 0 {
		t.Error("no non-test files seen in pipeline/kernels, pipeline/dataset or pipeline/codec: the walk is not read right")
	}
}
