package server

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/errs"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
)

// errSampleErrors ends a job whose samples failed past what it tolerates:
// a batch every sample of which failed (it would reach the trainer as a
// tensor of no samples), or more failed samples in an epoch than the
// job's max_sample_errors. Retrying would fail the same way: the files
// are what they are.
var errSampleErrors = errors.New("sample errors")

// sampleErrors counts a stream's failed samples, epoch by epoch, and
// fails the job (errSampleErrors) at a batch that failed whole or once an
// epoch's failures pass the job's limit. Only the send loop uses it.
type sampleErrors struct {
	limit   job.ErrorLimit
	epoch   uint64
	samples uint64 // the epoch's samples on this stream (JobInfo.samples)
	failed  uint64
	causes  map[string]*cause
}

// cause is one kind of failure: how many samples it hit, and the first.
type cause struct {
	n       uint64
	example pipeline.SampleError
}

// begin starts counting the epoch info opens.
func (s *sampleErrors) begin(info *stokerv1.JobInfo) {
	s.epoch, s.samples, s.failed = info.GetEpoch(), info.GetSamples(), 0
	clear(s.causes)
}

// add counts batch k of the epoch, b, before it is sent: an error wrapping
// errSampleErrors when it must not be.
func (s *sampleErrors) add(k int, b *pipeline.Batch) error {
	if len(b.Errors) == 0 {
		return nil
	}
	if s.causes == nil {
		s.causes = map[string]*cause{}
	}
	batch := map[string]*cause{}
	for _, e := range b.Errors {
		c := causeOf(e)
		for _, m := range []map[string]*cause{s.causes, batch} {
			if m[c] == nil {
				m[c] = &cause{example: e}
			}
			m[c].n++
		}
	}
	s.failed += uint64(len(b.Errors))
	if b.N == 0 {
		return fmt.Errorf("%w: every sample of batch %d of epoch %d failed (%d of %d): %s; the job ends rather than hand the trainer a batch of no samples. "+
			"Is the dataset what it should be? (the server's log names every bad file once)",
			errSampleErrors, k, s.epoch, len(b.Errors), len(b.Errors), causes(batch))
	}
	if bound := s.limit.Bound(s.samples); s.failed > bound {
		return fmt.Errorf("%w: %d of epoch %d's %d samples failed, more than the job's max_sample_errors (%s): %s. "+
			"Fix or remove those files (the server's log names each once), or raise max_sample_errors",
			errSampleErrors, s.failed, s.epoch, s.samples, s.limit, causes(s.causes))
	}
	return nil
}

// causes lists m's causes, the commonest first, each with how many samples
// it hit and its first.
func causes(m map[string]*cause) string {
	names := make([]string, 0, len(m))
	for c := range m {
		names = append(names, c)
	}
	sort.Slice(names, func(i, j int) bool {
		if m[names[i]].n != m[names[j]].n {
			return m[names[i]].n > m[names[j]].n
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	for i, c := range names {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d other causes", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		e := m[c].example
		n := fmt.Sprintf("%d samples", m[c].n)
		if m[c].n == 1 {
			n = "1 sample"
		}
		fmt.Fprintf(&b, "%s: %s (e.g. sample %d, %s: %s)", c, n, e.Index, job.Truncate(e.Name, 200), job.Truncate(e.Reason, 300))
	}
	return b.String()
}

// sampleCauses are what a failed sample's reason may say, most specific
// first, and the cause each names. A peer's failures come as reasons
// alone, so the reason (err.Error()) is what is read, for every sample
// alike.
var sampleCauses = []struct{ says, cause string }{
	{"changed since", "changed since indexed"},
	{"bytes a field (max_field_bytes)", "a field over max_field_bytes"},
	{"bytes (max_targets_bytes)", "targets with masks over max_targets_bytes"},
	{"has no image", "no image (only other members)"},
	{errs.TooLarge.Error(), "too large"},
	{errs.Corrupt.Error(), "not decodable (corrupt)"},
	{errs.Unsupported.Error(), "unsupported"},
	{"no such file", "missing"},
	{"no such object", "missing"},
	{"permission denied", "unreadable (permission denied)"},
}

// causeOf is what made e fail, in a few words.
func causeOf(e pipeline.SampleError) string {
	for _, c := range sampleCauses {
		if strings.Contains(e.Reason, c.says) {
			return c.cause
		}
	}
	return "other errors"
}
