package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeIndexDir runs real servers with --index-dir: the first fills
// its decoder index over an epoch (every file a miss) and saves it on
// SIGTERM; a second, started on the same directory, loads it and its first
// epoch finds every file's index (hits only), with the very batches of a
// server without an index. A file that lies with a good checksum (every DC
// predictor past each photo's first checkpoint shifted) changes no batch:
// it is dropped whole, counted and logged once. A corrupt index file is
// ignored with a warning and the server starts cold and works.
func TestServeIndexDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	ctx := processTest(t, 5*time.Minute)
	const n = 24
	data := writeDataset(t, n, 3, 0)
	dir := t.TempDir()
	withDir := []string{"--index-dir", dir}
	term := func(p *serveProc) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.exited:
			if p.waitErr != nil {
				t.Fatalf("%s: exit after SIGTERM: %v", p.name, p.waitErr)
			}
		case <-ctx.Done():
			t.Fatalf("%s: still running after SIGTERM: %v", p.name, ctx.Err())
		}
	}
	counts := func(p *serveProc) (hits, misses float64) {
		t.Helper()
		return p.metric(t, ctx, "stoker_index_hits_total"), p.metric(t, ctx, "stoker_index_misses_total")
	}

	first := startServe(t, ctx, serveConfig{name: "first", dataset: data, workers: 2, args: withDir})
	consumeEpoch(t, ctx, first.addr, testJob(8, 1), consumeOpts{})
	// Each file's first decode is a miss; a batch made twice (a lease
	// that timed out on a loaded machine) would add hits, never misses.
	if _, m := counts(first); m != n {
		t.Errorf("first epoch of a fresh server: %v misses, want %d", m, n)
	}
	if f := first.metric(t, ctx, "stoker_index_files"); f != n {
		t.Errorf("stoker_index_files %v, want %d", f, n)
	}
	term(first)
	if len(first.findLogs("decoder index saved", nil)) != 1 {
		t.Fatalf("no 'decoder index saved' line")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "decoder-index-*.bin"))
	if len(files) != 1 {
		t.Fatalf("index files in --index-dir: %v", files)
	}

	second := startServe(t, ctx, serveConfig{name: "second", dataset: data, workers: 2, args: withDir})
	if l := second.findLogs("decoder index loaded", nil); len(l) != 1 || l[0]["files"] != float64(n) {
		t.Fatalf("'decoder index loaded' lines: %v", l)
	}
	got := consumeEpoch(t, ctx, second.addr, testJob(8, 2), consumeOpts{})
	if h, m := counts(second); h < n || m != 0 {
		t.Errorf("first epoch of a restarted server: %v hits, %v misses; want %d (or more), 0", h, m, n)
	}
	if d, tot := second.metric(t, ctx, "stoker_index_mcus_decoded_total"), second.metric(t, ctx, "stoker_index_mcus_total"); !(d > 0 && d < tot) {
		t.Errorf("MCUs decoded %v of %v", d, tot)
	}
	none := startServe(t, ctx, serveConfig{name: "no-index", dataset: data, workers: 2, args: []string{"--index-budget", "-1"}})
	want := consumeEpoch(t, ctx, none.addr, testJob(8, 2), consumeOpts{})
	if len(got.batches) != len(want.batches) {
		t.Fatalf("%d batches with the index, %d without", len(got.batches), len(want.batches))
	}
	for i := range want.batches {
		if got.batches[i].sum() != want.batches[i].sum() {
			t.Errorf("batch %d differs with the loaded index", i)
		}
	}
	term(second)

	lieIndexFile(t, files[0])
	liar := startServe(t, ctx, serveConfig{name: "liar", dataset: data, workers: 2, args: withDir})
	lied := consumeEpoch(t, ctx, liar.addr, testJob(8, 2), consumeOpts{})
	for i := range want.batches {
		if i >= len(lied.batches) || lied.batches[i].sum() != want.batches[i].sum() {
			t.Errorf("batch %d differs with a lying index file", i)
		}
	}
	if l := liar.findLogs("decoder index file dropped: it disagrees with the data", nil); len(l) != 1 {
		t.Errorf("'decoder index file dropped' lines: %v", l)
	}
	if d := liar.metric(t, ctx, "stoker_index_files_dropped_total"); d != 1 {
		t.Errorf("stoker_index_files_dropped_total %v, want 1", d)
	}
	if b := liar.metric(t, ctx, "stoker_index_bad_total"); b < 1 {
		t.Errorf("stoker_index_bad_total %v, want at least 1", b)
	}
	term(liar)

	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	third := startServe(t, ctx, serveConfig{name: "corrupt", dataset: data, workers: 2, args: withDir})
	if l := third.findLogs("decoder index file ignored: starting cold", nil); len(l) != 1 {
		t.Errorf("no warning for a corrupt index file")
	}
	consumeEpoch(t, ctx, third.addr, testJob(8, 3), consumeOpts{})
	if _, m := counts(third); m != n {
		t.Errorf("after a corrupt index file: %v misses, want %d", m, n)
	}
	term(third)

	// A file far larger than the budget allows is refused unread.
	if err := os.WriteFile(files[0], make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	huge := startServe(t, ctx, serveConfig{name: "huge", dataset: data, workers: 2, args: append(withDir, "--index-budget", "100000")})
	if l := huge.findLogs("decoder index file ignored: starting cold", nil); len(l) != 1 || !strings.Contains(fmt.Sprint(l[0]["err"]), "budget") {
		t.Errorf("warnings for an index file over 4x the budget: %v", l)
	}
	if d := huge.metric(t, ctx, "stoker_index_files_dropped_total"); d != 1 {
		t.Errorf("stoker_index_files_dropped_total %v, want 1", d)
	}
}

// lieIndexFile rewrites the index file at path as someone who can write
// --index-dir could: every DC predictor of every checkpoint but each
// photo's first shifted by 3 (so that every checkpoint agrees with the
// next), the checksum recomputed (layouts: pipeline/index_file.go and
// huff.c).
func lieIndexFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	off := 16 + int(le.Uint32(b[12:]))
	count := le.Uint64(b[off:])
	off += 8
	for range count {
		size := int(le.Uint32(b[off+16:]))
		blob := b[off+20 : off+20+size]
		off += 20 + size
		mpr, rows, nc, stride := int(le.Uint16(blob[4:])), int(le.Uint16(blob[6:])), int(blob[8]), int(blob[9])
		n := rows * ((mpr + stride - 1) / stride)
		for k := 1; k < n; k++ {
			if le.Uint32(blob[32+4*k:]) != 0 {
				dc := blob[32+4*n+2*nc*k:]
				le.PutUint16(dc, le.Uint16(dc)+3)
			}
		}
	}
	if off != len(b)-4 {
		t.Fatalf("index file layout: %d bytes of entries, file of %d", off, len(b))
	}
	le.PutUint32(b[off:], crc32.Checksum(b[:off], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
