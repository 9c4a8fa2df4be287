package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/server"
)

// TestServeHelpGroups: `stoker serve --help` lists every flag once, in its
// group (serving, datasets, peers, security, limits, tuning), with an
// example and no line over 100 characters; the benchmarks' flags are not
// there but in --help-bench; and a flag added without a group fails here.
func TestServeHelpGroups(t *testing.T) {
	fs, _ := serveFlags(&server.Config{Datasets: map[string]string{}})
	seen := map[string]string{}
	place := func(name, where string) {
		if prev, dup := seen[name]; dup {
			t.Errorf("--%s is in %s and in %s", name, prev, where)
		}
		seen[name] = where
		if fs.Lookup(name) == nil {
			t.Errorf("%s lists --%s, which serve does not define", where, name)
		}
	}
	for _, g := range serveGroups {
		for _, n := range g.flags {
			place(n, g.title)
		}
	}
	for _, n := range benchGroup {
		place(n, "benchGroup")
	}
	if other := ungroupedFlags(fs); len(other) > 0 {
		t.Errorf("flags in no group of serve --help (add each to serveGroups in serve_help.go): %q", other)
	}

	var help bytes.Buffer
	fs.SetOutput(&help)
	if err := parseFlags(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	text := help.String()
	for i, line := range strings.Split(text, "\n") {
		if len(line) > helpWidth {
			t.Errorf("line %d is %d characters (at most %d): %q", i+1, len(line), helpWidth, line)
		}
	}
	at := 0
	for _, title := range []string{"usage: stoker serve", "Examples:", "stoker serve --dataset imagenet=", "\nServing:\n",
		"\nDatasets:\n", "\nPeers", "\nSecurity:\n", "\nLimits", "\nTuning:\n", "--help-bench"} {
		i := strings.Index(text[at:], title)
		if i < 0 {
			t.Fatalf("serve --help lacks %q after offset %d:\n%s", title, at, text)
		}
		at += i
	}
	for _, g := range serveGroups {
		for _, n := range g.flags {
			if !strings.Contains(text, "\n  --"+n+" ") && !strings.Contains(text, "\n  --"+n+"\n") {
				t.Errorf("serve --help does not list --%s", n)
			}
		}
	}
	for _, n := range benchGroup {
		if strings.Contains(text, "--"+n) {
			t.Errorf("serve --help lists the benchmark flag --%s", n)
		}
	}
	if strings.Contains(text, "\nOther:\n") {
		t.Error("serve --help has flags under Other")
	}

	fs, o := serveFlags(&server.Config{Datasets: map[string]string{}})
	help.Reset()
	fs.SetOutput(&help)
	if err := parseFlags(fs, []string{"--help-bench"}); err != nil || !o.helpBench {
		t.Fatalf("--help-bench: %v", err)
	}
	serveUsage(&help, fs, true)
	for _, n := range benchGroup {
		if !strings.Contains(help.String(), "\n  --"+n) {
			t.Errorf("serve --help-bench does not list --%s:\n%s", n, help.String())
		}
	}
}

// TestWrap: words are kept whole, lines fill up to the width.
func TestWrap(t *testing.T) {
	got := wrap("aa bb  cc dddddddddd e", 5)
	want := []string{"aa bb", "cc", "dddddddddd", "e"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("wrap: %q, want %q", got, want)
	}
}
