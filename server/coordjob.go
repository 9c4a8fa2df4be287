package server

import (
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/server/internal/coord"
)

// A job is what its coordinator runs (coord.Job).
var _ coord.Job = (*job)(nil)

func (j *job) Dataset() string   { return j.name }
func (j *job) Rank() int         { return j.rank }
func (j *job) World() int        { return j.world }
func (j *job) BatchSize() int    { return int(j.spec.GetBatchSize()) }
func (j *job) SampleBytes() int  { return j.t.SampleBytes() }
func (j *job) BatchBytes() int64 { return j.memBytes() }
func (j *job) Pads() bool        { return j.policy == pipeline.PadFromBatch }
func (j *job) Shuffle() string   { return j.shuffle.String() }

func (j *job) Plan(epoch, consumed uint64) coord.Plan { return j.plan(epoch, consumed) }
