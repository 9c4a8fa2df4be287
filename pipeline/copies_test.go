package pipeline

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestFillCopies: Batch.Copies keys each sample's draws with its copy
// (Key.Copy): copies of one sample differ, each is Decode's with its key,
// and copy 0 is the sample without copies.
func TestFillCopies(t *testing.T) {
	files := memDataset{goldenJPEGs()}
	tr := mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{32, 32}}, ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5})
	e := NewExecutor(2)
	defer e.Close()
	indices := []int64{3, 3, 3, 5}
	b := Batch{Copies: []uint32{0, 1, 2, 0}}
	if err := e.Fill(context.Background(), files, tr, 7, 1, indices, PadFromBatch, &b); err != nil {
		t.Fatal(err)
	}
	size := tr.SampleBytes()
	d := NewDecoder()
	defer d.Close()
	for i, idx := range indices {
		want := make([]byte, size)
		if err := d.Decode(files.files[idx], tr, det.Key{Seed: 7, Epoch: 1, Index: uint64(idx), Copy: uint64(b.Copies[i])}, want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Data[i*size:(i+1)*size], want) {
			t.Errorf("slot %d (sample %d copy %d) is not Decode's with its key", i, idx, b.Copies[i])
		}
	}
	if bytes.Equal(b.Data[:size], b.Data[size:2*size]) || bytes.Equal(b.Data[size:2*size], b.Data[2*size:3*size]) {
		t.Error("a sample's copies are the same bytes")
	}
	var plain Batch
	if err := e.Fill(context.Background(), files, tr, 7, 1, indices[:1], PadFromBatch, &plain); err != nil || !bytes.Equal(plain.Data, b.Data[:size]) {
		t.Errorf("copy 0 differs from the sample made without copies (%v)", err)
	}
	bad := Batch{Copies: []uint32{1}}
	if err := e.Fill(context.Background(), files, tr, 7, 1, indices, PadFromBatch, &bad); !errors.Is(err, errs.Unsupported) {
		t.Errorf("1 copy for 4 samples: %v, want ErrUnsupported", err)
	}
}
