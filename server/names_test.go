package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
)

// TestLongNamesEchoedShort: a client's 16–17 KB names (a preset, a
// dataset) get INVALID_ARGUMENT with a short echo, on the stream and on
// DescribeJob, from a real server; before, the whole name went into the
// status, whose header the client refused (RESOURCE_EXHAUSTED or INTERNAL).
func TestLongNamesEchoedShort(t *testing.T) {
	e := newEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	long := strings.Repeat("x", 16<<10) + strings.Repeat("é", 512) // 17 KB, not all ASCII
	for _, tc := range []struct {
		name string
		job  *pb.JobSpec
		want string
	}{
		{"preset", &pb.JobSpec{Dataset: "tiny", BatchSize: 4, Transform: &pb.TransformSpec{Preset: long}}, "transform preset name"},
		{"dataset", &pb.JobSpec{Dataset: long, BatchSize: 4, Transform: &pb.TransformSpec{Preset: "imagenet-eval"}}, "dataset name of"},
	} {
		check := func(t *testing.T, err error) {
			t.Helper()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%.300v; want InvalidArgument saying %q", err, tc.want)
			}
			if msg := status.Convert(err).Message(); len(msg) > 512 {
				t.Errorf("a status message of %d bytes echoes the name: %.100s…", len(msg), msg)
			}
		}
		t.Run(tc.name+"/DescribeJob", func(t *testing.T) {
			_, err := e.client.DescribeJob(ctx, &pb.DescribeJobRequest{Job: tc.job})
			check(t, err)
		})
		t.Run(tc.name+"/Feed", func(t *testing.T) {
			open := smallJob("tiny", 4)
			open.Job = tc.job
			_, err := e.feedStream(t, ctx, open).Recv()
			check(t, err)
		})
	}
}

// TestCapStatus: whatever a handler puts in a status, what leaves the
// server is at most maxStatusMessage bytes of it, cut between runes, with
// its code.
func TestCapStatus(t *testing.T) {
	for _, msg := range []string{"short", strings.Repeat("a", maxStatusMessage), strings.Repeat("a", maxStatusMessage+1), strings.Repeat("€", 5000)} {
		err := capStatus(status.Error(codes.NotFound, msg))
		got := status.Convert(err).Message()
		if status.Code(err) != codes.NotFound || len(got) > maxStatusMessage+len("…") || !utf8.ValidString(got) {
			t.Errorf("%d bytes in: %v, %d bytes out, valid UTF-8 %v", len(msg), status.Code(err), len(got), utf8.ValidString(got))
		}
		if len(msg) <= maxStatusMessage && got != msg {
			t.Errorf("a message of %d bytes was changed", len(msg))
		}
	}
	if capStatus(nil) != nil {
		t.Error("capStatus(nil) is not nil")
	}
}

// TestSampleErrorsBounded: a batch of 1,500 failed samples whose names
// are 4 KB each (deep folders: a manifest's or a bucket's keys may be
// longer) reaches a trainer whose gRPC takes 4 MiB at most; before, the
// header carried every name and reason whole (12 MB: the issue's
// "ResourceExhausted (31457650 vs. 8388608)"). Every failed index is
// there; names and reasons while they fit.
func TestSampleErrorsBounded(t *testing.T) {
	root := makeDataset(t, []string{"a"}, 1, false)
	deep := filepath.Join(root, "a")
	for range 15 {
		deep = filepath.Join(deep, strings.Repeat("d", 250))
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	const bad = 1500
	for i := range bad {
		if err := os.WriteFile(filepath.Join(deep, fmt.Sprintf("%0200d.jpg", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := startServer(t, Config{Datasets: map[string]string{"deep": root}})
	open := smallJob("deep", 2048)
	open.Job.Shuffle = false
	open.Job.MaxSampleErrors = &pb.SampleErrorLimit{Count: bad}
	ep := e.collect(t, open)
	if len(ep.batches) != 1 {
		t.Fatalf("%d batches, want 1", len(ep.batches))
	}
	h := ep.batches[0].hdr
	if len(h.Errors) != bad {
		t.Fatalf("%d errors, want %d", len(h.Errors), bad)
	}
	text := 0
	for _, se := range h.Errors {
		text += len(se.Name) + len(se.Reason)
		if len(se.Name) > pipeline.MaxSampleErrorText+len("…") || len(se.Reason) > 1024 {
			t.Fatalf("an error of %d + %d bytes", len(se.Name), len(se.Reason))
		}
	}
	if h.Errors[0].Name == "" || !strings.HasSuffix(h.Errors[0].Name, "…") || text > job.MaxHeaderErrorText+1024 {
		t.Errorf("first name %.60q…, %d bytes of text in the header", h.Errors[0].Name, text)
	}
	if last := h.Errors[bad-1]; last.Index < 0 || last.Name != "" {
		t.Errorf("last error %+v: want its index, without text", last)
	}
}
