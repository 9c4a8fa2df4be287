package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository, from this package's folder.
const repoRoot = "../.."

// formerReadmeSections are the README's headings before its text moved to
// docs/ (README.md at 4e10fad, which has every heading of 5d9e20f's and
// one more): each now heads a section of a page under docs/, and the
// README links to it there. Layout stays in the README.
var formerReadmeSections = []string{
	"Set up and run, on a fresh Debian machine",
	"Use it from PyTorch",
	"Epochs, under every training loop",
	"Lightning, torchrun, Accelerate: `examples/`",
	"Sharded data: the block shuffle",
	"Data in object storage: `stoker index`",
	"Same host: batches through shared memory",
	"Scale out on your own machines",
	"Scale out on Kubernetes",
	"Scale out on Slurm",
	"Producing as fast as the GPU consumes",
	"Metrics",
	"Expose it safely",
	"The other commands",
}

// readmeFirstScreen is how many lines a reader sees before scrolling.
const readmeFirstScreen = 40

// TestReadmeFirstScreen: the README's first screen says what stoker is,
// shows the headline result with its plot, the two set-up commands and the
// five-line Loader example, and links to the documentation.
func TestReadmeFirstScreen(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	screen := strings.Join(lines[:min(len(lines), readmeFirstScreen)], "\n")
	for _, want := range []string{
		"stoker keeps GPUs fed",            // what it is
		"![", "(bench/plots/headline.png)", // the plot
		"3 CPU cores", "3,916 of 3,948", "82%", // the headline
		"make demo   #", "make test   #", // the two commands
		"import stoker", "stoker.Loader(", "for images, labels in loader:", "stoker.normalize(",
		"(docs/getting-started.md)", // a link to the docs
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the README's first %d lines do not have %q", readmeFirstScreen, want)
		}
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "bench", "plots", "headline.png")); err != nil {
		t.Error(err)
	}
	// The Loader example: the python block, five lines.
	block := regexp.MustCompile("(?s)```python\n(.*?)```").FindStringSubmatch(screen)
	if block == nil || strings.Count(block[1], "\n") != 5 {
		t.Errorf("the README's first screen has no five-line python block: %q", block)
	}
}

// TestMovedSections: every section the README had is a section of a page
// under docs/ now, and the README links to it there (its anchor).
func TestMovedSections(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(pages) < 6 {
		t.Fatalf("docs/*.md: %v %v", pages, err)
	}
	headings := map[string][]string{} // heading -> pages
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range markdownHeadings(string(data)) {
			headings[h] = append(headings[h], filepath.Base(p))
		}
	}
	for _, h := range formerReadmeSections {
		in := headings[h]
		if len(in) == 0 {
			t.Errorf("the README's former section %q heads no section under docs/", h)
			continue
		}
		link := fmt.Sprintf("(docs/%s#%s)", in[0], anchor(h))
		if !strings.Contains(string(readme), link) {
			t.Errorf("the README does not link to its former section %q: want a link %s", h, link)
		}
	}
	if !strings.Contains(string(readme), "\n## Layout\n") {
		t.Error("the README's Layout section is gone")
	}
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdFence = regexp.MustCompile("^\\s*```")
)

// markdownHeadings are the headings of a Markdown text, outside code
// blocks, without their #s.
func markdownHeadings(text string) []string {
	var hs []string
	fenced := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if mdFence.MatchString(line) {
			fenced = !fenced
			continue
		}
		if !fenced && strings.HasPrefix(line, "#") {
			if h := strings.TrimSpace(strings.TrimLeft(line, "#")); h != "" {
				hs = append(hs, h)
			}
		}
	}
	return hs
}

// TestDocsLinks: every relative link of the README, BENCHMARKS.md, the
// benchmarks' history (bench/history/) and the pages under docs/ names a
// file of the repository, and an anchor in a Markdown file names one of
// its headings (as the forge makes anchors).
func TestDocsLinks(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md")}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	history, _ := filepath.Glob(filepath.Join(root, "bench", "history", "*.md"))
	files = append(append(files, pages...), history...)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		if data, err := os.ReadFile(path); err == nil {
			seen := map[string]int{}
			for _, h := range markdownHeadings(string(data)) {
				id := anchor(h)
				if n := seen[id]; n > 0 {
					a[fmt.Sprintf("%s-%d", id, n)] = true
				} else {
					a[id] = true
				}
				seen[id]++
			}
		}
		anchors[path] = a
		return a
	}
	links := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		fenced := false
		for line := range strings.Lines(string(data)) {
			if mdFence.MatchString(line) {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, frag, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				}
				if r, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(r, "..") {
					t.Errorf("%s links to %s, outside the repository", rel, target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s links to %s: %v", rel, target, err)
					continue
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
					t.Errorf("%s links to %s: no heading there makes the anchor #%s", rel, target, frag)
				}
			}
		}
	}
	if links < 50 {
		t.Errorf("found %d links in the docs", links)
	}
}

// docsBanned are what a reader of a clone cannot follow: the tracker's
// issue numbers, and the folder beside this checkout where the
// maintainers' photos lie.
var docsBanned = regexp.MustCompile(`(?i)issue\s+#?\d+|\.\./shared`)

// TestDocsSelfContained: the README, BENCHMARKS.md and the pages under
// docs/ name no issue number and no ../shared folder; they say what the
// target is, and which data, in words a clone can act on.
func TestDocsSelfContained(t *testing.T) {
	files := []string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "BENCHMARKS.md")}
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs/*.md: %v %v", pages, err)
	}
	for _, f := range append(files, pages...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := docsBanned.FindString(line); m != "" {
				t.Errorf("%s:%d: %q (say it in words a clone can act on): %s", filepath.Base(f), i+1, m, line)
			}
		}
	}
}

// verdictReturn is a verdict the server returns, in its source: the
// bottleneck word, then the line (a literal or fmt.Sprintf's format).
var verdictReturn = regexp.MustCompile(`return bn\w+, (?:fmt\.Sprintf\()?"((?:[^"\\]|\\.)*)"`)

// fmtVerb is a verb of a verdict's format, where the docs write a figure
// (N, N%, P).
var fmtVerb = regexp.MustCompile(`%[-+# 0]*[0-9]*(?:\.[0-9]+)?[a-z]`)

// TestVerdictsDocumented: every verdict the server returns (the lines of
// server/internal/coord/verdict.go) is in docs/operating.md's table of
// verdicts, word for word, a figure standing for each of its verbs.
func TestVerdictsDocumented(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "server", "internal", "coord", "verdict.go"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n### Where the input stalls: the verdicts\n")
	if !ok {
		t.Fatal("docs/operating.md has no section \"Where the input stalls: the verdicts\"")
	}
	table, _, _ = strings.Cut(table, "\n### ")
	ms := verdictReturn.FindAllStringSubmatch(string(src), -1)
	if len(ms) < 10 {
		t.Fatalf("found %d verdicts in verdict.go", len(ms))
	}
	for _, m := range ms {
		parts := fmtVerb.Split(m[1], -1)
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("(?m)^\\| `" + strings.Join(parts, "[^`]+?") + "` \\|")
		if !re.MatchString(table) {
			t.Errorf("verdict %q is not a row of docs/operating.md's table of verdicts", m[1])
		}
	}
}
