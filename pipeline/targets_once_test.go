package pipeline

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// countBoxes is one photo with fixed boxes whose reads are counted.
type countBoxes struct {
	memDataset
	boxes fixedBoxes
	reads *int
}

func (c countBoxes) SourceTargets(i, w, h int, t *transform.Instances) error {
	*c.reads++
	return c.boxes.SourceTargets(i, w, h, t)
}

// TestTargetsReadOnce: a single image's targets are read once, for its
// draw and its targets together: the detr and ssdlite presets' RandomIoUCrop draws
// against the boxes its plan read, and the sample's targets are those
// boxes moved (Plan.TakeSource), not read again; a recipe whose draw does
// not need them reads them once, after the decode. The targets taken from
// the plan are the bytes of a second read: a job whose label numbering
// differs from the draw's reads them again, and gets the same.
func TestTargetsReadOnce(t *testing.T) {
	data, err := os.ReadFile("../testdata/photos/shell/000015.jpg")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"detr", "ssdlite", "frcnn"} {
		tr, err := transform.ParseTransform(name, transform.CHW)
		if err != nil {
			t.Fatal(err)
		}
		reads := 0
		ds := countBoxes{memDataset{[][]byte{data}}, fixedBoxes{{46, 85, 69, 383}, {138, 106, 367, 298}, {321, 319, 459, 425}}, &reads}
		fs, err := dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 1<<20, "boxes")
		if err != nil {
			t.Fatal(err)
		}
		again, err := dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 1<<20, "boxes")
		if err != nil {
			t.Fatal(err)
		}
		again.SetContiguousLabels() // not the draw's options: read again
		d := NewDecoder()
		out := make([]byte, tr.SampleBytes())
		for i := range uint64(12) {
			k := det.Key{Seed: 9, Index: i}
			reads = 0
			s := Sample{Data: data, Targets: ds, Fields: fs}
			if err := d.DecodeSample(s, tr, k, out); err != nil {
				t.Fatalf("%s sample %d: %v", name, i, err)
			}
			once, err := d.AppendTargets(nil, tr, fs)
			if err != nil {
				t.Fatalf("%s sample %d: %v", name, i, err)
			}
			if reads != 1 {
				t.Errorf("%s sample %d: its targets read %d times", name, i, reads)
			}
			reads = 0
			if err := d.DecodeSample(s, tr, k, out); err != nil {
				t.Fatal(err)
			}
			twice, err := d.AppendTargets(nil, tr, again)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{"detr": 2, "ssdlite": 2, "frcnn": 1}[name]; reads != want {
				t.Errorf("%s sample %d: read %d times where the job's options are not the draw's", name, i, reads)
			}
			if !bytes.Equal(once, twice) {
				t.Errorf("%s sample %d: the targets the plan read are not a second read's:\n%x\n%x", name, i, once, twice)
			}
		}
		d.Close()
	}
}

// TestSampleCarriesItsTargets: a sample's targets come with it
// (DecodeSample), never from the sample decoded before: a bare Decode
// after a sample with targets has none to append, and a RandomIoUCrop,
// which draws against them, refuses a sample handed without them rather
// than drawing against the last one's.
func TestSampleCarriesItsTargets(t *testing.T) {
	data, err := os.ReadFile("../testdata/photos/shell/000015.jpg")
	if err != nil {
		t.Fatal(err)
	}
	ds := fixedBoxes{{46, 85, 69, 383}, {138, 106, 367, 298}}
	for _, name := range []string{"frcnn", "ssdlite"} {
		tr, err := transform.ParseTransform(name, transform.CHW)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder()
		out := make([]byte, tr.SampleBytes())
		k := det.Key{Seed: 4, Index: 1}
		if err := d.DecodeSample(Sample{Data: data, Targets: ds}, tr, k, out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := d.AppendTargets(nil, tr, nil); err != nil {
			t.Fatalf("%s: the sample's targets: %v", name, err)
		}
		err = d.Decode(data, tr, k, out)
		if name == "ssdlite" { // its RandomIoUCrop draws against the boxes
			if err == nil || !strings.Contains(err.Error(), "target") {
				t.Errorf("%s: a sample without targets: %v; want its RandomIoUCrop refused for want of them (not drawn against the last sample's)", name, err)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		} else if _, err := d.AppendTargets(nil, tr, nil); err == nil {
			t.Errorf("%s: a bare Decode's sample appended targets (the last sample's)", name)
		}
		d.Close()
	}
}
