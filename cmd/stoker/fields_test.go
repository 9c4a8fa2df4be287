package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// writeCaptionShards writes n of writeDataset's photos as 2 unlabelled
// WebDataset shards (CLIP's layout: KEY.jpg, KEY.txt, KEY.json, keys
// s<shard>/<i>) into a new directory; sample huge's .json is hugeSize
// bytes of valid JSON (none when huge < 0).
func writeCaptionShards(t *testing.T, n, huge int, hugeSize int64) string {
	t.Helper()
	photos := writeDataset(t, n, 1, 0)
	dir := t.TempDir()
	var tws [2]*tar.Writer
	var bufs [2]*bufio.Writer
	for s := range tws {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("shard-%d.tar", s)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		bufs[s] = bufio.NewWriterSize(f, 1<<20)
		tws[s] = tar.NewWriter(bufs[s])
	}
	put := func(tw *tar.Writer, name string, size int64, r io.Reader) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(tw, r, size); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		jpg, err := os.ReadFile(filepath.Join(photos, "class00", fmt.Sprintf("img%05d.jpg", i)))
		if err != nil {
			t.Fatal(err)
		}
		key, tw := fmt.Sprintf("s%d/%03d", i%2, i), tws[i%2]
		caption := fmt.Sprintf("a photo of a noisy gradient, number %d", i)
		put(tw, key+".jpg", int64(len(jpg)), bytes.NewReader(jpg))
		put(tw, key+".txt", int64(len(caption)), strings.NewReader(caption))
		js := fmt.Sprintf(`{"key": %q}`, key)
		if i == huge {
			// {"pad": "xxx…"}, written as it goes: the test keeps no 100 MB
			// buffer either.
			head, tail := `{"pad": "`, `"}`
			pad := io.LimitReader(repeatReader('x'), hugeSize-int64(len(head)+len(tail)))
			put(tw, key+".json", hugeSize, io.MultiReader(strings.NewReader(head), pad, strings.NewReader(tail)))
			continue
		}
		put(tw, key+".json", int64(len(js)), strings.NewReader(js))
	}
	for s := range tws {
		if err := tws[s].Close(); err != nil {
			t.Fatal(err)
		}
		if err := bufs[s].Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// repeatReader reads as an endless run of its byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestServeHugeFieldRSS: a shard member of 100 MB (a sample's .json),
// asked for as a field, fails its sample alone (a per-sample error naming
// the field and the bound); the job goes on, every other sample delivered
// with its own fields; and the server never reads it: its peak RSS is
// within 50 MiB of the same server's over the same shards with a .json of
// a few bytes there, whether it reads the shards from local disk or from
// a bucket (a real S3 server), scanned at start or from a manifest.
func TestServeHugeFieldRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and versitygw processes")
	}
	ctx := processTest(t, 5*time.Minute)
	const (
		n      = 16
		huge   = 5 // in shard 1
		size   = 100 << 20
		margin = 50 * mib
	)
	plain, big := writeCaptionShards(t, n, -1, 0), writeCaptionShards(t, n, huge, size)
	s := s3Env(t)
	s.PutTree(t, "bkt", "plain/", plain)
	s.PutTree(t, "bkt", "big/", big)

	spec := testJob(4, 3)
	spec.Fields = []string{"txt", "json", "__key__"}
	for _, c := range []struct {
		name, plain, big string
		index            bool // write the manifests first
	}{
		{"local disk", plain, big, false},
		{"bucket, scanned", s.URL("bkt", "plain/"), s.URL("bkt", "big/"), false},
		{"bucket, manifest", s.URL("bkt", "plain/"), s.URL("bkt", "big/"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.index {
				runIndexCmd(t, ctx, nil, c.plain)
				runIndexCmd(t, ctx, nil, c.big)
			}
			var peaks [2]int64
			for k, data := range []string{c.plain, c.big} {
				p := startServe(t, ctx, serveConfig{name: fmt.Sprintf("%s %d", c.name, k), dataset: data, workers: 1})
				res := consumeEpoch(t, ctx, p.addr, spec, consumeOpts{})
				checkCaptionEpoch(t, res, n, k == 1)
				_, peaks[k] = p.procMem(t)
				p.kill()
			}
			t.Logf("peak RSS %d MiB serving the shards with a 100 MiB .json, %d MiB with a small one", peaks[1]/mib, peaks[0]/mib)
			if peaks[1] > peaks[0]+margin {
				t.Errorf("peak RSS %d MiB with the 100 MiB .json, %d MiB without: want at most %d MiB more",
					peaks[1]/mib, peaks[0]/mib, margin/mib)
			}
		})
	}
}

// checkCaptionEpoch checks an epoch of writeCaptionShards's n samples:
// every slot's caption and .json its key's; with huge, exactly one sample
// error, s1/005's, for its .json over max_field_bytes, its slot padded.
func checkCaptionEpoch(t *testing.T, res epochResult, n int, huge bool) {
	t.Helper()
	var slots int
	var errs []*stokerv1.SampleError
	for _, b := range res.batches {
		fs := b.hdr.GetFields()
		if len(fs) != 3 {
			t.Fatalf("batch %d: %d fields, want 3", b.hdr.GetNumber(), len(fs))
		}
		errs = append(errs, b.hdr.GetErrors()...)
		for i := range b.hdr.GetIndices() {
			txt, js, key := fs[0].GetValues()[i], fs[1].GetValues()[i], string(fs[2].GetValues()[i])
			var num int
			fmt.Sscanf(key[3:], "%d", &num)
			if string(txt) != fmt.Sprintf("a photo of a noisy gradient, number %d", num) || string(js) != fmt.Sprintf(`{"key": %q}`, key) {
				t.Errorf("batch %d slot %d: key %q, caption %q, json %.80q", b.hdr.GetNumber(), i, key, txt, js)
			}
			slots++
		}
	}
	if slots != n {
		t.Errorf("%d samples delivered, want %d (a failed one padded)", slots, n)
	}
	switch {
	case !huge && len(errs) != 0:
		t.Errorf("sample errors %v, want none", errs)
	case huge && (len(errs) != 1 || !strings.Contains(errs[0].GetName(), "s1/005") ||
		!strings.Contains(errs[0].GetReason(), `field "json"`) || !strings.Contains(errs[0].GetReason(), "max_field_bytes")):
		t.Errorf("sample errors %v, want one, s1/005's .json over max_field_bytes", errs)
	}
}
