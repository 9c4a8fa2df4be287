package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
)

// badFileLines are the records a badFileLog wrote to buf.
func badFileLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, r)
	}
	buf.Reset()
	return out
}

func sampleErrs(from, to int) []pipeline.SampleError {
	var errs []pipeline.SampleError
	for i := from; i < to; i++ {
		errs = append(errs, pipeline.SampleError{Index: int64(i), Name: fmt.Sprintf("c/%07d.jpg", i), Reason: "corrupt: not a JPEG"})
	}
	return errs
}

// TestBadFileLogOnce: each (dataset, file) is logged once, with the reason;
// the same file in another dataset is another line.
func TestBadFileLogOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var b badFileLog
	errs := []pipeline.SampleError{
		{Index: 3, Name: "a/x.jpg", Reason: "corrupt: premature end"},
		{Index: 3, Name: "a/x.jpg", Reason: "corrupt: premature end"}, // padded twice in one batch
		{Index: 9, Name: "b/y.png", Reason: "unsupported: 16-bit"},
	}
	b.note(log, "ds", errs)
	lines := badFileLines(t, &buf)
	if len(lines) != 2 || lines[0]["file"] != "a/x.jpg" || lines[0]["reason"] != "corrupt: premature end" ||
		lines[0]["dataset"] != "ds" || lines[0]["level"] != "WARN" || lines[1]["file"] != "b/y.png" {
		t.Fatalf("first batch: %v", lines)
	}
	if lines[0]["msg"] != "bad file: its samples are padded or dropped (the job's fail policy); fix or remove it (logged once per file)" {
		t.Errorf("message %q", lines[0]["msg"])
	}
	for range 3 { // later epochs
		b.note(log, "ds", errs)
	}
	if lines := badFileLines(t, &buf); len(lines) != 0 {
		t.Errorf("logged again: %v", lines)
	}
	b.note(log, "other", errs[:1])
	if lines := badFileLines(t, &buf); len(lines) != 1 || lines[0]["dataset"] != "other" {
		t.Errorf("another dataset: %v", lines)
	}
}

// TestBadFileLogRate: a burst of bad files logs badFileBurst lines, then
// one every badFileEvery (an injected clock); a file left out is logged
// when it comes again, and the next line counts those left out.
func TestBadFileLogRate(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	now := time.Unix(1000, 0)
	b := badFileLog{now: func() time.Time { return now }}
	b.note(log, "ds", sampleErrs(0, 200))
	if lines := badFileLines(t, &buf); len(lines) != badFileBurst {
		t.Fatalf("a burst of 200 logged %d lines, want %d", len(lines), badFileBurst)
	}
	now = now.Add(10 * badFileEvery)
	b.note(log, "ds", sampleErrs(0, 200))
	lines := badFileLines(t, &buf)
	if len(lines) != 10 {
		t.Fatalf("after 10 intervals: %d lines, want 10", len(lines))
	}
	// The first 50 were logged; 51..60 now, the first of them with the 150
	// left out of the first burst.
	if lines[0]["file"] != "c/0000050.jpg" || lines[0]["not_logged_for_rate"] != float64(150) || lines[1]["not_logged_for_rate"] != nil {
		t.Errorf("after 10 intervals: %v", lines[:2])
	}
	now = now.Add(time.Hour) // the bucket holds a burst, no more
	b.note(log, "ds", sampleErrs(0, 200))
	if lines := badFileLines(t, &buf); len(lines) != badFileBurst {
		t.Errorf("after an hour: %d lines, want %d", len(lines), badFileBurst)
	}
}

// TestBadFileLogBounded: a dataset of a million bad files neither floods
// the log nor fills memory: at most badFileNames names are kept, one line
// says that the rest are only counted, and the lines never outrun the rate.
func TestBadFileLogBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a million sample errors")
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	now := time.Unix(1000, 0)
	b := badFileLog{now: func() time.Time { return now }}
	total, full := 0, 0
	const batch = 1000
	for i := 0; i < 1_000_000; i += batch {
		now = now.Add(time.Second) // ten lines' worth each time
		b.note(log, "ds", sampleErrs(i, i+batch))
		lines := badFileLines(t, &buf)
		total += len(lines)
		for _, l := range lines {
			if l["msg"] == "bad files: too many to name; further ones are counted in stoker_sample_errors_total only" {
				total--
				full++
				if l["logged"] != float64(badFileNames) {
					t.Errorf("full line: %v", l)
				}
			}
		}
	}
	if len(b.seen) != badFileNames || total != badFileNames || full != 1 {
		t.Errorf("%d names kept, %d lines, %d saying so; want %d, %d and 1", len(b.seen), total, full, badFileNames, badFileNames)
	}
}
