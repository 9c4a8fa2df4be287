package pipeline

import "github.com/stoker-dev/stoker/pipeline/batch"

// StageTimes is where the time of making one batch went (batch.StageTimes):
// each stage's time summed over the batch's samples, and the batch's own
// wall time. An Executor that times its stages (WithStageObserver) fills a
// Batch's Times; a batch made without timing has zero Times.
type StageTimes = batch.StageTimes
