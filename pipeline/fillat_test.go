package pipeline

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// TestFillAt: a part of a batch made at its places (FillAt) is the part
// made alone (Fill), each sample then copied to its place: its pixels,
// its own labels, indices, errors and traces, a failed sample replaced by policy
// within the part (dropped, the part's places past N hold no sample);
// the batch buffer's bytes at no place of the part untouched, its length
// kept. A place count or a place past the buffer is refused.
func TestFillAt(t *testing.T) {
	ds := mixedFolder(t)
	tr := smallTrain(t)
	e := NewExecutor(2)
	defer e.Close()
	q := e.Queue("part")
	size := tr.SampleBytes()
	indices := []int64{6, 1, 0, 4, 3} // 1 and 4 fail
	place := []int{7, 0, 3, 5, 2}
	for _, policy := range []FailPolicy{PadFromBatch, Drop} {
		alone := Batch{Trace: true}
		if err := q.Fill(context.Background(), ds, tr, 5, 1, indices, policy, &alone); err != nil {
			t.Fatal(err)
		}
		whole := bytes.Repeat([]byte{0xee}, 8*size)
		b := Batch{Data: whole, Trace: true}
		if err := q.FillAt(context.Background(), ds, tr, 5, 1, indices, place, policy, &b); err != nil {
			t.Fatal(err)
		}
		want := bytes.Repeat([]byte{0xee}, 8*size)
		for i := range alone.N {
			copy(want[place[i]*size:], alone.Data[i*size:(i+1)*size])
		}
		for _, at := range place[alone.N:] { // no sample: whatever is there
			copy(want[at*size:(at+1)*size], whole[at*size:(at+1)*size])
		}
		if len(b.Data) != len(whole) || &b.Data[0] != &whole[0] || !bytes.Equal(whole, want) {
			t.Errorf("policy %d: the batch's buffer is not the part made alone, placed (or its length or memory changed)", policy)
		}
		if b.N != alone.N || !slices.Equal(b.Labels, alone.Labels) || !slices.Equal(b.Indices, alone.Indices) {
			t.Errorf("policy %d: N %d, labels %v, indices %v; made alone %d, %v, %v", policy, b.N, b.Labels, b.Indices, alone.N, alone.Labels, alone.Indices)
		}
		if len(b.Traces) != alone.N || !slices.EqualFunc(b.Traces, alone.Traces, bytes.Equal) {
			t.Errorf("policy %d: %d traces, made alone %d, or they differ", policy, len(b.Traces), len(alone.Traces))
		}
		checkErrors(t, ds, &b, []int64{1, 4})
	}
	b := Batch{Data: make([]byte, 8*size)}
	for _, bad := range [][]int{{0, 1}, {0, 1, 2, 3, 8}, {0, 1, 2, 3, -1}} {
		if err := q.FillAt(context.Background(), ds, tr, 5, 1, indices, bad, Drop, &b); !errors.Is(err, errs.Unsupported) {
			t.Errorf("places %v for 5 samples in 8 places: %v, want ErrUnsupported", bad, err)
		}
	}
}
