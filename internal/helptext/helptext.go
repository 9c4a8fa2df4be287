// Package helptext writes a command's --help within Width columns, so that
// it reads in a terminal and in docs/reference.md without wrapping there.
package helptext

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Width is the most columns a line of --help takes.
const Width = 100

// flagIndent is what the flag package puts before a flag's description:
// four spaces and a tab, eight columns.
const flagIndent = "    \t"

// Columns is how many columns line takes on a terminal, a tab reaching the
// next multiple of 8.
func Columns(line string) int {
	n := 0
	for _, r := range line {
		if r == '\t' {
			n += 8 - n%8
		} else {
			n++
		}
	}
	return n
}

// Wrap breaks s into lines of at most width columns, at spaces (a word
// longer than width stands on a line of its own).
func Wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// PrintDefaults is fs.PrintDefaults to w, each line of a flag's
// description wider than Width wrapped under it, at its indent.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	var b bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	for line := range strings.Lines(b.String()) {
		line = strings.TrimSuffix(line, "\n")
		if text, ok := strings.CutPrefix(line, flagIndent); ok && Columns(line) > Width {
			for _, l := range Wrap(text, Width-Columns(flagIndent)) {
				fmt.Fprintln(w, flagIndent+l)
			}
			continue
		}
		fmt.Fprintln(w, line)
	}
}

// Usage is a flag set's Usage: head (Head's, for every command alike),
// then its flags as PrintDefaults writes them.
func Usage(fs *flag.FlagSet, head string) func() {
	return func() {
		w, h := fs.Output(), head
		if h == "" {
			h = Head(fs.Name(), "[flags]", "")
		}
		fmt.Fprintln(w, h)
		PrintDefaults(w, fs)
	}
}

// Head is a command's help before its flags, the same for every command:
// "usage: stoker NAME ARGS", then what it does (wrapped within Width),
// then "flags:".
func Head(name, args, what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: stoker %s %s\n", name, args)
	if what != "" {
		b.WriteString("\n")
		for _, l := range Wrap(what, Width) {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString("\nflags:")
	return b.String()
}
