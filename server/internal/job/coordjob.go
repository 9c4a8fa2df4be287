package job

import (
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/plan"
)

// A job is what its coordinator runs (coord.Job).
var _ coord.Job = (*Job)(nil)

// A rank's share of an epoch packed by vision tokens is a plan a
// coordinator runs (batch_tokens, refused by New until a stream carries
// its batches of varying counts).
var _ coord.Plan = plan.RankPacking{}

func (j *Job) Dataset() string   { return j.name }
func (j *Job) Rank() int         { return j.rank }
func (j *Job) World() int        { return j.world }
func (j *Job) BatchSize() int    { return j.MaxSamples() }
func (j *Job) SampleBytes() int  { return j.t.SampleBytes() }
func (j *Job) BatchBytes() int64 { return j.memBytes() }
func (j *Job) Pads() bool        { return j.policy == pipeline.PadFromBatch }
func (j *Job) Shuffle() string   { return j.shuffle.String() }

func (j *Job) Plan(epoch, consumed uint64) coord.Plan { return j.EpochPlan(epoch, consumed) }

// What the server's makers, its verifier and its streams read of a job.

// Spec is the job's spec, its known fields alone; it is not to be changed.
func (j *Job) Spec() *stokerv1.JobSpec { return j.spec }

// Data is the job's dataset (a mix's, when the job mixes).
func (j *Job) Data() dataset.Dataset { return j.ds }

// Transform is the job's compiled transform.
func (j *Job) Transform() *transform.Transform { return j.t }

// Policy is what a failed sample's slot becomes (JobSpec.fail_policy).
func (j *Job) Policy() pipeline.FailPolicy { return j.policy }

// ErrorLimit is how many samples of an epoch may fail.
func (j *Job) ErrorLimit() ErrorLimit { return j.errLimit }

// Fields are the fields the job sends with its samples, nil for none.
func (j *Job) Fields() *dataset.FieldSet { return j.fields }

// ID names the job in queue names and metrics (Origin).
func (j *Job) ID() string { return j.id }

// BlockWindow is the block shuffle's window in shards, 0 for another
// shuffle.
func (j *Job) BlockWindow() int { return j.shuffle.window }
