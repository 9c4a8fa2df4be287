package job

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/lease"
)

// counted is a CPUSource that says what the test set.
type counted struct {
	cpu  time.Duration
	made uint64
}

func (c *counted) CPU() time.Duration { return c.cpu }
func (c *counted) Made() uint64       { return c.made }

// TestCheckMeasured: a job's samples as measured on the executor are held
// to the server's bound (Env.MaxMeasuredCPU): nil until measuredMin
// samples are made, nil up to the bound on average, past it
// RESOURCE_EXHAUSTED naming the measured mean, the bound's flag and the
// prediction, which is ErrMeasuredCost and lease.ErrJobFailed (its
// coordinator ends the job at once). Without a bound, or without a
// source, nothing is checked.
func TestCheckMeasured(t *testing.T) {
	const bound = 200 * time.Millisecond
	e := env()
	e.MaxMeasuredCPU = bound
	j, err := New(spec(0, 1), e, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.CheckMeasured(); err != nil {
		t.Fatalf("no source yet: %v", err)
	}
	src := &counted{}
	j.SetCPUSource(src)
	over := bound + time.Millisecond
	for _, tc := range []struct {
		made uint64
		mean time.Duration
		fail bool
	}{
		{0, 0, false},
		{measuredMin - 1, 10 * over, false}, // too few to believe
		{measuredMin, bound, false},
		{measuredMin, over, true},
		{100, over, true},
	} {
		src.made, src.cpu = tc.made, time.Duration(tc.made)*tc.mean
		err := j.CheckMeasured()
		if (err != nil) != tc.fail {
			t.Errorf("%d samples of %v: %v, want failed %v", tc.made, tc.mean, err, tc.fail)
			continue
		}
		if err == nil {
			continue
		}
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-measured-cpu") || !strings.Contains(err.Error(), "measured 201ms of CPU") || !strings.Contains(err.Error(), "predicted") {
			t.Errorf("the message: %v; want RESOURCE_EXHAUSTED naming the measured cost, the prediction and --max-measured-cpu", err)
		}
		if !errors.Is(err, ErrMeasuredCost) || !errors.Is(err, lease.ErrJobFailed) {
			t.Errorf("%v: not ErrMeasuredCost and lease.ErrJobFailed", err)
		}
	}
	unbounded, err := New(spec(0, 1), env(), Origin{})
	if err != nil {
		t.Fatal(err)
	}
	unbounded.SetCPUSource(&counted{cpu: time.Hour, made: 100})
	if err := unbounded.CheckMeasured(); err != nil {
		t.Errorf("no bound: %v", err)
	}
}
