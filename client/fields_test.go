package client_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/server"
)

// captionShards writes makeDataset's photos as an unlabelled WebDataset
// (KEY.jpg beside KEY.txt), caption of a key as captions maps it: one in
// invalid UTF-8, and a key "x/999" with a caption and no image.
func captionShards(t *testing.T) (dir string, captions map[string]string) {
	t.Helper()
	photos := makeDataset(t, []string{"x"}, 12)
	dir = t.TempDir()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	put := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	captions = map[string]string{}
	for i := range 12 {
		jpg, err := os.ReadFile(filepath.Join(photos, "x", fmt.Sprintf("img%02d.jpg", i)))
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("x/%03d", i)
		captions[key] = fmt.Sprintf("a gradient, number %d", i)
		if i == 4 {
			captions[key] = "caf\xe9 \xff\xfe \xc3( not UTF-8"
		}
		put(key+".jpg", jpg)
		put(key+".txt", []byte(captions[key]))
	}
	put("x/999.txt", []byte("a caption without its image"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "captions-0.tar"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, captions
}

// TestLoaderFields: Batch.Fields gives each sample's caption as the shard
// holds it, byte for byte (one in invalid UTF-8 too), and its key, in
// batch order, in chunks and through the shared-memory ring alike; a key
// with a caption and no image is a sample error, the epoch going on; a
// field the dataset lacks, and fields over the per-batch bound, end the
// Loader with INVALID_ARGUMENT saying which and why.
func TestLoaderFields(t *testing.T) {
	dir, captions := captionShards(t)
	srv, err := server.New(server.Config{Datasets: map[string]string{"captions": dir}, Workers: 2, Shm: true},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	gs, _, err := srv.GRPCServer()
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, serve(t, gs))
	s := spec(5)
	s.Dataset, s.Fields = "captions", []string{"txt", "__key__"}
	for _, shm := range []bool{false, true} {
		l := c.Loader(s, client.WithEpochs(1), client.WithSharedMemory(shm))
		batches := drain(t, l)
		if tr, _ := l.Transport(); shm != (tr == "shm") {
			t.Fatalf("shared memory %v: transport %s", shm, tr)
		}
		l.Close()
		seen := map[string]bool{}
		var failed []string
		for _, b := range batches {
			for _, e := range b.Errors {
				failed = append(failed, e.GetName()+": "+e.GetReason())
			}
			if len(b.Fields) != 2 || len(b.Fields["txt"]) != len(b.Indices) || len(b.Fields["__key__"]) != len(b.Indices) {
				t.Fatalf("shm %v, batch %d: fields %q for %d samples", shm, b.Number, b.Fields, len(b.Indices))
			}
			for i, key := range b.Fields["__key__"] {
				if got, want := b.Fields["txt"][i], captions[string(key)]; string(got) != want || want == "" {
					t.Errorf("shm %v, batch %d slot %d: key %q, caption %q, want %q", shm, b.Number, i, key, got, want)
				}
				seen[string(key)] = true
			}
		}
		if len(seen) != 12 || !seen["x/004"] {
			t.Errorf("shm %v: keys %v, want the 12 with images", shm, seen)
		}
		if len(failed) != 1 || !strings.Contains(failed[0], "x/999") {
			t.Errorf("shm %v: sample errors %q, want one, x/999's (no image)", shm, failed)
		}
	}

	for _, bad := range []struct {
		what          string
		fields        []string
		maxFieldBytes uint32
		batch         uint32
		want          string
	}{
		{"a field the dataset lacks", []string{"txt", "json"}, 0, 5, `no sample has a field "json"; the dataset's fields are jpg, txt, __key__, __source__`},
		{"over the per-batch bound", []string{"txt", "__key__"}, 1 << 20, 64, "max_field_bytes may be at most 262144"},
	} {
		s := spec(bad.batch)
		s.Dataset, s.Fields, s.MaxFieldBytes = "captions", bad.fields, bad.maxFieldBytes
		l := c.Loader(s, client.WithEpochs(1))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := l.Next(ctx)
		cancel()
		l.Close()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v; want INVALID_ARGUMENT saying %q", bad.what, err, bad.want)
		}
	}
}
