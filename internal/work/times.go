package work

import (
	"math"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// A worker says where its time making each lease's batch went
// (LeaseDone.times), so that its coordinator can tell the peer's making
// from the network in the lease's time. Telemetry only: nothing but the
// coordinator's account of stages reads it.

// makeTimes is t as LeaseDone carries it; nil for a batch not timed.
func makeTimes(t batch.StageTimes) *stokerv1.MakeTimes {
	if t == (batch.StageTimes{}) {
		return nil
	}
	return &stokerv1.MakeTimes{
		QueueSeconds: t.Queue.Seconds(), ReadSeconds: t.Read.Seconds(), DecodeSeconds: t.Decode.Seconds(),
		TransformSeconds: t.Transform.Seconds(), WallSeconds: t.Wall.Seconds(),
	}
}

// maxReportedSeconds bounds a figure a worker reports: a lease lasts
// seconds, and a day is no lease's.
const maxReportedSeconds = 24 * 60 * 60

// stageTimes reads a worker's report; a figure that cannot be one
// (negative, NaN, infinite, more than a day) reads as 0.
func stageTimes(m *stokerv1.MakeTimes) batch.StageTimes {
	d := func(s float64) time.Duration {
		if !(s > 0) || math.IsInf(s, 0) || s > maxReportedSeconds {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	return batch.StageTimes{
		Queue: d(m.GetQueueSeconds()), Read: d(m.GetReadSeconds()), Decode: d(m.GetDecodeSeconds()),
		Transform: d(m.GetTransformSeconds()), Wall: d(m.GetWallSeconds()),
	}
}
