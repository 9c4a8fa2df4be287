package helptext

import (
	"flag"
	"strings"
	"testing"
)

// TestPrintDefaults: a description wider than Width is wrapped under its
// flag at the flag package's indent, and every line fits; short ones are
// left as the flag package writes them.
func TestPrintDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("long", "", strings.Repeat("word ", 40)+"end")
	fs.Bool("short", false, "a short one")
	var b strings.Builder
	PrintDefaults(&b, fs)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if lines[0] != "  -long string" || lines[len(lines)-2] != "  -short" || lines[len(lines)-1] != "    \ta short one" {
		t.Errorf("got:\n%s", b.String())
	}
	if len(lines) < 5 {
		t.Errorf("the long description is not wrapped:\n%s", b.String())
	}
	for _, l := range lines {
		if Columns(l) > Width {
			t.Errorf("%d columns: %q", Columns(l), l)
		}
	}
}

func TestColumns(t *testing.T) {
	for s, want := range map[string]int{"": 0, "ab": 2, "\t": 8, "    \tx": 9, "abcdefgh\tx": 17, "▶ é": 3} {
		if got := Columns(s); got != want {
			t.Errorf("Columns(%q) = %d, want %d", s, got, want)
		}
	}
}
