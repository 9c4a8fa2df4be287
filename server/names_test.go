package server

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
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
