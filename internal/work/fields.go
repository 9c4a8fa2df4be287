package work

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// takeFields puts a peer's batch's fields (a LeaseDone header's) into b,
// a batch of n samples of a job that asks for fs: every field the job
// asks for, in its order, a value for every sample, each within the
// job's bound, the samples without it ascending. The values are
// protobuf's, taken as they are: a header's bytes are parsed into slices
// of their own, which nothing else holds.
func takeFields(fs *pipeline.FieldSet, got []*stokerv1.FieldValues, n int, b *pipeline.Batch) error {
	nf := fs.Len()
	if len(got) != nf {
		return fmt.Errorf("a batch with %d fields, the job asks for %d", len(got), nf)
	}
	b.SetFields(fs, n)
	names := fs.Names()
	for f, fv := range got {
		vs := fv.GetValues()
		if fv.GetName() != names[f] || len(vs) != n {
			return fmt.Errorf("field %d is %.64q with %d values: the job asks for %q of each of %d samples", f, fv.GetName(), len(vs), names[f], n)
		}
		for i, v := range vs {
			if int64(len(v)) > fs.MaxBytes() {
				return fmt.Errorf("sample %d's field %q is %d bytes, over the job's bound of %d", i, names[f], len(v), fs.MaxBytes())
			}
			b.Fields[i*nf+f] = pipeline.Field{Data: v, Has: true}
		}
		prev := -1
		for _, m := range fv.GetMissing() {
			if int(m) <= prev || int(m) >= n || len(vs[m]) != 0 {
				return fmt.Errorf("field %q: sample %d without it (after %d, of %d samples)", names[f], m, prev, n)
			}
			prev = int(m)
			b.Fields[int(m)*nf+f].Has = false
		}
	}
	return nil
}
