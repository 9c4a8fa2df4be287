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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/client"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// shardsServer serves "shards": makeDataset's 36 JPEGs in WebDataset tar
// shards of 5, 9, 3, 8, 7 and 4 samples.
func shardsServer(t *testing.T) string {
	t.Helper()
	src := makeDataset(t, []string{"a", "b", "c"}, 12)
	root := t.TempDir()
	i := 0
	for s, size := range []int{5, 9, 3, 8, 7, 4} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for range size {
			class, n := "abc"[i/12:i/12+1], i%12
			jpg, err := os.ReadFile(filepath.Join(src, class, fmt.Sprintf("img%02d.jpg", n)))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []struct {
				name string
				data []byte
			}{{fmt.Sprintf("%03d.jpg", i), jpg}, {fmt.Sprintf("%03d.cls", i), []byte(fmt.Sprint(i / 12))}} {
				if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}); err != nil {
					t.Fatal(err)
				}
				if _, err := tw.Write(m.data); err != nil {
					t.Fatal(err)
				}
			}
			i++
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("shard-%d.tar", s)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.New(server.Config{Datasets: map[string]string{"shards": root}, Workers: 2},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	gs, _, err := srv.GRPCServer()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, gs)
	t.Cleanup(func() { srv.Close() })
	return addr
}

// TestLoaderBlockShuffle runs a block-shuffled epoch on two ranks, then
// the same epoch resumed elastically on three after two batches of each
// of the two: with WithEpochWorldSize(2) every sample comes exactly once;
// split as if the epoch had begun on three ranks, some twice, some never.
func TestLoaderBlockShuffle(t *testing.T) {
	c := newClient(t, shardsServer(t))
	blockSpec := func(rank, world uint32) *pb.JobSpec {
		s := spec(3)
		s.Dataset, s.Rank, s.WorldSize = "shards", rank, world
		s.ShuffleMode, s.ShuffleWindow = pb.ShuffleMode_SHUFFLE_MODE_BLOCK, 2
		return s
	}
	count := func(seen map[int64]int, bs []*client.Batch) {
		for _, b := range bs {
			for _, i := range b.Indices {
				seen[i]++
			}
			b.Release()
		}
	}
	once := func(seen map[int64]int) bool {
		for i := range int64(36) {
			if seen[i] != 1 {
				return false
			}
		}
		return len(seen) == 36
	}
	seen := map[int64]int{}
	for r := range uint32(2) {
		count(seen, drain(t, c.Loader(blockSpec(r, 2), client.WithEpochs(1))))
	}
	if !once(seen) {
		t.Fatalf("two ranks' epoch: %v, want every index of 36 once", seen)
	}
	resume := func(opts ...client.LoaderOption) map[int64]int {
		seen := map[int64]int{}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for r := range uint32(2) {
			l := c.Loader(blockSpec(r, 2), client.WithEpochs(1))
			for range 2 {
				b, err := l.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				count(seen, []*client.Batch{b})
			}
			l.Close()
		}
		for r := range uint32(3) {
			count(seen, drain(t, c.Loader(blockSpec(r, 3), append([]client.LoaderOption{client.WithEpochs(1), client.WithResume(0, nil, 2*3*2)}, opts...)...)))
		}
		return seen
	}
	if got := resume(client.WithEpochWorldSize(2)); !once(got) {
		t.Errorf("resumed on 3 ranks with the epoch's first world size: %v, want every index once", got)
	}
	if once(resume()) {
		t.Error("resumed on 3 ranks split for 3, every index came once: WithEpochWorldSize would not be needed")
	}
}
