package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
)

// TestIndexProgress: stoker index's progress is one line per phase when
// its output is not a terminal (at the end of each phase, and every
// logEvery while it goes on), and one line rewritten in place, ended at
// each phase's end, when it is; with counts, sizes and, while shards are
// read, an ETA.
func TestIndexProgress(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	feed := func(p *progressReporter) {
		p.now = tick
		p.report(pipeline.IndexProgress{Phase: "list", Done: 5})
		p.report(pipeline.IndexProgress{Phase: "scan", Done: 0, Total: 4, TotalBytes: 6000})
		p.report(pipeline.IndexProgress{Phase: "scan", Done: 1, Total: 4, Bytes: 1500, TotalBytes: 6000})
		p.report(pipeline.IndexProgress{Phase: "scan", Done: 4, Total: 4, Bytes: 6000, TotalBytes: 6000})
		p.done()
	}
	var log bytes.Buffer
	p := newProgressReporter(&log, clock)
	feed(p)
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "stoker index: listing: 5 objects") ||
		!strings.Contains(lines[1], "stoker index: reading shards: 4 of 4, 6.0 kB of 6.0 kB") {
		t.Errorf("log lines:\n%s", log.String())
	}
	var tty bytes.Buffer
	p = newProgressReporter(&tty, clock)
	p.tty = true
	feed(p)
	out := tty.String()
	if strings.Count(out, "\n") != 2 || strings.Count(out, "\r\033[K") != 6 || !strings.Contains(out, "reading shards: 1 of 4, 1.5 kB of 6.0 kB") ||
		!strings.Contains(out, "ETA 3s") || !strings.Contains(out, "(1.0 shards/s, 1.5 kB/s)") {
		t.Errorf("terminal output %q", out)
	}
	for n, want := range map[int64]string{999: "999 B", 1000: "1.0 kB", 1_500_000: "1.5 MB", 2e12: "2.0 TB"} {
		if got := bytesString(n); got != want {
			t.Errorf("bytesString(%d) = %q, want %q", n, got, want)
		}
	}
}
