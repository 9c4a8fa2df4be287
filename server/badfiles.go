package server

import (
	"log/slog"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
)

// Bounds of badFileLog: the names it remembers (each at most
// badFileNameBytes of dataset and file name: a few MiB at most), and its
// rate, badFileBurst lines at once and one more every badFileEvery.
const (
	badFileNames     = 10000
	badFileNameBytes = 512
	badFileBurst     = 50
	badFileEvery     = 100 * time.Millisecond
)

// badFileLog logs each file the server could not make a sample of, once
// per dataset and file, with the reason: stoker_sample_errors_total only
// counts them, and an operator needs the names to fix the files. A
// hostile or broken dataset of a million bad files must neither flood the
// log nor fill memory with names: lines are rate-limited (a file left
// out for the rate is logged when it comes again, and the next line
// counts those left out), and once badFileNames names have been logged,
// one line says so and the rest are only counted. The zero value is
// ready; it is safe for concurrent use.
type badFileLog struct {
	now func() time.Time // nil: time.Now (tests inject a clock)

	mu      sync.Mutex
	seen    map[badFileKey]struct{}
	tokens  float64
	last    time.Time // of the tokens' last refill
	skipped int       // left out for the rate since the last line
	full    bool      // the line that says the names are full is out
}

type badFileKey struct{ dataset, file string }

// note logs the files of errs, samples of dataset, not logged before.
func (b *badFileLog) note(log *slog.Logger, dataset string, errs []pipeline.SampleError) {
	if len(errs) == 0 {
		return
	}
	type line struct {
		file, reason string
		skipped      int
	}
	var lines []line
	var full bool
	b.mu.Lock()
	b.refill()
	for _, e := range errs {
		k := badFileKey{clipName(dataset, badFileNameBytes/2), clipName(e.Name, badFileNameBytes/2)}
		if _, ok := b.seen[k]; ok {
			continue
		}
		if len(b.seen) >= badFileNames {
			full = full || !b.full
			b.full = true
			continue
		}
		if b.tokens < 1 {
			b.skipped++
			continue
		}
		b.tokens--
		if b.seen == nil {
			b.seen = make(map[badFileKey]struct{})
		}
		b.seen[k] = struct{}{}
		lines = append(lines, line{e.Name, e.Reason, b.skipped})
		b.skipped = 0
	}
	b.mu.Unlock()
	// Logged outside the lock: a slow log writer holds up only this batch.
	for _, l := range lines {
		attrs := []any{"dataset", dataset, "file", clipName(l.file, badFileNameBytes), "reason", clipName(l.reason, 1024)}
		if l.skipped > 0 {
			attrs = append(attrs, "not_logged_for_rate", l.skipped)
		}
		log.Warn("bad file: its samples are padded or dropped (the job's fail policy); fix or remove it (logged once per file)", attrs...)
	}
	if full {
		log.Warn("bad files: too many to name; further ones are counted in stoker_sample_errors_total only", "dataset", dataset, "logged", badFileNames)
	}
}

// refill adds the tokens earned since the last refill, up to the burst.
func (b *badFileLog) refill() {
	now := time.Now
	if b.now != nil {
		now = b.now
	}
	t := now()
	if b.last.IsZero() {
		b.tokens = badFileBurst
	} else if d := t.Sub(b.last); d > 0 {
		b.tokens = min(badFileBurst, b.tokens+float64(d)/float64(badFileEvery))
	}
	b.last = t
}

// clipName is s cut to at most n bytes, marked when cut.
func clipName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
