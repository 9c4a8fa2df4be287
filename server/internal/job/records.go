package job

// A job over a dataset of records of several images (a conversation
// file's, dataset.Grouped): its plans are of records, each record's
// images served whole, together, in its order, in one batch. batch_size
// (and batch_tokens' budget) counts records; a batch then holds at most
// batch_size times the dataset's most images a record (MaxSamples), which
// bounds its memory. A record one of whose images fails is left out of
// its batch whole (the fail policy is drop: no other image can take the
// place of one of a conversation's), and BatchHeader.records marks its
// other images -1, so that a trainer takes neither them nor its text.

import (
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
)

// groupedOf is ds as records of several images, or nil where every
// sample is a record of its own (a plan of samples then).
func groupedOf(ds dataset.Dataset) dataset.Grouped {
	if g, ok := ds.(dataset.Grouped); ok && g.Records() < ds.Len() {
		return g
	}
	return nil
}

// openRecords sets j's records where its dataset (or a part of its mix)
// has records of several images: what such a job may not ask for is
// refused, and its fail policy is drop. Its plan's items are records: a
// mix's shares and the block shuffle's shards are in records
// (shuffle.go), and so are repeats.
func (j *Job) openRecords(spec *stokerv1.JobSpec) error {
	if j.groups = groupedOf(j.ds); j.groups == nil {
		return nil
	}
	if spec.GetFailPolicy() == stokerv1.FailPolicy_FAIL_POLICY_PAD {
		return status.Errorf(codes.InvalidArgument, "fail_policy pad: dataset %q has records of several images, and no other image may take the place of one of a record's; "+
			"a record with a failed image is left out of its batch whole (fail_policy drop, its default)", j.name)
	}
	j.policy = pipeline.Drop
	return nil
}

// MaxSamples is the most samples (images) one batch of the job holds:
// batch_size, times the most images a record has where the dataset has
// records of several.
func (j *Job) MaxSamples() int { return j.slots }

// setSlots sets MaxSamples from batch_size (bs), refusing a batch past
// maxBatchSize images.
func (j *Job) setSlots(bs int) error {
	j.slots = bs
	if j.groups == nil {
		return nil
	}
	most := j.groups.MostImages()
	if bs*most > maxBatchSize {
		return status.Errorf(codes.InvalidArgument, "batch_size %d: dataset %q has records of up to %d images, and a batch of %d records may hold %d images, over the limit of %d",
			bs, j.name, most, bs, bs*most, maxBatchSize)
	}
	j.slots = bs * most
	return nil
}

// PlanItemName names item i of the job's plans in messages: a sample's
// name, or a record's first image's.
func (j *Job) PlanItemName(i int) string {
	if j.groups != nil {
		first, _ := j.groups.Record(i)
		return j.ds.Name(first)
	}
	return j.ds.Name(i)
}

// recordPlan is a plan of records as one of their images: each record's
// images in its order, the records in the plan's.
type recordPlan struct {
	p       coord.Plan
	g       dataset.Grouped
	samples int
}

// recordsOf is p, a plan of g's records, as a plan of their images.
func recordsOf(p coord.Plan, g dataset.Grouped) coord.Plan {
	r := recordPlan{p: p, g: g}
	for k := range p.Batches() {
		for _, rec := range p.Batch(k) {
			_, n := g.Record(int(rec))
			r.samples += n
		}
	}
	return r
}

func (r recordPlan) Batches() int { return r.p.Batches() }
func (r recordPlan) Samples() int { return r.samples }

// Batch is batch k's records' images.
func (r recordPlan) Batch(k int) []int64 {
	recs := r.p.Batch(k)
	out := make([]int64, 0, len(recs))
	for _, rec := range recs {
		first, n := r.g.Record(int(rec))
		for i := range n {
			out = append(out, int64(first+i))
		}
	}
	return out
}

// recordsHeader is BatchHeader.records of a batch whose samples are
// indices (after the fail policy dropped its failed ones, errs): each
// image's record, or -1 for the images of a record that is not whole in
// the batch (one of its images failed, or is missing).
func recordsHeader(g dataset.Grouped, size int, indices []int64, errs []pipeline.SampleError) []int64 {
	failed := map[int]bool{}
	for _, e := range errs {
		if e.Index >= 0 && e.Index < int64(size) {
			failed[g.RecordOf(int(e.Index))] = true
		}
	}
	out := make([]int64, len(indices))
	for i := 0; i < len(indices); {
		if indices[i] < 0 || indices[i] >= int64(size) {
			out[i] = -1
			i++
			continue
		}
		rec := g.RecordOf(int(indices[i]))
		first, n := g.Record(rec)
		whole := !failed[rec] && i+n <= len(indices)
		for k := 0; whole && k < n; k++ {
			whole = indices[i+k] == int64(first+k)
		}
		if !whole {
			out[i] = -1
			i++
			continue
		}
		for k := range n {
			out[i+k] = int64(rec)
		}
		i += n
	}
	return out
}

// viewsForRecords leaves out of spec's views the groups made only for
// images of records of several (ViewGroup.several_images: OneVision's
// square) where the job's data has none, so that a job over single
// images does not make them; a transform of such groups alone is refused,
// and so, over records of several, is one that leaves some image no view
// (the executor makes each image the views of its record's kind alone:
// Transform.SkipViews).
func (j *Job) viewsForRecords(spec *stokerv1.JobSpec) error {
	views := spec.GetTransform().GetViews()
	if j.groups != nil {
		// Each image gets a view: one of a record of several (not
		// one_image's), and one of a record of one (not several_images').
		one := false
		for r := range j.groups.Records() {
			if _, n := j.groups.Record(r); n == 1 {
				one = true
				break
			}
		}
		for _, c := range []struct {
			what string
			has  bool
			not  func(*stokerv1.ViewGroup) bool
		}{{"several images", true, (*stokerv1.ViewGroup).GetOneImage}, {"one image", one, (*stokerv1.ViewGroup).GetSeveralImages}} {
			if c.has && len(views) > 0 && !slices.ContainsFunc(views, func(g *stokerv1.ViewGroup) bool { return !c.not(g) }) {
				return status.Errorf(codes.InvalidArgument, "transform: dataset %q has records of %s, whose images would get no view: "+
					"give a view group for them (several_images, one_image, or neither: every image)", j.name, c.what)
			}
		}
		return nil
	}
	if !slices.ContainsFunc(views, (*stokerv1.ViewGroup).GetSeveralImages) {
		return nil
	}
	kept := slices.DeleteFunc(slices.Clone(views), (*stokerv1.ViewGroup).GetSeveralImages)
	if len(kept) == 0 {
		return status.Errorf(codes.InvalidArgument, "transform: every view group is made only for images of records of several (several_images), and dataset %q has none", j.name)
	}
	spec.Transform.Views = kept
	return nil
}
