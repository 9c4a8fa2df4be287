package job

// A job cut by vision tokens (JobSpec.batch_tokens): each rank's batch
// holds at most batch_tokens tokens, planned by plan.Pack from each
// sample's tokens (its image's size through the job's SmartResize or
// NaFlexResize), read once at open: from the dataset's manifest where it
// records the images' sizes (stoker index --sizes), else from each
// image's header (a dataset of at most maxHeaderScan samples). batch_size
// becomes the most samples a batch may then hold (the budget over the
// fewest tokens a sample has), which bounds its memory as any job's.

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/plan"
)

// maxHeaderScan is the most samples whose headers a job cut by vision
// tokens reads at open when the dataset has no sizes in a manifest.
const maxHeaderScan = 1 << 16

// maxTokenResumes bounds OpenJob.token_resumes' pairs: each is the whole
// epoch packed again at the stream's open (a client's DescribeJob too),
// so a chain of them costs that many packings of the dataset.
const maxTokenResumes = 16

// tokenPlan is a job's vision tokens, its stream's elastic resumes and
// its last epoch's packing.
type tokenPlan struct {
	budget  int64
	tokens  []int64
	errs    map[int]error
	resumed []plan.PackResume
	mu      sync.Mutex
	epoch   uint64
	resume  bool
	packing *plan.Packing
	err     error
}

// openTokens reads every sample's vision tokens for a job of batch_tokens
// and sets its batch_size to the most samples a batch may hold; resumes
// are the stream's elastic resumes of its first epoch (OpenJob
// token_resumes), checked against that epoch's packing.
func (j *Job) openTokens(spec *stokerv1.JobSpec, resumes []uint32) error {
	budget := int64(spec.GetBatchTokens())
	if budget < 1 {
		return status.Errorf(codes.InvalidArgument, "batch_tokens %d: want at least 1", spec.GetBatchTokens())
	}
	if _, err := j.t.VisionTokens(1, 1); err != nil {
		return status.Errorf(codes.InvalidArgument, "batch_tokens %d: %v", budget, err)
	}
	if j.mix != nil || j.repeats > 1 || j.shuffle.window > 0 {
		return status.Errorf(codes.Unimplemented, "batch_tokens with a mix, repeats or the block shuffle is not served: one dataset, shuffled globally or not")
	}
	known := j.knownSizes()
	n := j.ds.Len()
	if known == nil && n > maxHeaderScan {
		return status.Errorf(codes.FailedPrecondition, "batch_tokens: dataset %q has %d samples and no image sizes in a manifest: index it with `stoker index DIR --sizes` (and --annotations FILE where it has one; reading %d headers at every job's open is refused)", j.name, n, n)
	}
	// An item of the plan is a sample, or a record of several images
	// (records.go): its tokens are its images'.
	items, images := n, func(i int) (int, int) { return i, 1 }
	if j.groups != nil {
		items, images = j.groups.Records(), j.groups.Record
	}
	tp := &tokenPlan{budget: budget, tokens: make([]int64, items), errs: map[int]error{}}
	var buf []byte
	least := int64(-1)
	for i := range items {
		first, count := images(i)
		var t int64
		var err error
		for s := first; s < first+count && err == nil; s++ {
			var w, h int
			if known != nil {
				var ok bool
				if w, h, ok = known(s); !ok {
					err = errors.New("its size is unknown to the manifest (its header did not parse when indexed)")
				}
			} else if buf, err = j.ds.Read(s, buf[:0]); err == nil {
				w, h, err = pipeline.ImageSize(buf)
			}
			var ts int64
			if err == nil {
				ts, err = j.t.VisionTokensIn(w, h, count)
			}
			if err != nil && count > 1 {
				err = fmt.Errorf("its image %s: %w", j.ds.Name(s), err)
			}
			t += ts
		}
		switch {
		case err != nil:
			tp.errs[i], tp.tokens[i] = err, -1
		case t > budget:
			tp.errs[i], tp.tokens[i] = fmt.Errorf("%d vision tokens, over the batch's budget of %d (batch_tokens)", t, budget), t
		default:
			tp.tokens[i] = t
			if least < 0 || t < least {
				least = t
			}
		}
	}
	if least < 1 {
		return status.Errorf(codes.FailedPrecondition, "batch_tokens %d: no sample of dataset %q fits (%d of %d have no size or too many tokens)", budget, j.name, len(tp.errs), items)
	}
	spec.BatchSize = uint32(min(budget/least, int64(items), maxBatchSize))
	j.tokens = tp
	if _, err := tp.packed(j, 0, false); err != nil {
		return status.Errorf(codes.FailedPrecondition, "batch_tokens %d: %v", budget, err)
	}
	if len(resumes) == 0 {
		return nil
	}
	if len(resumes)%2 != 0 || len(resumes) > 2*maxTokenResumes {
		return status.Errorf(codes.InvalidArgument, "token_resumes: %d numbers; want pairs of (world size, steps), at most %d", len(resumes), maxTokenResumes)
	}
	for k := 0; k < len(resumes); k += 2 {
		if resumes[k] < 1 || int(resumes[k]) > len(tp.tokens) {
			return status.Errorf(codes.InvalidArgument, "token_resumes: resume %d has world size %d: want 1..%d (the samples)", k/2, resumes[k], len(tp.tokens))
		}
		tp.resumed = append(tp.resumed, plan.PackResume{World: int(resumes[k]), Steps: int(resumes[k+1])})
	}
	return nil
}

// CheckTokenResume says why the stream's elastic resumes (OpenJob
// token_resumes) cannot resume epoch, nil when they can or there are
// none: more steps than the worlds had, say.
func (j *Job) CheckTokenResume(epoch uint64) error {
	if j.tokens == nil || len(j.tokens.resumed) == 0 {
		return nil
	}
	if _, err := j.tokens.packed(j, epoch, true); err != nil {
		return status.Errorf(codes.InvalidArgument, "token_resumes: epoch %d: %v", epoch, err)
	}
	return nil
}

// packed is epoch's packing, after the stream's elastic resumes when
// resume (the last one computed is kept).
func (tp *tokenPlan) packed(j *Job, epoch uint64, resume bool) (*plan.Packing, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if (tp.packing != nil || tp.err != nil) && tp.epoch == epoch && tp.resume == resume {
		return tp.packing, tp.err
	}
	tp.epoch, tp.resume = epoch, resume
	var resumed []plan.PackResume
	if resume {
		resumed = tp.resumed
	}
	tp.packing, tp.err = plan.Pack(plan.PackSpec{
		Resumed: resumed,
		Size:    len(tp.tokens), Budget: tp.budget, Seed: j.spec.GetSeed(), Epoch: epoch, Shuffle: j.shuffle.on, World: j.world,
		Tokens: func(i int) (int64, error) {
			if err := tp.errs[i]; err != nil {
				return 0, err
			}
			return tp.tokens[i], nil
		},
	})
	return tp.packing, tp.err
}

// tokenEpoch is the rank's share of epoch's packing, after the stream's
// elastic resumes when resume (none when the epoch
// cannot be packed: the error is the log's), without the samples whose
// tokens are unknown or over the budget (TokenErrors: the packer deals
// them round as members of no tokens; here they are left out, so that no
// batch passes the budget).
func (j *Job) tokenEpoch(epoch uint64, resume bool) coord.Plan {
	p, err := j.tokens.packed(j, epoch, resume)
	if err != nil {
		return plan.New(plan.Spec{Size: 0, World: 1, BatchSize: 1})
	}
	r := p.Rank(j.rank)
	if len(j.tokens.errs) == 0 {
		return r
	}
	f := tokenBatches{batches: make([][]int64, r.Batches())}
	for k := range f.batches {
		for _, i := range r.Batch(k) {
			if j.tokens.errs[int(i)] == nil {
				f.batches[k] = append(f.batches[k], i)
				f.samples++
			}
		}
	}
	return f
}

// tokenBatches is a rank's packing without the samples left out.
type tokenBatches struct {
	batches [][]int64
	samples int
}

func (t tokenBatches) Batches() int        { return len(t.batches) }
func (t tokenBatches) Samples() int        { return t.samples }
func (t tokenBatches) Batch(k int) []int64 { return t.batches[k] }

// TokenErrors are the samples (or records: PlanItemName) of a job cut by
// vision tokens left out of every batch (no size, or more tokens than the
// budget), with why.
func (j *Job) TokenErrors() map[int]error {
	if j.tokens == nil {
		return nil
	}
	return j.tokens.errs
}

// knownSizes is the images' sizes from the dataset's manifest, where it
// has them (stoker index --sizes): a COCO or folder dataset's, or a
// conversation file's (its samples are not the manifest's); nil where it
// has none.
func (j *Job) knownSizes() func(i int) (w, h int, ok bool) {
	if md, ok := j.ds.(interface{ Manifest() *dataset.Manifest }); ok && md.Manifest() != nil && md.Manifest().HasImageSizes() {
		return md.Manifest().ImageSize
	} else if s, ok := j.ds.(interface {
		KnowsImageSizes() bool
		ImageSize(i int) (w, h int, ok bool)
	}); ok && s.KnowsImageSizes() {
		return s.ImageSize
	}
	return nil
}

// boundByData gives a job of a vision-language geometry over data of
// known sizes (a manifest's) the bound of its data, its largest sample,
// as max_size where the trainer gave none: a slot is then that sample's,
// not the geometry's own bound (AnyRes's largest pinpoint, 2304 x 2304;
// twice max_pixels), which counted every batch at up to 16 MB an image
// in the server's memory. The spec carries it to the peers.
func (j *Job) boundByData(spec *stokerv1.JobSpec) error {
	known := j.knownSizes()
	if known == nil || len(spec.GetTransform().GetMaxSize()) > 0 || spec.GetTransform().GetPreset() != "" {
		return nil
	}
	b, ok := j.t.KnownSizesBound(j.ds.Len(), known)
	if !ok {
		return nil
	}
	spec.Transform.MaxSize = []uint32{uint32(b[0]), uint32(b[1])}
	t, err := NewTransformData(spec.GetTransform(), spec.GetLayout(), 0, 0)
	if err != nil {
		return err
	}
	j.t = t
	return nil
}
