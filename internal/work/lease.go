package work

import (
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/transform"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Job is a job as a coordinator registers it on its peers' Work streams.
type Job struct {
	// Spec is the trainer's spec with the dataset's fingerprint set, so
	// that a worker with other data refuses it. A Peer registers each
	// distinct *Job once per stream.
	Spec *stokerv1.JobSpec
	// SampleBytes is one sample's size: a batch may not be larger than
	// its lease's samples.
	SampleBytes int
	// Layout is where a sample's views lie in a batch (their sizes add
	// up to SampleBytes); the zero Layout is one view.
	Layout transform.ViewLayout
	// Fields are the fields the job asks for (nil: none): a batch's
	// header carries them, each value within their bound.
	Fields *dataset.FieldSet
}

// layout is j's ViewLayout.
func (j *Job) layout() transform.ViewLayout {
	if j.Layout.Views() == 0 {
		return transform.OneView(j.SampleBytes)
	}
	return j.Layout
}
