//go:build cgo

package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
)

// TestWebDatasetFields: a CLIP-style dataset opens unlabelled, every key a
// sample; its fields are its members' bytes, the same read locally and
// through a manifest from a store.
func TestWebDatasetFields(t *testing.T) {
	dir, captions := clipShards(t)
	local, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	m, err := dataset.IndexStore(context.Background(), openDirStore(t, dir), dataset.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := dataset.NewStoreDataset(openDirStore(t, dir), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	for name, ds := range map[string]dataset.Dataset{"local": local, "store": remote} {
		t.Run(name, func(t *testing.T) {
			if ds.Len() != 7 || len(ds.Classes()) != 0 {
				t.Fatalf("%d samples, classes %v; want 7 unlabelled", ds.Len(), ds.Classes())
			}
			fd := ds.(dataset.Fielded)
			if got := fd.FieldNames(); !slices.Equal(got, []string{"jpg", "json", "txt", dataset.FieldKey, dataset.FieldSource}) {
				t.Errorf("fields %v", got)
			}
			fs, err := dataset.NewFieldSet(ds, []string{"txt", dataset.FieldKey, "json", dataset.FieldSource}, 4096, "clip")
			if err != nil {
				t.Fatal(err)
			}
			for i := range ds.Len() {
				if ds.Label(i) != -1 {
					t.Errorf("sample %d: label %d, want -1", i, ds.Label(i))
				}
				got := make([]Field, fs.Len())
				if err := fs.Check(ds, i); err != nil {
					if i != 3 || !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), `field "json" is 5000 bytes, over the job's bound of 4096 bytes a field (max_field_bytes)`) {
						t.Errorf("sample %d: %v", i, err)
					}
					continue
				}
				if err := fs.Read(ds, i, got); err != nil {
					t.Fatalf("sample %d: %v", i, err)
				}
				key := string(got[1].Data)
				if !bytes.Equal(got[0].Data, captions[key]) || !got[0].Has {
					t.Errorf("sample %d (%s): caption %q, want %q", i, key, got[0].Data, captions[key])
				}
				if string(got[3].Data) != "clip" {
					t.Errorf("sample %d: source %q", i, got[3].Data)
				}
				if wantJSON := key != "s/005" && key != "s/999"; got[2].Has != wantJSON {
					t.Errorf("sample %d (%s): json present %v", i, key, got[2].Has)
				}
			}
			// The key without an image fails when read, naming what it has.
			if _, err := ds.Read(6, nil); !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "no image") ||
				!strings.Contains(err.Error(), "txt") {
				t.Errorf("the sample without an image: %v", err)
			}
			if _, err := dataset.NewFieldSet(ds, []string{"text"}, 100, "clip"); err == nil || !strings.Contains(err.Error(), "txt") {
				t.Errorf("an unknown field: %v, want the dataset's fields listed", err)
			}
			if _, err := dataset.NewFieldSet(ds, []string{"cls"}, 100, "clip"); err == nil {
				t.Errorf("cls of an unlabelled dataset: no error")
			}
		})
	}
}

// TestFieldsFill: a batch's fields are its samples', in batch order; a
// sample whose field is over the bound, or that has no image, fails by
// itself (named), and the fail policy moves fields with the pixels: a pad
// copy carries its donor's, and a dropped sample's go with it.
func TestFieldsFill(t *testing.T) {
	dir, captions := clipShards(t)
	ds, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	tr := smallTrain(t)
	e := NewExecutor(3)
	defer e.Close()
	fs, err := dataset.NewFieldSet(ds, []string{dataset.FieldKey, "txt", "json"}, 4096, "clip")
	if err != nil {
		t.Fatal(err)
	}
	indices := []int64{6, 5, 4, 3, 2, 1, 0}
	for _, policy := range []FailPolicy{PadFromBatch, Drop} {
		b := Batch{FieldSet: fs}
		if err := e.Fill(context.Background(), ds, tr, 1, 0, indices, policy, &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Errors) != 2 || b.Errors[0].Index != 6 || b.Errors[1].Index != 3 || !errors.Is(b.Errors[1].Err, errs.TooLarge) {
			t.Fatalf("errors %+v, want samples 6 (no image) and 3 (json over the bound)", b.Errors)
		}
		if len(b.Fields) != b.N*fs.Len() {
			t.Fatalf("%d fields for %d samples", len(b.Fields), b.N)
		}
		for i := range b.N {
			f := b.SampleFields(i)
			idx := b.Indices[i]
			key := fmt.Sprintf("s/%03d", idx)
			if string(f[0].Data) != key || !bytes.Equal(f[1].Data, captions[key]) {
				t.Errorf("%v: slot %d (sample %d): key %q caption %q", policy, i, idx, f[0].Data, f[1].Data)
			}
		}
		// Fields reused: a second batch into the same buffers.
		if err := e.Fill(context.Background(), ds, tr, 1, 0, []int64{0}, policy, &b); err != nil || b.N != 1 ||
			string(b.Fields[0].Data) != "s/000" || len(b.Fields) != 3 {
			t.Errorf("reused: %v, %d samples, fields %+v", err, b.N, b.Fields)
		}
	}
	b := Batch{FieldSet: fs}
	if err := e.Fill(context.Background(), ds, tr, 1, 0, []int64{0, 1}, PadFromBatch, &b); err != nil {
		t.Fatal(err)
	}
	if got := b.FieldBytes(); got != int64(len("s/000s/001"))+int64(len(captions["s/000"])+len(captions["s/001"]))+int64(len(`{"i": 0}{"i": 1}`)) {
		t.Errorf("field bytes %d", got)
	}
}

// TestImageFolderFields: an ImageFolder's fields are its files' relative
// paths and keys.
func TestImageFolderFields(t *testing.T) {
	ds := mixedFolder(t)
	fs, err := dataset.NewFieldSet(ds, []string{dataset.FieldPath, dataset.FieldKey}, 100, "folder")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]Field, 2)
	if err := fs.Read(ds, 1, got); err != nil || string(got[0].Data) != "a/1.jpg" || string(got[1].Data) != "a/1" {
		t.Errorf("sample 1: %v, path %q key %q", err, got[0].Data, got[1].Data)
	}
	if _, err := dataset.NewFieldSet(ds, []string{"txt"}, 100, "folder"); err == nil || !strings.Contains(err.Error(), "path, __key__") {
		t.Errorf("txt of an ImageFolder: %v", err)
	}
	if _, err := dataset.NewFieldSet(ds, []string{"path", "path"}, 100, "folder"); err == nil {
		t.Errorf("a field twice: no error")
	}
}
