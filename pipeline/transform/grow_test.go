package transform

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// The ops of the growth tests: a RandomRotation with expand=True of
// degrees (lo, hi), the containers, and the ops that fix the size again
// (Resize((h, w)), CenterCrop) or are compiled for one size
// (TrivialAugmentWide), and GaussianBlur, which runs on any size.
func growRot(lo, hi float64) optab.Op {
	return optab.Op{Kind: OpRandomRotation, Args: &RotationArgs{Degrees: [2]float64{lo, hi}, Expand: true}}
}

func growIn(kind optab.OpKind, ops ...optab.Op) optab.Op {
	return optab.Op{Kind: kind, P: 0.5, Ops: ops}
}

func growResize(h, w int) optab.Op { return optab.Op{Kind: OpResize, Size: [2]int{h, w}} }
func growCrop(h, w int) optab.Op   { return optab.Op{Kind: OpCenterCrop, Size: [2]int{h, w}} }

var (
	growBlur   = optab.Op{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{5, 5}, Sigma: [2]float64{0.1, 2}}}
	growJitter = optab.Op{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.4}}
	growTA     = optab.Op{Kind: optab.OpTrivialAugmentWide, Args: &optab.TrivialAugmentWideArgs{Bins: 31}}
)

// TestGrowthWalkFigures: the sizes, rooms and buffers of transforms whose
// ops grow the image (growRotate, RoomFor, GrowBytes: one walk,
// walkGrowth), rotations at the top level and in containers, the size
// fixed again or not, the rotation first (the geometry the image whole)
// or after a Resize. The figures are those the three walks gave before
// they were one (checked on the code before the change), RoomFor and
// GrowBytes of a 500x375 and a 4000x100 image; a RandomChoice's since
// the walk takes one of its ops.
func TestGrowthWalkFigures(t *testing.T) {
	apply := func(ops ...optab.Op) optab.Op { return growIn(optab.OpRandomApply, ops...) }
	rot45 := growRot(-45, 45)
	for _, c := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{growResize(200, 300), growRot(-30, 30)},
			"out 361x325 geom 300x200 room 351975 vary true whole false RoomFor 351975 351975 GrowBytes 0 0"},
		{[]optab.Op{growResize(200, 300), growRot(-30, 30), growCrop(100, 120)},
			"out 120x100 geom 300x200 room 351975 vary false whole false RoomFor 351975 351975 GrowBytes 0 0"},
		{[]optab.Op{growResize(200, 300), apply(rot45, growRot(0, 90)), growJitter},
			"out 509x509 geom 300x200 room 777243 vary true whole false RoomFor 777243 777243 GrowBytes 0 0"},
		{[]optab.Op{growResize(200, 300), apply(rot45), growResize(64, 80), growRot(10, 20), growCrop(50, 60)},
			"out 60x50 geom 300x200 room 385530 vary false whole false RoomFor 385530 385530 GrowBytes 0 0"},
		{[]optab.Op{growResize(2000, 3000), rot45},
			"out 3607x3537 geom 3000x2000 room 38273877 vary true whole false RoomFor 38273877 38273877 GrowBytes 0 0"},
		{[]optab.Op{growResize(200, 300), apply(rot45, rot45, rot45, rot45, rot45, rot45, rot45, rot45)},
			"out 4094x4094 geom 300x200 room 50282508 vary true whole false RoomFor 50282508 50282508 GrowBytes 0 0"},
		{[]optab.Op{growResize(200, 300), growRot(-30, 30), growCrop(100, 120), growBlur},
			"out 120x100 geom 300x200 room 351975 vary false whole false RoomFor 351975 351975 GrowBytes 0 0"},
		// A RandomChoice runs one of its ops: its rotations' bounds are
		// each of the image it gets, not one after the other (509x509,
		// room 777243, before).
		{[]optab.Op{growResize(200, 300), growIn(optab.OpRandomChoice, rot45, growRot(0, 90), growJitter)},
			"out 362x362 geom 300x200 room 393132 vary true whole false RoomFor 393132 393132 GrowBytes 0 0"},
		{[]optab.Op{rot45, growResize(64, 80)},
			"out 80x64 geom 1x1 room 0 vary false whole true RoomFor 1166220 34838109 GrowBytes 150660 704943"},
		{[]optab.Op{rot45, apply(growRot(10, 80)), growCrop(100, 120), growJitter},
			"out 120x100 geom 1x1 room 0 vary false whole true RoomFor 2339067 73359075 GrowBytes 2339067 73359075"},
		{[]optab.Op{rot45, growResize(640, 800), apply(rot45), growResize(32, 48)},
			"out 48x32 geom 1x1 room 0 vary false whole true RoomFor 3139560 34838109 GrowBytes 1489860 6971103"},
	} {
		tr, err := NewTransform(CHW, c.ops...)
		if err != nil {
			t.Errorf("%s: %v", optab.OpsString(c.ops), err)
			continue
		}
		got := fmt.Sprintf("out %dx%d geom %dx%d room %d vary %v whole %v RoomFor %d %d GrowBytes %d %d", tr.outW, tr.outH, tr.geomW, tr.geomH, tr.room, tr.vary, tr.whole,
			tr.RoomFor(500, 375), tr.RoomFor(4000, 100), tr.GrowBytes(500, 375), tr.GrowBytes(4000, 100))
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", optab.OpsString(c.ops), got, c.want)
		}
	}
}

// TestOneSizeAfterGrowth: an op compiled for one size (a policy's
// magnitudes) may not run on an image a rotation
// with expand=True grew, at the top level or in a container: a
// RandomApply runs its ops in order, a RandomOrder each after any other;
// a RandomChoice's alternatives, and what comes before the rotation or
// after a Resize((h, w)) or CenterCrop fixes the size again, are
// accepted. Before, RandomApply([RandomRotation(expand=True),
// TrivialAugmentWide]) was accepted, its magnitudes fixed for the image
// before the rotation, where torchvision's are of the image it gets.
func TestOneSizeAfterGrowth(t *testing.T) {
	rot := growRot(-30, 30)
	size := growResize(200, 300)
	for _, c := range []struct {
		ops     []optab.Op
		refused optab.OpKind // "": accepted
	}{
		{[]optab.Op{size, rot, growTA}, optab.OpTrivialAugmentWide},
		{[]optab.Op{size, growIn(optab.OpRandomApply, rot, growTA)}, optab.OpTrivialAugmentWide},
		{[]optab.Op{size, growIn(optab.OpRandomApply, growIn(optab.OpRandomApply, rot), growTA)}, optab.OpTrivialAugmentWide},
		{[]optab.Op{size, growIn(optab.OpRandomOrder, growTA, rot)}, optab.OpTrivialAugmentWide},
		{[]optab.Op{size, growIn(optab.OpRandomOrder, growIn(optab.OpRandomApply, growTA), growJitter, rot)}, optab.OpTrivialAugmentWide},
		{[]optab.Op{size, growIn(optab.OpRandomChoice, rot, growJitter), growTA}, optab.OpTrivialAugmentWide},
		{[]optab.Op{size, growIn(optab.OpRandomApply, growTA, rot)}, ""},
		{[]optab.Op{size, growIn(optab.OpRandomChoice, rot, growTA)}, ""},
		{[]optab.Op{size, growIn(optab.OpRandomChoice, growTA, rot)}, ""},
		{[]optab.Op{size, growIn(optab.OpRandomOrder, growJitter, rot), growCrop(100, 120), growTA}, ""},
		{[]optab.Op{size, growTA, rot, growResize(64, 80), growBlur}, ""},
		// GaussianBlur runs on the size it gets: accepted after growth.
		{[]optab.Op{size, rot, growBlur}, ""},
		{[]optab.Op{size, growIn(optab.OpRandomOrder, growIn(optab.OpRandomApply, growBlur), growJitter, rot)}, ""},
		{[]optab.Op{growRot(-30, 30), growResize(64, 80), growBlur}, ""},
		{[]optab.Op{growRot(-30, 30), growIn(optab.OpRandomApply, growRot(0, 90), growBlur), growCrop(50, 60)}, ""},
	} {
		_, err := NewTransform(CHW, c.ops...)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: %v", optab.OpsString(c.ops), err)
		case c.refused == "":
		case err == nil:
			t.Errorf("%s: accepted; want %s refused after the rotation", optab.OpsString(c.ops), c.refused)
		case !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "op 1 (RandomRotation with expand=True): "+string(c.refused)+" after it is not supported: it is compiled for one size"):
			t.Errorf("%s: %v; want %s refused after the rotation", optab.OpsString(c.ops), err, c.refused)
		}
	}
}

// TestPolicyCompiledForItsSize: a policy whose magnitudes follow the
// image's size (RandAugment's translations: 150/331 of its width and
// height) after a rotation with expand=True and a CenterCrop or
// Resize((h, w)) that fixes the size again is compiled for that size, as
// the plain Resize((h, w)) then the policy is: its largest translation
// the same (54 px of a 120x100 image; 135, of the 300x200 image before the
// rotation, before the change). After a rotation of the image whole it is
// accepted once the size is fixed, and refused before.
func TestPolicyCompiledForItsSize(t *testing.T) {
	ra := optab.Op{Kind: optab.OpRandAugment, Args: &optab.RandAugmentArgs{NumOps: 2, Magnitude: 30, Bins: 31}}
	largest := func(ops ...optab.Op) float64 {
		tr, err := NewTransform(CHW, ops...)
		if err != nil {
			t.Fatalf("%s: %v", optab.OpsString(ops), err)
		}
		var buf []fn.Step
		most := 0.0
		for i := range 2000 {
			buf = tr.drawStepsFor(det.Key{Seed: 1, Index: uint64(i)}, buf[:0])
			for _, st := range buf {
				if st.Fn == fn.Affine {
					most = max(most, math.Abs(st.F[1]), math.Abs(st.F[2]))
				}
			}
		}
		return most
	}
	want := largest(growResize(100, 120), ra)
	if want != 54 {
		t.Fatalf("Resize(100x120), RandAugment: the largest translation %v px, want 54 (150/331 of 120, torchvision's bin 30)", want)
	}
	for _, ops := range [][]optab.Op{
		{growResize(200, 300), growRot(-30, 30), growCrop(100, 120), ra},
		{growResize(200, 300), growIn(optab.OpRandomApply, growRot(-30, 30)), growResize(100, 120), ra},
		{growRot(-30, 30), growResize(100, 120), ra},
		{growRot(-30, 30), growCrop(100, 120), growIn(optab.OpRandomApply, ra)},
	} {
		if got := largest(ops...); got != want {
			t.Errorf("%s: the largest translation %v px, want %v", optab.OpsString(ops), got, want)
		}
	}
	_, err := NewTransform(CHW, growRot(-30, 30), ra, growResize(100, 120))
	if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "RandAugment after it is not supported before a Resize((h, w)) or CenterCrop fixes the size") {
		t.Errorf("RandAugment between a rotation of the image whole and the Resize: %v; want refused", err)
	}
}
