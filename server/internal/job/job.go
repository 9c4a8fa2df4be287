package job

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/plan"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Job is a validated JobSpec: what every batch of every epoch of the job is
// made from. It is the same on a coordinator and on the workers it leases
// batches to. Nothing writes it after New made it: coordinators, makers
// and the verifier share it without a lock.
type Job struct {
	spec *stokerv1.JobSpec
	name string
	ds   dataset.Dataset
	t    *transform.Transform
	// cost is t's predicted CPU per sample (pipeline's cost model);
	// cpuSrc measures it (SetCPUSource).
	cost   transform.Cost
	cpuSrc atomic.Pointer[CPUSource]
	// maxMeasured is the server's bound on its samples' measured mean
	// CPU (Env.MaxMeasuredCPU; 0: none): CheckMeasured.
	maxMeasured time.Duration
	// cpuWeight is its weight in the executor's CPU share.
	cpuWeight float64
	policy    pipeline.FailPolicy
	// errLimit is how many samples of an epoch may fail (JobSpec
	// max_sample_errors).
	errLimit ErrorLimit
	rank     int
	world    int
	dtype    stokerv1.Dtype
	// shuffle is how the epochs are ordered; epochWorld is the stream's
	// OpenJob.epoch_world_size (the block shuffle's spans in the first
	// epoch of an elastic resume; 0: world).
	shuffle    shuffleChoice
	epochWorld int
	// client is Origin.Client.
	client string
	// repeats is JobSpec.repeats: every sample that many times an epoch
	// (repeated augmentation); 1: off.
	repeats int
	// fields are the fields the job sends with its samples (JobSpec
	// fields), nil for none.
	fields *dataset.FieldSet
	// mix is each dataset's share of an epoch when ds is a mix
	// (JobSpec.mix); nil for one dataset.
	mix []plan.MixShare
	// tokens: a job cut by vision tokens (batch_tokens; tokens.go), nil else.
	tokens *tokenPlan
	// groups: the dataset's records of several images, the plans' items
	// (records.go); nil where every sample is its own. slots is the most
	// samples a batch holds (MaxSamples).
	groups dataset.Grouped
	slots  int
	// id names the job in queue names and metrics (its coordinator's
	// name, or the Work stream's and its job id).
	id string
}

// Bounds of what a job may ask for.
const (
	// maxDatasetName bounds a dataset name a client may send (a preset's
	// name: opspec.MaxPresetName).
	maxDatasetName = 256
	// maxBatchSize is the largest batch_size a job may ask for.
	maxBatchSize = 65536
)

// MaxChunkBytes is the largest Chunk the server sends (JobInfo's
// max_chunk_bytes): batches go out in pieces of at most this many bytes
// (Python's grpcio slows down sharply on larger messages). 1 KiB under
// 4 MiB, so that a chunk with its framing fits the 4 MiB receive limit
// gRPC clients default to.
const MaxChunkBytes = 4<<20 - 1<<10

// maxSpecBytes bounds a job spec's known fields, as the server keeps it:
// a real one is a few hundred bytes (a dataset name, a preset or a few
// ops); the client's message may be larger only by what is dropped.
const maxSpecBytes = 16 << 10

// maxTraceBytes bounds a batch's traces (JobSpec.trace), so that its header
// stays well within any gRPC client's 4 MiB receive limit.
const maxTraceBytes = 3 << 20

// Origin is what the stream that opens a job says of it, given to New so
// that a job is never written after it is made: the name it runs under,
// and the world its epoch began with.
type Origin struct {
	// ID names the job in queue names and metrics: a Work job's name as
	// its coordinator gave it. Empty: Stream's (below), or none.
	ID string
	// Stream is a Feed stream's id: the job's id is its dataset's name,
	// its rank and the stream's id.
	Stream string
	// EpochWorld is the stream's OpenJob.epoch_world_size.
	EpochWorld int
	// TokenResumes is the stream's OpenJob.token_resumes (pairs of world
	// size and steps), for a job cut by vision tokens.
	TokenResumes []uint32
	// Client is who opened a Feed job (rpc.ClientID): the executor
	// shares its cores between clients first, then among each client's
	// jobs. Empty: one client of its own per job.
	Client string
}

// Env is what New checks a spec against: the server's datasets and its
// limit on a batch.
type Env struct {
	// Datasets are the server's datasets by name; Names, their names
	// sorted, for messages.
	Datasets map[string]dataset.Dataset
	Names    []string
	// MaxBatchBytes is the server's --max-batch-bytes.
	MaxBatchBytes int64
	// MaxCPUWeight is the server's --max-cpu-weight: a job's cpu_weight
	// is clamped to [1/MaxCPUWeight, MaxCPUWeight]; 0: 1.
	MaxCPUWeight float64
	// MaxSampleCPU is the server's --max-sample-cpu: the most CPU a
	// job's worst sample may be predicted to cost (Transform.Cost's Max);
	// 0: no limit.
	MaxSampleCPU time.Duration
	// MaxMeasuredCPU is the server's --max-measured-cpu: the most CPU a
	// job's samples may measure on average on this server's executor
	// before the job is failed (CheckMeasured); 0: no bound.
	MaxMeasuredCPU time.Duration
	// Decode is the server's --decode: how a job that leaves
	// JobSpec.decode unspecified decodes its JPEGs.
	Decode transform.DecodeMode
}

// New validates spec against env's datasets and limits. Its errors are
// status errors whose messages say what was asked and what is allowed,
// but for a transform the pipeline refuses: that one is the pipeline's
// error, which the server maps to a status by its error table. A spec that names a fingerprint must match the dataset's. The
// job keeps a copy of spec's known fields alone: fields this server does
// not know (a newer client's, or padding a hostile one sends) are neither
// kept nor forwarded to peers, which would make the batch by them.
func New(spec *stokerv1.JobSpec, env Env, o Origin) (*Job, error) {
	if spec == nil {
		return nil, status.Error(codes.InvalidArgument, "no job spec")
	}
	if err := opspec.Retired(spec.GetTransform()); err != nil {
		return nil, status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), errs.Unsupported.Error()+": "))
	}
	spec, err := knownFields(spec)
	if err != nil {
		return nil, err
	}
	j := &Job{spec: spec, name: spec.GetDataset(), id: o.ID, epochWorld: o.EpochWorld, client: o.Client}
	if len(j.name) > maxDatasetName {
		return nil, status.Errorf(codes.InvalidArgument, "dataset name of %d bytes: the limit is %d", len(j.name), maxDatasetName)
	}
	if len(spec.GetMix()) > 0 {
		sh, err := mixShuffleOf(spec)
		if err != nil {
			return nil, err
		}
		mixed, shares, err := mixOf(spec, sh, env)
		if err != nil {
			return nil, err
		}
		j.name, j.ds, j.mix = mixName(spec), mixed, shares
	} else {
		var ok bool
		if j.ds, ok = env.Datasets[j.name]; !ok {
			return nil, status.Errorf(codes.NotFound, "unknown dataset %q; known: %s", Truncate(j.name, 64), strings.Join(env.Names, ", "))
		}
	}
	if fp := spec.GetFingerprint(); fp != "" && fp != j.ds.Fingerprint() {
		return nil, status.Errorf(codes.FailedPrecondition, "dataset %q differs: the job expects fingerprint %s, this server has %s",
			j.name, Truncate(fp, 64), j.ds.Fingerprint())
	}
	if j.ds.Len() == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "dataset %q is empty", j.name)
	}
	bs := int(spec.GetBatchSize())
	if bs < 1 || bs > maxBatchSize {
		return nil, status.Errorf(codes.InvalidArgument, "batch_size %d: want 1..%d", bs, maxBatchSize)
	}
	j.world, j.rank = max(int(spec.GetWorldSize()), 1), int(spec.GetRank())
	if j.rank >= j.world {
		return nil, status.Errorf(codes.InvalidArgument, "rank %d: want 0..%d for world_size %d", j.rank, j.world-1, j.world)
	}
	if o.Stream != "" {
		j.id = j.name + "-r" + strconv.Itoa(j.rank) + "-" + o.Stream
	}
	switch spec.GetFailPolicy() {
	case stokerv1.FailPolicy_FAIL_POLICY_UNSPECIFIED, stokerv1.FailPolicy_FAIL_POLICY_PAD:
		j.policy = pipeline.PadFromBatch
	case stokerv1.FailPolicy_FAIL_POLICY_DROP:
		j.policy = pipeline.Drop
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown fail_policy %d", spec.GetFailPolicy())
	}
	if j.errLimit, err = ErrorLimitOf(spec); err != nil {
		return nil, err
	}
	if j.mix != nil {
		j.shuffle, _ = mixShuffleOf(spec)
	} else if j.shuffle, err = shuffleOf(spec, j.name, j.ds); err != nil {
		return nil, err
	}
	if err := j.openRecords(spec); err != nil {
		return nil, err
	}
	if j.repeats, err = repeatsOf(spec, dataset.RecordsOf(j.ds), j.world, j.shuffle); err != nil {
		return nil, err
	}
	var imgW, imgH int // the dataset's largest image, where its annotations list every one (COCO's)
	if b, ok := j.ds.(interface{ ImageBound() (int, int) }); ok {
		imgW, imgH = b.ImageBound()
	}
	if err := j.viewsForRecords(spec); err != nil {
		return nil, err
	}
	if j.t, err = NewTransformData(spec.GetTransform(), spec.GetLayout(), imgW, imgH); err != nil {
		return nil, err
	}
	if err := j.boundByData(spec); err != nil { // a vision-language geometry's slot: its data's largest (tokens.go)
		return nil, err
	}
	if j.t, err = stopEpochOf(spec, j.t); err != nil {
		return nil, err
	}
	if err := decodeOf(spec, env.Decode); err != nil {
		return nil, err
	}
	j.t = j.t.WithDecode(DecodeMode(spec.GetDecode()))
	if spec.GetRagged() {
		j.t = j.t.WithRagged() // of one size or several views: as it was (JobInfo.ragged false)
	}
	if spec.GetBatchTokens() != 0 { // batch_size becomes the most samples a batch may hold (tokens.go)
		if err := j.openTokens(spec, o.TokenResumes); err != nil {
			return nil, err
		}
		bs = int(spec.GetBatchSize())
	} else if len(o.TokenResumes) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "token_resumes: the job is not cut by vision tokens (batch_tokens 0)")
	}
	if err := j.setSlots(bs); err != nil {
		return nil, err
	}
	bs = j.slots // from here on, what a batch holds: its images
	j.cost = j.t.Cost()
	j.maxMeasured = max(env.MaxMeasuredCPU, 0)
	if err := checkCost(j.cost, env.MaxSampleCPU); err != nil {
		return nil, err
	}
	if j.cpuWeight, err = cpuWeightOf(spec.GetCpuWeight(), env.MaxCPUWeight); err != nil {
		return nil, err
	}
	if bytes := int64(bs) * int64(j.t.SampleBytes()); bytes > env.MaxBatchBytes {
		views := ""
		if n := j.t.Views(); n > 1 {
			views = fmt.Sprintf(" (%d views of each)", n)
		}
		return nil, status.Errorf(codes.ResourceExhausted, "a batch of %d samples of %d bytes%s is %d bytes, over this server's limit of %d bytes (--max-batch-bytes): at most %d samples a batch",
			bs, j.t.SampleBytes(), views, bytes, env.MaxBatchBytes, env.MaxBatchBytes/int64(j.t.SampleBytes()))
	}
	j.dtype = stokerv1.Dtype_DTYPE_UINT8
	if j.t.Float() {
		j.dtype = stokerv1.Dtype_DTYPE_FLOAT32
	}
	if spec.GetTrace() {
		if most := int64(bs) * int64(j.t.MaxTraceBytes()); most > maxTraceBytes {
			return nil, status.Errorf(codes.InvalidArgument, "trace with batch_size %d: a batch's traces may take %d bytes, over the limit of %d; "+
				"trace a smaller batch (batch_size <= %d)", bs, most, maxTraceBytes, maxTraceBytes/int64(j.t.MaxTraceBytes()))
		}
	}
	if err := targetsOf(spec, j); err != nil {
		return nil, err
	}
	if j.fields, err = fieldsOf(spec, j.name, j.ds, bs); err != nil {
		return nil, err
	}
	if tc := transform.TargetCostOf(j.t, j.ds, j.fields); tc != (transform.TargetCost{}) {
		// A segment dataset's polygons (and the overlap mask), or the instance masks, cost the targets CPU of their own.
		j.cost = j.t.CostWith(tc)
		if err := j.t.CheckMaskWork(tc); err != nil {
			return nil, err
		}
		if err := checkCost(j.cost, env.MaxSampleCPU); err != nil {
			return nil, err
		}
	}
	if n := proto.Size(spec); n > maxSpecBytes {
		return nil, status.Errorf(codes.InvalidArgument, "job spec of %d bytes (its known fields): the limit is %d", n, maxSpecBytes)
	}
	return j, nil
}

// checkCost refuses a transform whose worst sample is predicted over
// limit (0: none), before anything of the job is read or decoded: with
// the prediction, the limit, the op that dominates and the flag.
func checkCost(c transform.Cost, limit time.Duration) error {
	if limit <= 0 || c.Max <= limit {
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "the transform is predicted to cost %v of CPU per sample at worst (%v on average), over this server's limit of %v (--max-sample-cpu); "+
		"most of it is %s, %v at worst: make that op cheaper (a smaller kernel or output, fewer steps) or ask the server's operator to raise --max-sample-cpu",
		costRound(c.Max), costRound(c.Mean), limit, c.Dominant, costRound(c.DominantMax))
}

// costRound is d rounded for a message: 3 significant digits.
func costRound(d time.Duration) time.Duration {
	for r := time.Duration(1e15); r >= time.Nanosecond; r /= 10 { // powers of ten (an hour's tenths are not: 200.88ms)
		if d >= 100*r {
			return d.Round(r)
		}
	}
	return d
}

// cpuWeightOf is a spec's cpu_weight (0: 1) clamped to [1/most, most]
// (most <= 0: 1).
func cpuWeightOf(w, most float64) (float64, error) {
	if w == 0 {
		w = 1
	}
	if !(w > 0) || math.IsInf(w, 0) {
		return 0, status.Errorf(codes.InvalidArgument, "cpu_weight %v: want a finite number > 0 (0: 1)", w)
	}
	most = max(most, 1)
	return min(max(w, 1/most), most), nil
}

// CPUWeight is the job's weight in the executor's share of the cores
// (JobSpec.cpu_weight, clamped by --max-cpu-weight).
func (j *Job) CPUWeight() float64 { return j.cpuWeight }

// Client is who opened the job (Origin.Client): "" for one not opened on
// a Feed stream.
func (j *Job) Client() string { return j.client }

// Cost is the job's transform's predicted CPU per sample.
func (j *Job) Cost() transform.Cost { return j.cost }

// CPUSource is what measures a job's samples' CPU on this server: its
// executor queue.
type CPUSource interface {
	CPU() time.Duration
	Made() uint64
}

// SetCPUSource has the job's measured CPU per sample read from src (its
// queue on the local executor, once opened).
func (j *Job) SetCPUSource(src CPUSource) { j.cpuSrc.Store(&src) }

// CPUPerSample is the cost model's mean and worst CPU per sample and the
// CPU per sample measured on this server's executor (0 before a sample
// is made here), in seconds (coord.CPUCoster).
func (j *Job) CPUPerSample() (predicted, worst, measured float64) {
	predicted, worst = j.cost.Mean.Seconds(), j.cost.Max.Seconds()
	if p := j.cpuSrc.Load(); p != nil {
		if n := (*p).Made(); n > 0 {
			measured = (*p).CPU().Seconds() / float64(n)
		}
	}
	return predicted, worst, measured
}

// decodeOf checks spec's decode and fills the server's default (def) in
// where it is unspecified: the job's spec then says what its batches are
// made with, and a peer it is forwarded to makes them the same way
// whatever its own default.
func decodeOf(spec *stokerv1.JobSpec, def transform.DecodeMode) error {
	switch spec.GetDecode() {
	case stokerv1.Decode_DECODE_UNSPECIFIED:
		spec.Decode = DecodeProto(def)
	case stokerv1.Decode_DECODE_EXACT, stokerv1.Decode_DECODE_FAST:
	default:
		return status.Errorf(codes.InvalidArgument, "unknown decode %d: want DECODE_EXACT (full scale, torchvision's pixels) or DECODE_FAST (DCT scaling)", spec.GetDecode())
	}
	return nil
}

// DecodeMode is the pipeline's mode of a resolved wire Decode.
func DecodeMode(d stokerv1.Decode) transform.DecodeMode {
	if d == stokerv1.Decode_DECODE_FAST {
		return transform.DecodeFast
	}
	return transform.DecodeExact
}

// DecodeProto is the wire Decode of a pipeline mode.
func DecodeProto(m transform.DecodeMode) stokerv1.Decode {
	if m == transform.DecodeFast {
		return stokerv1.Decode_DECODE_FAST
	}
	return stokerv1.Decode_DECODE_EXACT
}

// knownFields is a copy of spec with its unknown fields dropped (in every
// message it holds). New refuses it, last, when what is left is over
// maxSpecBytes: a field's own limit says more.
func knownFields(spec *stokerv1.JobSpec) (*stokerv1.JobSpec, error) {
	b, err := proto.Marshal(spec)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "job spec: %v", err)
	}
	out := new(stokerv1.JobSpec)
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, out); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "job spec: %v", err)
	}
	return out, nil
}

// PixelBytes is the size of one whole batch's pixels.
func (j *Job) PixelBytes() int64 {
	return int64(j.MaxSamples()) * int64(j.t.SampleBytes())
}

// memBytes is what one batch may hold: its pixels, and its fields at
// their bound (fieldBytes), counted in the memory budget.
func (j *Job) memBytes() int64 { return j.PixelBytes() + j.fieldBytes() }

// ForwardSpec is the job's spec as forwarded to peers: the trainer's, with
// the dataset's fingerprint, so that a worker with other data refuses it.
func (j *Job) ForwardSpec() *stokerv1.JobSpec {
	f := proto.CloneOf(j.spec)
	f.Fingerprint = j.ds.Fingerprint()
	// A peer makes leases, it plans none: the coordinator's batch_size (the
	// most samples a batch of tokens may hold) is all it needs, and it does
	// not read every image's header again (tokens.go).
	f.BatchTokens = 0
	return f
}

// EpochPlan is the job's plan of epoch, after consumed positions (elastic
// resume; 0 normally). Only an epoch resumed with consumed positions keeps
// the block shuffle's spans of the world it began with.
func (j *Job) EpochPlan(epoch, consumed uint64) coord.Plan {
	var p coord.Plan
	if j.tokens != nil { // cut by vision tokens (tokens.go); consumed: resumed elastically
		p = j.tokenEpoch(epoch, consumed > 0)
	} else {
		p = j.plainPlan(epoch, consumed)
	}
	if j.groups != nil { // a plan of records, served as their images (records.go)
		return recordsOf(p, j.groups)
	}
	return p
}

// plainPlan is EpochPlan's of batch_size samples a batch.
func (j *Job) plainPlan(epoch, consumed uint64) plan.Plan {
	spans := 0
	if consumed > 0 {
		spans = j.epochWorld
	}
	return plan.New(plan.Spec{
		Size: j.planSize(), Seed: j.spec.GetSeed(), Epoch: epoch, Shuffle: j.shuffle.on,
		Rank: j.rank, World: j.world, BatchSize: int(j.spec.GetBatchSize()), DropLast: j.spec.GetDropLast(),
		Consumed: consumed, Window: j.shuffle.window, Shards: j.shuffle.starts, Spans: spans,
		Repeats: j.repeats, EpochWorld: spans, Mix: j.mix,
	})
}

// planSize is plan.Spec.Size: the dataset's samples, or a mix's draws
// (0 under the block shuffle, whose plan counts its drawn shards').
func (j *Job) planSize() int {
	switch {
	case j.mix == nil && j.groups != nil:
		return j.groups.Records()
	case j.mix == nil:
		return j.ds.Len()
	case j.shuffle.window > 0:
		return 0
	}
	var n uint64
	for _, m := range j.mix {
		n += m.Quota
	}
	return int(n)
}

// datasetSize is JobInfo.dataset_size: the dataset's samples, or the
// positions of a mix's epoch.
func (j *Job) datasetSize(epoch uint64) uint64 {
	if j.mix == nil {
		return uint64(j.planSize())
	}
	return j.plainPlan(epoch, 0).Positions()
}

// Info is the JobInfo that opens epoch with plan p.
func (j *Job) Info(epoch uint64, p coord.Plan) *stokerv1.JobInfo {
	shape := j.t.Shape()
	var views []*stokerv1.ViewInfo
	if j.t.Views() > 1 {
		for v := range j.t.Views() {
			s := j.t.View(v).Shape()
			views = append(views, &stokerv1.ViewInfo{Name: j.t.ViewName(v), SampleShape: []uint32{uint32(s[0]), uint32(s[1]), uint32(s[2])}})
		}
	}
	return &stokerv1.JobInfo{
		Views:         views,
		Epoch:         epoch,
		Batches:       uint64(p.Batches()),
		Samples:       uint64(p.Samples()),
		DatasetSize:   j.datasetSize(epoch),
		Fingerprint:   j.ds.Fingerprint(),
		Classes:       j.ds.Classes(),
		SampleShape:   []uint32{uint32(shape[0]), uint32(shape[1]), uint32(shape[2])},
		Dtype:         j.dtype,
		MaxChunkBytes: MaxChunkBytes,
		Decode:        j.spec.GetDecode(),
		SizesVary:     j.t.Varies(),
		Ragged:        j.t.Ragged(),
	}
}

// Header is the BatchHeader of batch k of epoch, as made into b, its
// targets packed into b.Packed (an error: samples' targets that do not
// pack, which the makers never make).
func (j *Job) Header(epoch uint64, k int, b *pipeline.Batch) (*stokerv1.BatchHeader, error) {
	shape := j.t.Shape()
	h := &stokerv1.BatchHeader{
		Epoch:     epoch,
		Number:    uint64(k),
		Shape:     []uint32{uint32(b.N), uint32(shape[0]), uint32(shape[1]), uint32(shape[2])},
		Dtype:     j.dtype,
		Labels:    b.Labels,
		Indices:   b.Indices,
		DataBytes: uint64(len(b.Data)),
	}
	if j.t.Views() > 1 {
		for v := range j.t.Views() {
			s := j.t.View(v).Shape()
			h.Views = append(h.Views, &stokerv1.Shape{Dims: []uint32{uint32(b.N), uint32(s[0]), uint32(s[1]), uint32(s[2])}})
		}
	}
	h.Errors = headerErrors(b.Errors)
	if j.spec.GetTrace() {
		h.Traces = make([]string, len(b.Traces))
		for i, t := range b.Traces {
			h.Traces[i] = string(t)
		}
		h.Decode = j.spec.GetDecode()
	}
	h.Fields = fieldValues(b)
	if j.groups != nil {
		h.Records = recordsHeader(j.groups, j.ds.Len(), b.Indices, b.Errors)
	}
	t, err := packTargets(j.fields, b)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "batch %d of epoch %d: targets: %v", k, epoch, err)
	}
	h.Targets = t
	return h, nil
}

// PackSizes packs b, whose header is h, to its largest sample when the
// job's samples have their own sizes (packSizes): what a trainer's Feed
// stream sends, not a peer's batch (whose slots the coordinator checks
// and places).
func (j *Job) PackSizes(b *pipeline.Batch, h *stokerv1.BatchHeader) {
	switch {
	case j.t.Ragged():
		packRagged(j.t, b, h)
	case j.t.Varies():
		packSizes(j.t, b, h)
	}
}

// packRagged packs a ragged batch (each sample compact in its slot, its
// size after it) back to back, in place, and says so in h: ragged, its
// shape's height and width the largest sample's, data_bytes and
// sample_sizes. Packed once, as packSizes.
func packRagged(t *transform.Transform, b *pipeline.Batch, h *stokerv1.BatchHeader) {
	if len(b.Data) != b.N*t.SampleBytes() {
		return
	}
	h.SourceSizes = sourceSizes(t, b)
	dims, sizes, data := t.PackRaggedViews(b.Data, b.N)
	h.Ragged = true
	packed(t, b, h, dims[0][0], dims[0][1], sizes, data)
	for v, s := range h.Views { // several views: each its largest sample's, sample_sizes view after view
		if t.Layout() == transform.CHW {
			s.Dims[2], s.Dims[3] = uint32(dims[v][0]), uint32(dims[v][1])
		} else {
			s.Dims[1], s.Dims[2] = uint32(dims[v][0]), uint32(dims[v][1])
		}
	}
}

// packSizes packs a batch of per-sample sizes (each sample in its slot,
// padded to the transform's bound, its size after it) to its largest
// sample, in place, and says so in h: its shape, data_bytes and
// sample_sizes. Packed once: a batch already packed is not a multiple of
// the slot.
func packSizes(t *transform.Transform, b *pipeline.Batch, h *stokerv1.BatchHeader) {
	if len(b.Data) != b.N*t.SampleBytes() {
		return
	}
	h.SourceSizes = sourceSizes(t, b)
	bh, bw, sizes, data := t.PackSizes(b.Data, b.N)
	packed(t, b, h, bh, bw, sizes, data)
}

// sourceSizes is BatchHeader.source_sizes of b (its samples in their
// slots, not yet packed): each image's height and width as decoded.
func sourceSizes(t *transform.Transform, b *pipeline.Batch) []uint32 {
	src := t.SourceSizes(b.Data, b.N)
	out := make([]uint32, 0, 2*len(src))
	for _, s := range src {
		out = append(out, uint32(s[0]), uint32(s[1]))
	}
	return out
}

// packed says in h what a batch of per-sample sizes was packed to: data,
// the samples' sizes, the largest height and width in its shape.
func packed(t *transform.Transform, b *pipeline.Batch, h *stokerv1.BatchHeader, bh, bw int, sizes [][2]int, data []byte) {
	b.Data = data
	h.DataBytes = uint64(len(data))
	h.SampleSizes = make([]uint32, 0, 2*len(sizes))
	for _, s := range sizes {
		h.SampleSizes = append(h.SampleSizes, uint32(s[0]), uint32(s[1]))
	}
	if t.Layout() == transform.CHW {
		h.Shape[2], h.Shape[3] = uint32(bh), uint32(bw)
	} else {
		h.Shape[1], h.Shape[2] = uint32(bh), uint32(bw)
	}
}

// MaxHeaderErrorText bounds the names and reasons of one batch header's
// sample errors together: each is at most pipeline.MaxSampleErrorText,
// and a batch of 65,536 samples may fail whole, which would be 128 MiB of
// text (a trainer's gRPC refuses a message over 8 MiB: the issue's
// "ResourceExhausted (31457650 vs. 8388608)").
const MaxHeaderErrorText = 256 << 10

// headerErrors are errs as a batch header carries them: every index, and
// names and reasons while they fit MaxHeaderErrorText; the first error
// past it says so, the rest have indices only (the server's log and
// stoker_sample_errors_total have them all).
func headerErrors(errs []pipeline.SampleError) []*stokerv1.SampleError {
	out := make([]*stokerv1.SampleError, 0, len(errs))
	text := 0
	for i, e := range errs {
		se := &stokerv1.SampleError{Index: e.Index}
		switch n := len(e.Name) + len(e.Reason); {
		case text+n <= MaxHeaderErrorText:
			se.Name, se.Reason = e.Name, e.Reason
			text += n
		case text <= MaxHeaderErrorText:
			se.Reason = fmt.Sprintf("this and %d more of the batch's failed samples come without name or reason: "+
				"their text passed %d KiB (the server's log names each file)", len(errs)-i-1, MaxHeaderErrorText>>10)
			text = MaxHeaderErrorText + 1
		}
		out = append(out, se)
	}
	return out
}

// Truncate shortens a client-supplied string for messages and logs.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// maxRepeats bounds JobSpec.repeats (torchvision's recipes take 4, DeiT 3).
const maxRepeats = 64

// repeatsOf validates spec's repeated augmentation for a dataset of size
// samples and world ranks: 1 (off) when unset.
func repeatsOf(spec *stokerv1.JobSpec, size, world int, sh shuffleChoice) (int, error) {
	k := int(spec.GetRepeats())
	switch {
	case k <= 1:
		return 1, nil
	case k > maxRepeats:
		return 0, status.Errorf(codes.InvalidArgument, "repeats %d: want 1..%d", k, maxRepeats)
	case sh.starts != nil:
		return 0, status.Errorf(codes.InvalidArgument, "repeats %d with the block shuffle: repeated augmentation spreads a sample's copies over the ranks, which read their own shards; use the global shuffle (Python: shuffle=True)", k)
	case plan.RepeatedLength(size, 0, world) == 0:
		return 0, status.Errorf(codes.InvalidArgument, "repeats %d: RASampler's epoch of a dataset of %d samples over %d ranks, floor(%d // 256 * 256 / %d) samples a rank, is empty: repeated augmentation needs at least 256 samples, and at least one a rank of the multiple of 256 below the dataset's size",
			k, size, world, size, world)
	}
	return k, nil
}

// targetsOf refuses a job asking for targets (JobSpec.targets) that cannot
// have them: a mix, a dataset without annotations, a transform with an op
// targets do not support yet (named).
func targetsOf(spec *stokerv1.JobSpec, j *Job) error {
	if !spec.GetTargets() {
		if where := transform.NeedsTargets(j.t); where != "" {
			return status.Errorf(codes.InvalidArgument, "transform: %s acts on targets, and the job asks for none (JobSpec.targets; Loader(targets=True))", where)
		}
		return nil
	}
	if j.mix != nil {
		return status.Error(codes.InvalidArgument, "targets: a mix of datasets does not support targets yet")
	}
	if _, ok := j.ds.(transform.Targeted); !ok {
		return status.Errorf(codes.InvalidArgument, "targets: dataset %q has no annotations (serve it with --annotations %s=FILE)", Truncate(j.name, 64), Truncate(j.name, 64))
	}
	if err := transform.CheckTargets(j.t); err != nil {
		return status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), errs.Unsupported.Error()+": "))
	}
	if where := transform.NeedsKeypoints(j.t); where != "" && transform.KeypointsKnownNone(j.ds) {
		return status.Errorf(codes.InvalidArgument, "transform: %s acts on keypoints, and dataset %q's instances have none (a COCO file without keypoints, a YOLO dataset without kpt_shape): every sample would fail", where, Truncate(j.name, 64))
	}
	var err error
	if tf := spec.GetTargetFields(); slices.Contains(tf, "masks") && slices.Contains(tf, "overlap_mask") {
		return errMasksAndOverlap
	} else if slices.Contains(tf, "masks") {
		err = transform.CheckMasks(j.t)
	} else if slices.Contains(tf, "overlap_mask") {
		if err = transform.CheckOverlapMask(j.t, j.ds); err == nil {
			err = checkMaskRatio(j.t, spec)
		}
	}
	if err != nil {
		return status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), errs.Unsupported.Error()+": "))
	}
	return nil
}
