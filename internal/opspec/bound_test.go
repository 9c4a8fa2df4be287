package opspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestMaxSize: TransformSpec.max_size bounds an op list's per-sample sizes
// (the references' hflip recipe: a flip alone), (height, width); it is
// refused with a preset or views and of another length than 2, and out of
// 1..MaxSide a side; without it the recipe is refused unless the dataset's
// images' largest size is given (TransformData), which then bounds it.
func TestMaxSize(t *testing.T) {
	flip := []*stokerv1.Op{Wire("RandomHorizontalFlip")}
	tf, err := Transform(&stokerv1.TransformSpec{Ops: flip, MaxSize: []uint32{600, 800}}, transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tf.Size(); !tf.Varies() || h != 600 || w != 800 {
		t.Fatalf("max_size (600, 800): Varies %v, size %dx%d", tf.Varies(), h, w)
	}
	for _, c := range []struct {
		spec *stokerv1.TransformSpec
		want string
	}{
		{&stokerv1.TransformSpec{Ops: flip}, "max_size=(h, w)"},
		{&stokerv1.TransformSpec{Ops: flip, MaxSize: []uint32{600}}, "max_size of 1 values"},
		{&stokerv1.TransformSpec{Ops: flip, MaxSize: []uint32{600, 0}}, "want 1.."},
		{&stokerv1.TransformSpec{Ops: flip, MaxSize: []uint32{600, 1 << 31}}, "want 1.."},
		{&stokerv1.TransformSpec{Preset: "ssdlite", MaxSize: []uint32{600, 800}}, "not with a preset"},
	} {
		if _, err := Transform(c.spec, transform.CHW); err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want refused with %q", c.spec, err, c.want)
		}
	}
	tf, err = TransformData(&stokerv1.TransformSpec{Ops: flip}, transform.CHW, 640, 480)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tf.Size(); !tf.Varies() || h != 480 || w != 640 {
		t.Fatalf("images of at most 640x480: Varies %v, size %dx%d", tf.Varies(), h, w)
	}
	tf, err = TransformData(&stokerv1.TransformSpec{Ops: flip, MaxSize: []uint32{100, 200}}, transform.CHW, 640, 480)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tf.Size(); h != 100 || w != 200 {
		t.Fatalf("max_size given beside the dataset's: size %dx%d, want the job's 100x200", h, w)
	}
}
