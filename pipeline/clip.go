package pipeline

import "unicode/utf8"

// clipName is s cut to at most n bytes at a character's start, marked
// when cut: names and messages that come from outside input (a store's
// keys, a manifest's strings) go into errors, logs and batch headers
// bounded.
func clipName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
