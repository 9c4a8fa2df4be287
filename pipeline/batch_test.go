package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/source"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// mixedFolder is an ImageFolder of good and bad files with known indices:
//
//	0 a/0.png  good      4 b/4.jpg  bad: truncated
//	1 a/1.jpg  bad: empty 5 b/5.jpg  bad: declares 60000x60000
//	2 a/2.jpg  good      6 b/6.jpg  good
//	3 b/3.png  good
func mixedFolder(t *testing.T) *dataset.ImageFolder {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{
		"a/0.png": encodePNG(testPicture(48, 40)),
		"a/1.jpg": readCorpus(t, "bad/empty.jpg"),
		"a/2.jpg": encodeJPEG(testPicture(64, 40), 90),
		"b/3.png": encodePNG(testPicture(40, 56)),
		"b/4.jpg": readCorpus(t, "bad/trunc-half.jpg"),
		"b/5.jpg": readCorpus(t, "bad/huge-60000x60000.jpg"),
		"b/6.jpg": encodeJPEG(testPicture(50, 50), 85),
	})
	d, err := dataset.OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

var (
	goodIdx = []int64{0, 2, 3, 6}
	badIdx  = map[int64]error{1: errs.Corrupt, 4: errs.Corrupt, 5: errs.TooLarge}
)

// sampleOf decodes one sample on its own, for comparison with batches.
func sampleOf(t *testing.T, ds dataset.Dataset, tr *transform.Transform, seed, epoch uint64, idx int64) []byte {
	t.Helper()
	data, err := ds.Read(int(idx), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	if err := d.Decode(data, tr, det.Key{Seed: seed, Epoch: epoch, Index: uint64(idx)}, out); err != nil {
		t.Fatalf("sample %d: %v", idx, err)
	}
	return out
}

func checkErrors(t *testing.T, ds dataset.Dataset, b *Batch, want []int64) {
	t.Helper()
	var got []int64
	for _, e := range b.Errors {
		got = append(got, e.Index)
		if e.Name != ds.Name(int(e.Index)) || e.Reason == "" || e.Err == nil {
			t.Errorf("error for %d: name %q reason %q err %v", e.Index, e.Name, e.Reason, e.Err)
		}
		if !errors.Is(e.Err, badIdx[e.Index]) {
			t.Errorf("error for %d: %v, want %v", e.Index, e.Err, badIdx[e.Index])
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors for samples %v, want %v", got, want)
	}
}

func TestFillPadFromBatch(t *testing.T) {
	ds := mixedFolder(t)
	tr := smallTrain(t)
	e := NewExecutor(2)
	defer e.Close()
	indices := []int64{0, 1, 2, 3, 4, 5, 6}
	var b Batch
	if err := e.Fill(context.Background(), ds, tr, 5, 1, indices, PadFromBatch, &b); err != nil {
		t.Fatal(err)
	}
	size := tr.SampleBytes()
	if b.N != len(indices) || len(b.Data) != b.N*size || len(b.Labels) != b.N || len(b.Indices) != b.N {
		t.Fatalf("N %d, %d bytes, %d labels, %d indices; want %d samples", b.N, len(b.Data), len(b.Labels), len(b.Indices), len(indices))
	}
	checkErrors(t, ds, &b, []int64{1, 4, 5})
	good := map[int64][]byte{}
	for _, idx := range goodIdx {
		good[idx] = sampleOf(t, ds, tr, 5, 1, idx)
	}
	for i, idx := range indices {
		slot := b.Data[i*size : (i+1)*size]
		if _, bad := badIdx[idx]; !bad {
			if b.Indices[i] != idx || b.Labels[i] != ds.Label(int(idx)) || !bytes.Equal(slot, good[idx]) {
				t.Errorf("slot %d: index %d label %d, want sample %d as decoded alone", i, b.Indices[i], b.Labels[i], idx)
			}
			continue
		}
		// A padded slot is a copy of a good sample of this batch: its
		// pixels, label and index.
		donor := b.Indices[i]
		if _, bad := badIdx[donor]; bad || !slices.Contains(indices, donor) {
			t.Errorf("slot %d (bad sample %d) padded from sample %d, not a good one of the batch", i, idx, donor)
			continue
		}
		if !bytes.Equal(slot, good[donor]) || b.Labels[i] != ds.Label(int(donor)) {
			t.Errorf("slot %d (bad sample %d): bytes or label differ from donor %d", i, idx, donor)
		}
	}
}

func TestFillDrop(t *testing.T) {
	ds := mixedFolder(t)
	tr := smallTrain(t)
	e := NewExecutor(3)
	defer e.Close()
	var b Batch
	if err := e.Fill(context.Background(), ds, tr, 5, 1, []int64{5, 0, 1, 2, 3, 4, 6}, Drop, &b); err != nil {
		t.Fatal(err)
	}
	size := tr.SampleBytes()
	want := []int64{0, 2, 3, 6}
	if b.N != len(want) || len(b.Data) != b.N*size || !slices.Equal(b.Indices, want) || !slices.Equal(b.Labels, []int64{0, 0, 1, 1}) {
		t.Fatalf("N %d, %d bytes, indices %v labels %v; want indices %v", b.N, len(b.Data), b.Indices, b.Labels, want)
	}
	checkErrors(t, ds, &b, []int64{5, 1, 4})
	for i, idx := range want {
		if !bytes.Equal(b.Data[i*size:(i+1)*size], sampleOf(t, ds, tr, 5, 1, idx)) {
			t.Errorf("slot %d is not sample %d", i, idx)
		}
	}
}

func TestFillAllBad(t *testing.T) {
	ds := mixedFolder(t)
	tr := smallTrain(t)
	e := NewExecutor(2)
	defer e.Close()
	for _, policy := range []FailPolicy{PadFromBatch, Drop} {
		var b Batch
		// A previous batch leaves buffers behind; they must not show.
		if err := e.Fill(context.Background(), ds, tr, 1, 0, goodIdx, policy, &b); err != nil {
			t.Fatal(err)
		}
		if err := e.Fill(context.Background(), ds, tr, 1, 0, []int64{4, 1, 5}, policy, &b); err != nil {
			t.Fatal(err)
		}
		if b.N != 0 || len(b.Data) != 0 || len(b.Labels) != 0 || len(b.Indices) != 0 {
			t.Errorf("policy %d: N %d, %d bytes, %d labels, %d indices; want an empty batch", policy, b.N, len(b.Data), len(b.Labels), len(b.Indices))
		}
		checkErrors(t, ds, &b, []int64{4, 1, 5})
	}
}

// storeDownDS reads the samples of down as a store that is down would:
// an error wrapping source.ErrUnavailable (denied: source.ErrDenied).
type storeDownDS struct {
	dataset.Dataset
	down   map[int64]bool
	denied bool
}

func (d storeDownDS) Read(i int, buf []byte) ([]byte, error) {
	if d.down[int64(i)] {
		if d.denied {
			return nil, fmt.Errorf("%s: %w: InvalidAccessKeyId", d.Name(i), source.ErrDenied)
		}
		return nil, fmt.Errorf("%w: s3://bkt: %s: gave up after 6 tries; last: connection refused", source.ErrUnavailable, d.Name(i))
	}
	return d.Dataset.Read(i, buf)
}

// TestFillStoreFault: a sample that failed by its store's fault is never
// padded or dropped, under either policy: the batch fails with the
// store's error, whether its other samples were made, were bad files, or
// failed the same way.
func TestFillStoreFault(t *testing.T) {
	tr := smallTrain(t)
	e := NewExecutor(2)
	defer e.Close()
	for _, tc := range []struct {
		name    string
		indices []int64
		down    []int64
		denied  bool
	}{
		{"one of good ones", []int64{0, 2, 3, 6}, []int64{3}, false},
		{"beside bad files", []int64{0, 1, 3, 4}, []int64{3}, false},
		{"every sample", []int64{0, 2, 3}, []int64{0, 2, 3}, false},
		{"credentials refused", []int64{0, 2, 3}, []int64{2}, true},
	} {
		ds := storeDownDS{Dataset: mixedFolder(t), down: map[int64]bool{}, denied: tc.denied}
		for _, i := range tc.down {
			ds.down[i] = true
		}
		for _, policy := range []FailPolicy{PadFromBatch, Drop} {
			var b Batch
			err := e.Fill(context.Background(), ds, tr, 1, 0, tc.indices, policy, &b)
			if !source.IsStoreFault(err) {
				t.Errorf("%s, policy %d: %v (N %d, %d errors); want the batch failed by the store's fault", tc.name, policy, err, b.N, len(b.Errors))
				continue
			}
			want := fmt.Sprintf("%d of the batch's %d samples could not be read from their store", len(tc.down), len(tc.indices))
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ds.Name(int(tc.down[0]))) {
				t.Errorf("%s: %q; want it to say %q and name %s", tc.name, err, want, ds.Name(int(tc.down[0])))
			}
		}
	}
}

func TestFillRequestErrors(t *testing.T) {
	ds := mixedFolder(t)
	tr := smallTrain(t)
	e := NewExecutor(1)
	defer e.Close()
	var b Batch
	for _, idx := range []int64{-1, int64(ds.Len())} {
		if err := e.Fill(context.Background(), ds, tr, 0, 0, []int64{0, idx}, PadFromBatch, &b); !errors.Is(err, errs.Unsupported) {
			t.Errorf("index %d: %v, want ErrUnsupported", idx, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	many := make([]int64, 1000) // a cancelled Fill queues none of them
	if err := e.Fill(ctx, ds, tr, 0, 0, many, PadFromBatch, &b); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	// The executor still works after both.
	if err := e.Fill(context.Background(), ds, tr, 0, 0, goodIdx, PadFromBatch, &b); err != nil || b.N != len(goodIdx) {
		t.Errorf("after errors: N %d, %v", b.N, err)
	}
}

// TestFillAfterClose: a closed Executor refuses work with ErrClosed instead
// of panicking on its closed queue; Close twice is fine.
func TestFillAfterClose(t *testing.T) {
	ds := mixedFolder(t)
	e := NewExecutor(2)
	e.Close()
	e.Close()
	var b Batch
	if err := e.Fill(context.Background(), ds, smallTrain(t), 0, 0, goodIdx, PadFromBatch, &b); !errors.Is(err, ErrClosed) {
		t.Errorf("Fill after Close: %v, want ErrClosed", err)
	}
}

// TestFillDeterminism: a batch is a pure function of (dataset, transform,
// seed, epoch, indices): the same bytes made twice, with 1 or 4 workers,
// from an ImageFolder or a WebDataset holding the same files, and each
// sample the same whatever batch it is in.
func TestFillDeterminism(t *testing.T) {
	root := t.TempDir()
	var members []tarMember
	files := map[string][]byte{}
	for i := range 12 {
		var data []byte
		name := fmt.Sprintf("c%d/%02d", i%3, i)
		if i%4 == 3 {
			data, name = encodePNG(testPicture(40+4*i, 64-2*i)), name+".png"
		} else {
			data, name = encodeJPEG(testPicture(64-2*i, 40+3*i), 80+i), name+".jpg"
		}
		files[name] = data
	}
	writeTree(t, root, files)
	folder, err := dataset.OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	for i := range folder.Len() { // the same files, in the folder's order
		data, _ := folder.Read(i, nil)
		key := fmt.Sprintf("s%02d", i)
		members = append(members, tarMember{Name: key + filepath.Ext(folder.Name(i)), Data: data}, tarMember{Name: key + ".cls", Data: fmt.Appendf(nil, "%d", folder.Label(i))})
	}
	shardDir := t.TempDir()
	writeShard(t, filepath.Join(shardDir, "s.tar"), members)
	wds, err := dataset.OpenWebDataset(shardDir)
	if err != nil {
		t.Fatal(err)
	}
	defer wds.Close()

	tr := mustTransform(t, transform.CHW,
		ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{24, 32}},
		ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5},
		ops.Op{Kind: ops.OpColorJitter, Args: &ops.ColorJitterArgs{Brightness: 0.4, Contrast: 0.4, Saturation: 0.4}})
	indices := []int64{11, 3, 0, 7, 5, 9, 1, 10, 2, 8, 4, 6}
	fill := func(e *Executor, ds dataset.Dataset, idx []int64) Batch {
		var b Batch
		if err := e.Fill(context.Background(), ds, tr, 77, 2, idx, PadFromBatch, &b); err != nil || len(b.Errors) > 0 {
			t.Fatalf("Fill: %v %v", err, b.Errors)
		}
		return b
	}
	one, four := NewExecutor(1), NewExecutor(4)
	defer one.Close()
	defer four.Close()
	ref := fill(one, folder, indices)
	for name, b := range map[string]Batch{
		"again":      fill(one, folder, indices),
		"4 workers":  fill(four, folder, indices),
		"webdataset": fill(four, wds, indices),
	} {
		if !bytes.Equal(b.Data, ref.Data) || !slices.Equal(b.Labels, ref.Labels) || !slices.Equal(b.Indices, ref.Indices) {
			t.Errorf("%s: batch differs from the first", name)
		}
	}
	// Sample 7 alone, and in a batch of different neighbours.
	size := tr.SampleBytes()
	alone := fill(four, folder, []int64{7})
	if !bytes.Equal(alone.Data, ref.Data[3*size:4*size]) {
		t.Errorf("sample 7 alone differs from sample 7 in a batch")
	}
	// Another epoch is another batch.
	var other Batch
	if err := four.Fill(context.Background(), folder, tr, 77, 3, indices, PadFromBatch, &other); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other.Data, ref.Data) {
		t.Errorf("epochs 2 and 3 made the same batch")
	}
}

// TestFillConcurrent runs Fill calls from several goroutines on one
// executor (for the race detector) and checks each against the same batch
// made alone.
func TestFillConcurrent(t *testing.T) {
	ds := mixedFolder(t)
	tr := smallTrain(t)
	e := NewExecutor(3)
	defer e.Close()
	want := make([]Batch, 4)
	for g := range want {
		if err := e.Fill(context.Background(), ds, tr, uint64(g), 0, []int64{0, 1, 2, 3, 4, 5, 6}, PadFromBatch, &want[g]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var b Batch
			for range 3 {
				if err := e.Fill(context.Background(), ds, tr, uint64(g%4), 0, []int64{0, 1, 2, 3, 4, 5, 6}, PadFromBatch, &b); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(b.Data, want[g%4].Data) || len(b.Errors) != 3 {
					t.Errorf("goroutine %d: batch differs from the one made alone", g)
				}
			}
		})
	}
	wg.Wait()
}
