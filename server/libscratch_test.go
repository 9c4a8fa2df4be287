package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// libPhotos is an ImageFolder of one class in a temporary directory: a
// progressive photo (libjpeg holds its coefficients whole while it
// decodes it: about 680 KB at 367x466) and three baseline ones (about
// 90 KB of libjpeg's each); each file's bytes and what the worker keeps
// for it at most (its read buffer, grown to it and a quarter, and the C
// decoder's bound, codec.Header.LibBytes).
func libPhotos(t *testing.T) (dir, prog string, keep map[string]int64, lib map[string]int64) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep, lib = map[string]int64{}, map[string]int64{}
	for src, dst := range map[string]string{
		"bythewater/000001-progressive.jpg": "a/big-progressive.jpg",
		"bythewater/000001.jpg":             "a/b1.jpg",
		"bythewater/000019.jpg":             "a/b2.jpg",
		"autumn/000000.jpg":                 "a/b3.jpg",
	} {
		data, err := os.ReadFile(filepath.Join("../testdata/photos", src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), data, 0o644); err != nil {
			t.Fatal(err)
		}
		hd, err := codec.ParseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		lib[dst] = hd.LibBytes()
		keep[dst] = int64(len(data)+len(data)/4) + lib[dst]
		if hd.Progressive {
			prog = dst
		}
	}
	return dir, prog, keep, lib
}

// TestScratchLibProgressive: the C decoder's own memory (a progressive
// JPEG's coefficients, whole) and the files' bytes are reserved in the
// memory budget with each sample's scratch, from its header and its
// file's size, before it is decoded: on a one-worker server whose budget
// has room beside its batch buffers for a baseline photo's (its read
// buffer and libjpeg's rows) but not for the progressive one's
// coefficients, that sample alone fails, naming its file, its size and
// --memory-budget, the others are made, the server makes the next epoch
// alike, and once the job has ended the budget's gauges
// (stoker_sample_scratch_bytes, stoker_memory_budget_in_use_bytes) are
// back to what they were; with room for the progressive photo too, every
// sample is made.
func TestScratchLibProgressive(t *testing.T) {
	dir, prog, keep, lib := libPhotos(t)
	var baseKeep, files, libs int64
	for name, k := range keep {
		if name != prog {
			baseKeep = max(baseKeep, k)
		}
		files = max(files, k-lib[name])
		libs = max(libs, lib[name])
	}
	if lib[prog] < 4*baseKeep {
		t.Fatalf("the progressive photo's bound %d is not well above a baseline one's scratch %d: the test would not tell them apart", lib[prog], baseKeep)
	}
	job := smallJob("big", 4)
	job.Job.Shuffle = false
	cfg := Config{Datasets: map[string]string{"big": dir}, Workers: 1}
	for _, c := range []struct {
		name string
		room int64 // beside the job's batch buffers
		fail bool
	}{
		{"refused", 2 * baseKeep, true},
		{"fits", files + libs + 64<<10, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			cfg.MemoryBudget, _ = budgetFor(t, cfg, job, 0, 0, func(int64) int64 { return c.room })
			e := startServer(t, cfg)
			base := e.srv.budget.InUse()
			for epoch := range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
				ep, err := readEpoch(e.feedStream(t, ctx, job))
				cancel()
				if err != nil {
					t.Fatalf("epoch %d: %v", epoch, err)
				}
				var errs []*pb.SampleError
				for _, b := range ep.batches {
					errs = append(errs, b.hdr.GetErrors()...)
				}
				if !c.fail {
					if len(errs) != 0 {
						t.Fatalf("epoch %d: sample errors %v, want none (room %d)", epoch, errs, c.room)
					}
				} else {
					if len(errs) != 1 || errs[0].GetName() != prog {
						t.Fatalf("epoch %d: sample errors %v; want the progressive photo's alone (%s)", epoch, errs, prog)
					}
					t.Logf("epoch %d: %s: %s", epoch, errs[0].GetName(), errs[0].GetReason())
					for _, want := range []string{"memory budget", "C decoder", "367x466", "bytes", "--memory-budget"} {
						if !strings.Contains(errs[0].GetReason(), want) {
							t.Errorf("error %q does not say %q", errs[0].GetReason(), want)
						}
					}
				}
				waitUntilState(t, "the scratch and the budget back to what they held before", func() string {
					return fmt.Sprintf("scratch %v, in use %v (%d before)", gauge(t, e.reg, "stoker_sample_scratch_bytes"), gauge(t, e.reg, "stoker_memory_budget_in_use_bytes"), base)
				}, func() bool {
					return gauge(t, e.reg, "stoker_sample_scratch_bytes") == 0 && gauge(t, e.reg, "stoker_memory_budget_in_use_bytes") == float64(base)
				})
			}
		})
	}
}
