// Package progress shows how far a long piece of work has come (stoker
// index's listing and shard reads, stoker mkdata's images, a benchmark's
// runs, a server's scan of a dataset at start): the count, the rate and,
// when the total is known, an ETA. On a terminal it is one line rewritten
// in place; otherwise, for logs, a plain line now and then.
package progress

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Update is how far the work has come. Phases follow one another (a
// listing, then the shards it found); each has a line of its own.
type Update struct {
	// Phase says what is being done: "listing", "reading shards".
	Phase string
	// Unit is what Done counts: "objects", "shards", "images".
	Unit string
	// Done and Total count units; Total 0: not known yet (no ETA).
	Done, Total int64
	// Bytes and TotalBytes count the bytes the units hold, when known;
	// with both, the ETA follows the bytes.
	Bytes, TotalBytes int64
}

// DefaultEvery is how often a Reporter not on a terminal writes a line.
const DefaultEvery = 10 * time.Second

// Reporter turns Updates into lines. Safe for concurrent use.
type Reporter struct {
	mu sync.Mutex
	// Now is the clock (time.Now; tests set their own).
	Now func() time.Time
	// TTY: rewrite one line in place (set by New from the writer).
	TTY bool
	// Every is how often a line is written when not TTY (DefaultEvery).
	Every time.Duration
	// Ends writes each phase's last figures when it ends, even if no
	// line was due; false: only phases that took longer than Every end
	// with a line (a server's log need not say a quick scan was quick).
	Ends bool

	out      func(text string, final bool)
	phase    string
	phaseAt  time.Time
	lastLine time.Time
	last     Update
	wrote    bool // a line of this phase was written
	dirty    bool // figures came since the last line
}

// New reports on w, as "PREFIX: text" lines stamped with the time, or, when
// w is a terminal, as one line rewritten in place.
func New(w io.Writer, prefix string) *Reporter {
	r := &Reporter{Now: time.Now, Every: DefaultEvery, Ends: true}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			r.TTY = true
		}
	}
	r.out = func(text string, final bool) {
		switch {
		case r.TTY && final:
			fmt.Fprintf(w, "\r\033[K%s\n", text)
		case r.TTY:
			fmt.Fprintf(w, "\r\033[K%s", text)
		default:
			fmt.Fprintf(w, "%s %s: %s\n", r.Now().Format(time.RFC3339), prefix, text)
		}
	}
	return r
}

// NewLog reports through log, a line msg with the figures as the attribute
// "progress", every DefaultEvery: a server's log is a log even on a
// terminal. A phase quicker than that writes nothing.
func NewLog(log *slog.Logger, msg string) *Reporter {
	r := &Reporter{Now: time.Now, Every: DefaultEvery}
	r.out = func(text string, final bool) { log.Info(msg, "progress", text) }
	return r
}

// Report takes the work's latest figures.
func (r *Reporter) Report(u Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.Now()
	if u.Phase != r.phase {
		r.endPhase(now)
		r.phase, r.phaseAt, r.lastLine, r.wrote = u.Phase, now, now, false
	}
	r.last, r.dirty = u, true
	if r.TTY || now.Sub(r.lastLine) >= r.every() {
		r.line(now, false)
	}
}

// Done ends the last phase's line.
func (r *Reporter) Done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endPhase(r.Now())
	r.phase = ""
}

func (r *Reporter) every() time.Duration {
	if r.Every > 0 {
		return r.Every
	}
	return DefaultEvery
}

// endPhase writes the phase's last figures, where a line is due: on a
// terminal always (it ends the line), elsewhere when they are new.
func (r *Reporter) endPhase(now time.Time) {
	if r.phase != "" && (r.TTY || r.dirty && (r.Ends || r.wrote)) {
		r.line(now, true)
	}
}

// line writes the figures so far; final ends the phase's line.
func (r *Reporter) line(now time.Time, final bool) {
	r.lastLine, r.wrote, r.dirty = now, true, false
	r.out(Text(r.last, now.Sub(r.phaseAt)), final)
}

// Text is u as a line, elapsed into its phase: "reading shards: 12 of 40,
// 1.2 GB of 4.0 GB (3.0 shards/s, 300.0 MB/s), ETA 9s", or "listing: 5000
// objects (2500/s)" while the total is unknown.
func Text(u Update, elapsed time.Duration) string {
	el := elapsed.Seconds()
	if u.Total <= 0 {
		s := fmt.Sprintf("%s: %d %s", u.Phase, u.Done, u.Unit)
		if el > 0 {
			s += fmt.Sprintf(" (%s/s)", rate(float64(u.Done)/el))
		}
		return s
	}
	s := fmt.Sprintf("%s: %d of %d", u.Phase, u.Done, u.Total)
	if u.TotalBytes > 0 {
		s += fmt.Sprintf(", %s of %s", Bytes(u.Bytes), Bytes(u.TotalBytes))
	}
	if el <= 0 || u.Done <= 0 {
		return s
	}
	s += fmt.Sprintf(" (%s %s/s", rate(float64(u.Done)/el), u.Unit)
	if u.TotalBytes > 0 {
		s += fmt.Sprintf(", %s/s", Bytes(int64(float64(u.Bytes)/el)))
	}
	s += ")"
	if u.Done < u.Total {
		left := el * float64(u.Total-u.Done) / float64(u.Done)
		if u.TotalBytes > 0 && u.Bytes > 0 {
			left = el * float64(u.TotalBytes-u.Bytes) / float64(u.Bytes)
		}
		s += fmt.Sprintf(", ETA %v", time.Duration(left*float64(time.Second)).Round(time.Second))
	}
	return s
}

// rate is a rate with a decimal while it is small.
func rate(v float64) string {
	if v < 100 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// Bytes is n in B, kB, MB, GB, TB (powers of 1000).
func Bytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 4 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %cB", f, "kMGT"[u-1])
}
