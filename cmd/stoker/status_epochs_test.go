package main

import (
	"context"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestEpochWatch: a line for an epoch once the job's epoch moves on, from
// the last status seen in it; one for a job's last epoch once it is gone,
// and for those still listed when the server stops; the workers needed
// are the makers recommended less the coordinator's own executor.
func TestEpochWatch(t *testing.T) {
	job := func(id string, epoch uint64, rec float64, advice string, makers ...string) *stokerv1.JobStatus {
		j := &stokerv1.JobStatus{Id: id, Epoch: epoch, WorkersRecommended: rec, Advice: advice}
		for _, m := range makers {
			name, down := strings.CutSuffix(m, " down")
			j.Makers = append(j.Makers, &stokerv1.MakerStatus{Name: name, Ready: !down})
		}
		return j
	}
	status := func(jobs ...*stokerv1.JobStatus) *stokerv1.StatusResponse {
		return &stokerv1.StatusResponse{Jobs: jobs}
	}
	var w epochWatch
	steps := []struct {
		st   *stokerv1.StatusResponse
		want []string
	}{
		{status(job("a", 0, math.NaN(), "no makers measured yet", "local")), nil},
		{status(job("a", 0, 3, "fine", "local", "cpu01:7070", "cpu02:7070"), job("b", 4, 2, "needs about 1 more workers", "cpu01:7070", "cpu02:7070 down")), nil},
		{status(job("a", 1, 4, "fine", "local", "cpu01:7070", "cpu02:7070"), job("b", 4, 2, "x", "cpu01:7070")), []string{
			"stoker: job a epoch 0: this job would have needed 2 worker nodes (3 makers recommended, the coordinator's own cores one of them; 2 workers were ready; fine)",
		}},
		{status(job("b", 6, 1, "fine", "cpu01:7070")), []string{
			"stoker: job b epoch 4: this job would have needed 2 worker nodes (2 makers recommended; 1 workers were ready; x)",
			"stoker: job a epoch 1, its last: this job would have needed 3 worker nodes (4 makers recommended, the coordinator's own cores one of them; 2 workers were ready; fine)",
		}},
		{status(job("c", 0, math.NaN(), "no makers measured yet", "local"), job("b", 6, 0.5, "fine", "local", "cpu01:7070")), nil},
	}
	for i, s := range steps {
		if got := w.observe(s.st); strings.Join(got, "\n") != strings.Join(s.want, "\n") {
			t.Errorf("step %d: lines\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
	}
	want := []string{
		"stoker: job b epoch 6, its last: this job would have needed 0 worker nodes (1 makers recommended, the coordinator's own cores one of them; 1 workers were ready; fine)",
		"stoker: job c epoch 0, its last: no advice yet (no makers measured yet); 0 workers were ready",
	}
	if got := w.finish(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("finish: lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// lockedBuffer is a strings.Builder safe for a writer and a reader; wrote
// (size 1) says that something was written since the reader last looked.
type lockedBuffer struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{}
}

func newLockedBuffer() *lockedBuffer { return &lockedBuffer{wrote: make(chan struct{}, 1)} }

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStatusEpochs follows a real server while a trainer takes two
// epochs and leaves: a line for its first epoch, one for its last, and
// followEpochs returns once the server is gone.
func TestStatusEpochs(t *testing.T) {
	_, c, stop := petsServer(t, 16)
	// The test's deadline only turns a hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := newLockedBuffer()
	done := make(chan error, 1)
	// A Status call that takes its timeout ends the follower as if the
	// server were gone: generous, as a loaded machine may answer slowly
	// (a stopped server refuses the call at once).
	go func() { done <- followEpochs(ctx, out, c, 20*time.Millisecond, 30*time.Second) }()
	waitFor := func(what string) {
		t.Helper()
		for !strings.Contains(out.String(), what) {
			select {
			case <-ctx.Done():
				t.Fatalf("no %q before the test's deadline:\n%s", what, out.String())
			case err := <-done:
				t.Fatalf("followEpochs returned %v before %q:\n%s", err, what, out.String())
			case <-out.wrote:
			}
		}
	}

	// 16 samples in batches of 4: four batches an epoch, of 0.3 s steps,
	// so that the server publishes a job's status (every half second) a
	// few times an epoch. The trainer steps until the follower has seen an
	// epoch end, then leaves: the steps pace it, nothing is measured by
	// them (on a slow machine an epoch's status may be missed, and a later
	// epoch's end gives the line).
	l := c.Loader(&stokerv1.JobSpec{Dataset: "pets", Transform: &stokerv1.TransformSpec{Preset: "imagenet-eval"}, BatchSize: 4, Seed: 3})
	for !strings.Contains(out.String(), "stoker: job ") {
		b, err := l.Next(ctx)
		if err != nil {
			t.Fatalf("%v; follower's output:\n%s", err, out.String())
		}
		b.Release()
		time.Sleep(300 * time.Millisecond) // a step
	}
	l.Close()
	waitFor(", its last: ")
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("followEpochs: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("followEpochs did not return after the server stopped:\n%s", out.String())
	}
	line := regexp.MustCompile(`^stoker: job pets-r0-\S+ epoch \d+(, its last)?: (this job would have needed \d+ worker nodes \(\d+ makers recommended, the coordinator's own cores one of them; 0 workers were ready; .+\)|no advice yet \(.+\); 0 workers were ready)$`)
	t.Logf("stoker status --epochs:\n%s", out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("line %q: not the form expected", l)
		}
	}
	if len(lines) < 2 || strings.Contains(lines[0], ", its last: ") || !strings.Contains(lines[len(lines)-1], ", its last: ") {
		t.Errorf("want a line for an epoch's end, then one for the last epoch:\n%s", out.String())
	}
}
