package progress

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// feed reports a listing, then shards read, on a clock that ticks a
// second per reading.
func feed(r *Reporter) {
	clock := time.Unix(1_700_000_000, 0)
	r.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	r.Report(Update{Phase: "listing", Unit: "objects", Done: 5})
	r.Report(Update{Phase: "reading shards", Unit: "shards", Done: 0, Total: 4, TotalBytes: 6000})
	r.Report(Update{Phase: "reading shards", Unit: "shards", Done: 1, Total: 4, Bytes: 1500, TotalBytes: 6000})
	r.Report(Update{Phase: "reading shards", Unit: "shards", Done: 4, Total: 4, Bytes: 6000, TotalBytes: 6000})
	r.Done()
}

// TestReporter: not on a terminal, one line per phase (at its end, and
// every Every while it goes on); on one, a line rewritten in place and
// ended at each phase's end; counts, sizes, rates and, while the total is
// not reached, an ETA.
func TestReporter(t *testing.T) {
	var log bytes.Buffer
	feed(New(&log, "stoker index"))
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "stoker index: listing: 5 objects") ||
		!strings.Contains(lines[1], "stoker index: reading shards: 4 of 4, 6.0 kB of 6.0 kB") {
		t.Errorf("log lines:\n%s", log.String())
	}
	var tty bytes.Buffer
	r := New(&tty, "stoker index")
	r.TTY = true
	feed(r)
	out := tty.String()
	if strings.Count(out, "\n") != 2 || strings.Count(out, "\r\033[K") != 6 || !strings.Contains(out, "reading shards: 1 of 4, 1.5 kB of 6.0 kB") ||
		!strings.Contains(out, "ETA 3s") || !strings.Contains(out, "(1.0 shards/s, 1.5 kB/s)") {
		t.Errorf("terminal output %q", out)
	}
	for n, want := range map[int64]string{999: "999 B", 1000: "1.0 kB", 1_500_000: "1.5 MB", 2e12: "2.0 TB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestReporterEvery: a long phase writes a line every Every, with the
// rate and ETA so far, and ends with one; images counted without bytes.
func TestReporterEvery(t *testing.T) {
	var out bytes.Buffer
	r := New(&out, "stoker mkdata")
	clock := time.Unix(0, 0)
	r.Now = func() time.Time { return clock }
	for done := int64(0); done <= 1000; done += 50 { // 50 images a second
		r.Report(Update{Phase: "writing images", Unit: "images", Done: done, Total: 1000})
		clock = clock.Add(time.Second)
	}
	r.Done()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	// At 10 s and 20 s (due); the end has nothing new to say.
	if len(lines) != 2 || !strings.Contains(lines[0], "writing images: 500 of 1000 (50.0 images/s), ETA 10s") ||
		!strings.HasSuffix(lines[1], "stoker mkdata: writing images: 1000 of 1000 (50.0 images/s)") {
		t.Errorf("lines:\n%s", out.String())
	}
}

// TestReporterLog: through a logger, a phase quicker than Every writes
// nothing; a longer one writes its figures every Every and at its end.
func TestReporterLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	r := NewLog(log, "opening dataset")
	clock := time.Unix(0, 0)
	r.Now = func() time.Time { return clock }
	r.Report(Update{Phase: "listing", Unit: "files", Done: 4096})
	clock = clock.Add(2 * time.Second)
	r.Report(Update{Phase: "reading shards", Unit: "shards", Done: 0, Total: 300}) // the listing ends, quick: no line
	for done := int64(1); done <= 300; done++ {
		clock = clock.Add(100 * time.Millisecond)
		r.Report(Update{Phase: "reading shards", Unit: "shards", Done: done, Total: 300})
	}
	r.Done()
	got := buf.String()
	want := `level=INFO msg="opening dataset" progress="reading shards: 100 of 300 (10.0 shards/s), ETA 20s"` + "\n" +
		`level=INFO msg="opening dataset" progress="reading shards: 200 of 300 (10.0 shards/s), ETA 10s"` + "\n" +
		`level=INFO msg="opening dataset" progress="reading shards: 300 of 300 (10.0 shards/s)"` + "\n"
	if got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}
