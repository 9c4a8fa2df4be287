package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
)

// TestSampleErrorsLimit: a batch whose every sample failed, and an epoch
// whose failed samples pass the job's limit, end the job (DATA_LOSS)
// naming the commonest cause and how many samples it hit; fewer pass, and
// each epoch counts afresh.
func TestSampleErrorsLimit(t *testing.T) {
	corrupt := func(i int) pipeline.SampleError {
		return pipeline.SampleError{Index: int64(i), Name: fmt.Sprintf("c/%d.jpg", i), Reason: "corrupt image: not a JPEG"}
	}
	missing := pipeline.SampleError{Index: 99, Name: "c/99.jpg", Reason: "open c/99.jpg: no such file or directory"}
	batch := func(n int, errs ...pipeline.SampleError) *pipeline.Batch { return &pipeline.Batch{N: n, Errors: errs} }
	for _, tc := range []struct {
		name    string
		limit   *pb.SampleErrorLimit
		samples uint64
		batches []*pipeline.Batch
		want    []string // in the error of the last batch; nil: no error
	}{
		{"a few pass", nil, 1000, []*pipeline.Batch{batch(8, corrupt(1)), batch(8, corrupt(2), missing)}, nil},
		{"every sample of a batch", nil, 1000, []*pipeline.Batch{batch(0, corrupt(1), corrupt(2), missing)},
			[]string{"every sample of batch 0 of epoch 3 failed (3 of 3)", "not decodable (corrupt): 2 samples (e.g. sample 1, c/1.jpg", "; missing: 1 sample (e.g. sample 99"}},
		{"past the default count", nil, 1000, []*pipeline.Batch{batch(8, corrupt(1), corrupt(2), corrupt(3), corrupt(4), corrupt(5)),
			batch(8, corrupt(6), corrupt(7), corrupt(8), corrupt(9), corrupt(10), missing)},
			[]string{"11 of epoch 3's 1000 samples failed", "max_sample_errors (10, or 0.001 of the epoch's samples when more)", "not decodable (corrupt): 10 samples"}},
		{"under the default fraction", nil, 20000, []*pipeline.Batch{batch(8, corrupt(1), corrupt(2), corrupt(3), corrupt(4), corrupt(5)),
			batch(8, corrupt(6), corrupt(7), corrupt(8), corrupt(9), corrupt(10), missing)}, nil},
		{"none tolerated", &pb.SampleErrorLimit{}, 1000, []*pipeline.Batch{batch(8, missing)}, []string{"1 of epoch 3's 1000 samples failed", "max_sample_errors (0)", "missing: 1 sample"}},
		{"a fraction", &pb.SampleErrorLimit{Fraction: 0.5}, 4, []*pipeline.Batch{batch(2, corrupt(1)), batch(2, corrupt(2)), batch(2, corrupt(3))},
			[]string{"3 of epoch 3's 4 samples failed", "(0.5 of the epoch's samples)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := job.ErrorLimitOf(&pb.JobSpec{MaxSampleErrors: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			s := sampleErrors{limit: l}
			// Epoch 2 has all but the last batch; epoch 3 counts afresh.
			s.begin(&pb.JobInfo{Epoch: 2, Samples: tc.samples})
			for k, b := range tc.batches[:len(tc.batches)-1] {
				if err := s.add(k, b); err != nil {
					t.Fatalf("epoch 2, batch %d: %v", k, err)
				}
			}
			s.begin(&pb.JobInfo{Epoch: 3, Samples: tc.samples})
			for k, b := range tc.batches {
				if err = s.add(k, b); err != nil && k < len(tc.batches)-1 {
					t.Fatalf("epoch 3, batch %d: %v; want an error at the last batch at most", k, err)
				}
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("%v; want no error", err)
				}
				return
			}
			if !errors.Is(err, errSampleErrors) || codeOf(err) != codes.DataLoss {
				t.Fatalf("%v (code %v); want errSampleErrors, DATA_LOSS", err, codeOf(err))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q\ndoes not say %q", err, w)
				}
			}
		})
	}
	for _, f := range []float64{-0.1, 1.5} {
		if _, err := job.ErrorLimitOf(&pb.JobSpec{MaxSampleErrors: &pb.SampleErrorLimit{Fraction: f}}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("fraction %v: %v; want INVALID_ARGUMENT", f, err)
		}
	}
}

// TestAllBadFolder: a folder of files that are not images ends the
// trainer's job with DATA_LOSS at the first batch, under pad and drop
// alike, saying that every sample failed and why; no batch of no samples
// reaches it.
func TestAllBadFolder(t *testing.T) {
	root := t.TempDir()
	for i := range 12 {
		dir := filepath.Join(root, fmt.Sprintf("c%d", i%3))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d.jpg", i)), []byte("this is text, not a JPEG\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := startServer(t, Config{Datasets: map[string]string{"bad": root}, Workers: 2})
	for _, policy := range []pb.FailPolicy{pb.FailPolicy_FAIL_POLICY_PAD, pb.FailPolicy_FAIL_POLICY_DROP} {
		open := smallJob("bad", 4)
		open.Job.FailPolicy = policy
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		ep, err := readEpoch(e.feedStream(t, ctx, open))
		cancel()
		for _, b := range ep.batches {
			t.Errorf("%v: a batch reached the trainer: %d samples, %d errors", policy, b.hdr.GetShape()[0], len(b.hdr.GetErrors()))
		}
		t.Logf("%v: %v", policy, err)
		if status.Code(err) != codes.DataLoss || !strings.Contains(err.Error(), "every sample of batch 0 of epoch 0 failed (4 of 4)") ||
			!strings.Contains(err.Error(), "not decodable (corrupt): 4 samples") {
			t.Errorf("%v: %v; want DATA_LOSS saying every sample of batch 0 failed, and why", policy, err)
		}
	}
}
