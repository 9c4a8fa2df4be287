package job

import (
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/batch"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// A job's fields (JobSpec.fields) travel in each batch's header, beside
// its pixels, one FieldValues a field. What a batch's fields may take is
// bounded before the job starts: batch_size x fields x max_field_bytes
// is at most maxBatchFieldBytes, and a sample with a larger field fails
// by itself, named, before the field is read. So a header stays within
// what the clients take (stoker's raise gRPC's receive limit for it), the
// bound is the same on every maker (a peer's batch is the bytes this
// server's would be), and the memory budget counts each batch buffer's
// fields at the bound (Job.BatchBytes), whatever the dataset holds.
const (
	// defaultMaxFieldBytes is a field's bound when the job sets none: a
	// caption or a sample's metadata (LAION's .json is about 1 KB).
	defaultMaxFieldBytes = 16 << 10
	// maxBatchFieldBytes bounds a batch's fields in all.
	maxBatchFieldBytes = 32 << 20
)

// fieldsOf validates spec's fields against ds (served as name) for
// batches of bs samples.
func fieldsOf(spec *stokerv1.JobSpec, name string, ds pipeline.Dataset, bs int) (*pipeline.FieldSet, error) {
	names := spec.GetFields()
	if slices.Contains(names, pipeline.FieldTargets) {
		return nil, status.Errorf(codes.InvalidArgument, "field %q: ask for targets with targets=true (JobSpec.targets), which checks the transform", pipeline.FieldTargets)
	}
	if spec.GetTargets() {
		// The targets travel as a field, last, bounded as the others.
		names = append(slices.Clip(names), pipeline.FieldTargets)
	}
	if len(names) == 0 {
		if spec.GetMaxFieldBytes() != 0 {
			return nil, status.Errorf(codes.InvalidArgument, "max_field_bytes %d without fields: it bounds the fields a job asks for", spec.GetMaxFieldBytes())
		}
		return nil, nil
	}
	if len(names) > pipeline.MaxFields {
		return nil, status.Errorf(codes.InvalidArgument, "%d fields: the limit is %d", len(names), pipeline.MaxFields)
	}
	most := int64(maxBatchFieldBytes) / (int64(bs) * int64(len(names)))
	per := int64(spec.GetMaxFieldBytes())
	switch {
	case per == 0:
		per = min(defaultMaxFieldBytes, most)
	case per > most:
		return nil, status.Errorf(codes.InvalidArgument, "max_field_bytes %d: a batch of %d samples with %d fields may then take %d bytes of fields, over the bound of %d; "+
			"at this batch size and these fields, max_field_bytes may be at most %d (a sample with a larger field fails by itself)",
			per, bs, len(names), per*int64(bs)*int64(len(names)), maxBatchFieldBytes, most)
	}
	if per < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "fields with batch_size %d: %d fields of %d samples leave less than a byte each within a batch's bound of %d bytes",
			bs, len(names), bs, maxBatchFieldBytes)
	}
	fs, err := pipeline.NewFieldSet(ds, names, per, name)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "dataset %q: %s", Truncate(name, 64), strings.TrimPrefix(err.Error(), pipeline.ErrUnsupported.Error()+": "))
	}
	return fs, nil
}

// fieldBytes bounds what one batch's fields hold.
func (j *Job) fieldBytes() int64 {
	fs := j.fields
	return int64(j.spec.GetBatchSize()) * int64(fs.Len()) * fs.MaxBytes()
}

// fieldValues is b's fields for its header, field by field: each value
// b's own bytes, not copied.
func fieldValues(b *pipeline.Batch) []*stokerv1.FieldValues {
	fs := b.FieldSet
	nf := batch.FieldCount(fs)
	if nf == 0 || len(b.Fields) != b.N*nf {
		return nil
	}
	out := make([]*stokerv1.FieldValues, nf)
	for f, name := range fs.Names() {
		v := &stokerv1.FieldValues{Name: name, Values: make([][]byte, b.N)}
		for i := range b.N {
			fv := &b.Fields[i*nf+f]
			v.Values[i] = fv.Data
			if !fv.Has {
				v.Missing = append(v.Missing, uint32(i))
			}
		}
		out[f] = v
	}
	return out
}

// FieldNames is the fields ds's samples may have.
func FieldNames(ds pipeline.Dataset) []string {
	if fd, ok := ds.(pipeline.Fielded); ok {
		return fd.FieldNames()
	}
	return []string{pipeline.FieldSource}
}
