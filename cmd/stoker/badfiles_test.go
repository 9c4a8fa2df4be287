package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/client"
)

// badFileMsg is the server's log line for a file no sample could be made of.
const badFileMsg = "bad file: its samples are padded or dropped (the job's fail policy); fix or remove it (logged once per file)"

// TestBadFilesLogged: a real `stoker serve` logs each undecodable file of
// a dataset once, with the dataset, the file and why, however many epochs
// draw it; stoker_sample_errors_total counts every time.
func TestBadFilesLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve")
	}
	ctx := processTest(t, 120*time.Second)
	data := writeDataset(t, 8, 2, 0)
	bad := map[string][]byte{"class00/zz-text.jpg": []byte("this is not a JPEG\n"), "class01/zz-empty.jpg": nil}
	for name, b := range bad {
		if err := os.WriteFile(filepath.Join(data, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := launchServe(t, serveConfig{name: "serve", dataset: data, workers: 1})
	p.waitReady(t, ctx)
	c, err := client.New(p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const epochs = 3
	l := c.Loader(testJob(4, 1), client.WithEpochs(epochs))
	defer l.Close()
	for {
		b, err := l.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	if got := p.metric(t, ctx, "stoker_sample_errors_total", `dataset="ds"`); got != epochs*float64(len(bad)) {
		t.Errorf("stoker_sample_errors_total = %v, want %d", got, epochs*len(bad))
	}
	p.kill() // and wait: its log is all read
	for name := range bad {
		recs := p.findLogs(badFileMsg, map[string]string{"dataset": "ds", "file": name, "level": "WARN"})
		if len(recs) != 1 {
			t.Errorf("%s: logged %d times, want once", name, len(recs))
			continue
		}
		if r, _ := recs[0]["reason"].(string); !strings.Contains(r, "corrupt") && !strings.Contains(r, "unsupported") {
			t.Errorf("%s: reason %q", name, r)
		}
		t.Logf("%v", recs[0])
	}
}
