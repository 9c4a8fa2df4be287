package job

import (
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/lease"
)

// The cost model predicts a sample's CPU before a job opens (Cost); what
// its samples measure on the executor is the truth, and the schedule
// charges that: a queue's samples are charged their measured CPU, its
// estimate follows their mean (its first measurement replaces the
// prediction), so a job the model under-predicted gets its share of the
// cores by what it really costs, and one whose samples measure long is a
// heavy queue (pipeline's heavyLimit) that leaves the light jobs a
// worker. Past a bound (Env.MaxMeasuredCPU, --max-measured-cpu: four
// times --max-sample-cpu by default) it does not run on: the job fails
// (CheckMeasured).
//
// measuredMin is how many samples the mean is taken over before it is
// believed: one sample's cost varies with its photo and its draws.
const measuredMin = 8

// DefaultMeasuredBound is the bound's default over --max-sample-cpu: the
// limit bounds the worst sample's prediction and the bound the measured
// mean, so four times it is samples well past it, not a few photos
// larger than the rest nor the cost model's usual error (it
// under-predicts blurs and AugMix 1.3-3x: issue 66's blur, predicted 184
// ms, measured 471 ms).
const DefaultMeasuredBound = 4

// ErrMeasuredCost marks the failure of a job whose samples measured past
// the server's bound: a status error (RESOURCE_EXHAUSTED) that is also
// lease.ErrJobFailed, so that its coordinator ends the job with it at
// once rather than leasing the batch again.
var ErrMeasuredCost = errors.New("the job's samples measured past the server's bound on their CPU")

type measuredErr struct{ st *status.Status }

func (e *measuredErr) Error() string              { return e.st.Err().Error() }
func (e *measuredErr) GRPCStatus() *status.Status { return e.st }
func (e *measuredErr) Is(target error) bool {
	return target == ErrMeasuredCost || target == lease.ErrJobFailed
}

// CheckMeasured is nil while the job's samples, as measured on this
// server's executor (SetCPUSource), cost within the server's bound
// (Env.MaxMeasuredCPU) on average, or fewer than measuredMin were made;
// past it, ErrMeasuredCost: RESOURCE_EXHAUSTED saying what was measured,
// over how many samples, the bound and its flag, and what the cost
// model had predicted. The job's maker asks it before each batch, so a
// job the cost model under-predicted fails within its window's batches
// of the bound rather than running on.
func (j *Job) CheckMeasured() error {
	if j.maxMeasured <= 0 {
		return nil
	}
	p := j.cpuSrc.Load()
	if p == nil {
		return nil
	}
	n := (*p).Made()
	if n < measuredMin {
		return nil
	}
	mean := (*p).CPU() / time.Duration(n)
	if mean <= j.maxMeasured {
		return nil
	}
	return &measuredErr{status.Newf(codes.ResourceExhausted, "the job's samples measured %v of CPU each on average (%d samples made), over this server's bound of %v (--max-measured-cpu); "+
		"the cost model had predicted %v on average, %v at worst (admitted under --max-sample-cpu): make the transform cheaper (most of it is %s) or ask the server's operator to raise --max-measured-cpu",
		costRound(mean), n, j.maxMeasured, costRound(j.cost.Mean), costRound(j.cost.Max), j.cost.Dominant)}
}
