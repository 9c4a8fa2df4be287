package work

import (
	"errors"
	"fmt"

	"github.com/stoker-dev/stoker/internal/ragged"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// takeFields puts a peer's batch's fields (a LeaseDone header's) into b,
// a batch of n samples of a job that asks for fs: every field the job
// asks for, in its order, a value for every sample, each within the
// job's bound, the samples without it ascending; the targets, when the
// job asks for them, from the header's ragged arrays (takeTargets). The
// values are protobuf's, taken as they are: a header's bytes are parsed
// into slices of their own, which nothing else holds.
func takeFields(fs *dataset.FieldSet, h *stokerv1.BatchHeader, n int, b *pipeline.Batch) error {
	got := h.GetFields()
	nf, t := fs.Len(), fs.TargetsAt()
	want := nf
	if t >= 0 {
		want--
	}
	if len(got) != want {
		return fmt.Errorf("a batch with %d fields, the job asks for %d", len(got), want)
	}
	if t < 0 && h.GetTargets() != nil {
		return errors.New("a batch with targets, the job asks for none")
	}
	b.SetFields(fs, n)
	names := fs.Names()
	for g, fv := range got {
		f := g
		if t >= 0 && g >= t {
			f++ // the targets are not among the header's fields
		}
		vs := fv.GetValues()
		if fv.GetName() != names[f] || len(vs) != n {
			return fmt.Errorf("field %d is %.64q with %d values: the job asks for %q of each of %d samples", g, fv.GetName(), len(vs), names[f], n)
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
	if t >= 0 {
		return takeTargets(fs, h.GetTargets(), n, b)
	}
	return nil
}

// takeTargets puts a peer's batch's targets, ragged arrays, into b's
// field FieldTargets, each sample's as the pipeline encodes it (what this
// server makes, and compares byte for byte where it makes the sample
// again), in the sample's own buffer; every offset and length checked
// first (ragged.Unpack).
func takeTargets(fs *dataset.FieldSet, bt *stokerv1.BatchTargets, n int, b *pipeline.Batch) error {
	nf, t := fs.Len(), fs.TargetsAt()
	return ragged.Unpack(bt, n, fs.Masks(), ragged.OverlapOf(fs), fs.TargetsMax(),
		func(i int) []byte { return b.Fields[i*nf+t].Data[:0] },
		func(i int, v []byte) { b.Fields[i*nf+t] = pipeline.Field{Data: v, Has: true} })
}
