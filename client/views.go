package client

import (
	"encoding/json"
	"fmt"
	"slices"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// View is one view of a batch of a job of several views
// (TransformSpec.Views: SimCLR's 2, DINO's 2 global and 8 local crops).
type View struct {
	// Name is the view's group's name ("" when unnamed).
	Name string
	// Shape is [N, 3, H, W] (NCHW) or [N, H, W, 3] (NHWC).
	Shape []uint32
	// Offset and Bytes are where the view's pixels lie in Batch.Data:
	// the views are back to back, in order, each view's N samples back
	// to back.
	Offset, Bytes uint64
}

// ViewData is view v's pixels, a part of b.Data.
func (b *Batch) ViewData(v int) []byte {
	w := b.Views[v]
	return b.Data[w.Offset : w.Offset+w.Bytes]
}

// infoViews checks a JobInfo's views against its sample shape and returns
// one sample's bytes, all views added up (those of the sample shape for a
// job of one view).
func infoViews(info *stokerv1.JobInfo, elem uint64) (uint64, bool) {
	shape := info.GetSampleShape()
	if len(shape) != 3 || elem == 0 {
		return 0, false
	}
	views := info.GetViews()
	if len(views) == 0 {
		return product(elem, uint64(shape[0]), uint64(shape[1]), uint64(shape[2]))
	}
	if !slices.Equal(views[0].GetSampleShape(), shape) {
		return 0, false
	}
	var size uint64
	for _, v := range views {
		s := v.GetSampleShape()
		if len(s) != 3 {
			return 0, false
		}
		b, ok := product(elem, uint64(s[0]), uint64(s[1]), uint64(s[2]))
		if !ok {
			return 0, false
		}
		if size += b; size > 1<<40 {
			return 0, false
		}
	}
	return size, true
}

// batchViews is a batch of n samples' views, as its header lists them,
// checked against the epoch's JobInfo; nil for a job of one view.
func batchViews(info *stokerv1.JobInfo, h *stokerv1.BatchHeader, n, elem uint64) ([]View, bool) {
	want, got := info.GetViews(), h.GetViews()
	if len(want) != len(got) {
		return nil, false
	}
	if len(want) == 0 {
		return nil, true
	}
	views := make([]View, len(want))
	var off uint64
	for v, w := range want {
		s, dims := w.GetSampleShape(), got[v].GetDims()
		if len(dims) != 4 || uint64(dims[0]) != n || !slices.Equal(dims[1:], s) {
			return nil, false
		}
		b, _ := product(n, elem, uint64(s[0]), uint64(s[1]), uint64(s[2]))
		views[v] = View{Name: w.GetName(), Shape: dims, Offset: off, Bytes: b}
		off += b
	}
	return views, true
}

// ViewTrace is view v of sample i's trace, parsed, in a batch of several
// views (a sample's trace is a list of each view's).
func (b *Batch) ViewTrace(i, v int) ([]AppliedOp, error) {
	if i < 0 || i >= len(b.Traces) {
		return nil, fmt.Errorf("stoker: batch %d has %d traces (ask for them with JobSpec.Trace)", b.Number, len(b.Traces))
	}
	if len(b.Views) == 0 {
		return b.Trace(i)
	}
	var views []json.RawMessage
	if err := json.Unmarshal([]byte(b.Traces[i]), &views); err != nil || len(views) != len(b.Views) {
		return nil, fmt.Errorf("stoker: batch %d sample %d: a trace of %d views, want %d (%v)", b.Number, i, len(views), len(b.Views), err)
	}
	if v < 0 || v >= len(views) {
		return nil, fmt.Errorf("stoker: batch %d has %d views, no view %d", b.Number, len(views), v)
	}
	return parseTrace(views[v], b.Number, i)
}
