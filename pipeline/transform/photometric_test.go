package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

func photometricOp() optab.Op {
	return optab.Op{Kind: optab.OpRandomPhotometricDistort, P: 0.5, Args: &optab.PhotometricDistortArgs{Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}}
}

// TestPhotometricPlaces: before the geometry only when it ends in
// Resize((h, w)); at most maxPre; its ranges checked.
func TestPhotometricPlaces(t *testing.T) {
	resize := optab.Op{Kind: OpResize, Size: [2]int{32, 32}}
	zoom := optab.Op{Kind: OpRandomZoomOut, P: 0.5, Args: &ZoomOutArgs{SideRange: [2]float64{1, 4}}}
	for _, ops := range [][]optab.Op{{photometricOp(), resize}, {photometricOp(), zoom, resize}, {photometricOp(), photometricOp(), iouOp(), resize},
		{resize, photometricOp()}} {
		if _, err := NewTransform(CHW, ops...); err != nil {
			t.Errorf("%s: %v", optab.OpsString(ops), err)
		}
	}
	bad := photometricOp()
	bad.Args.(*optab.PhotometricDistortArgs).Jitter[3] = [2]float64{-0.6, 0}
	for _, tc := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{photometricOp(), {Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Scale: [2]float64{0.08, 1}, Ratio: [2]float64{0.75, 4.0 / 3}}}}, "needs a geometry that ends in Resize((h, w))"},
		{[]optab.Op{photometricOp(), {Kind: OpResize, Size: [2]int{32, 0}}, {Kind: OpCenterCrop, Size: [2]int{8, 8}}}, "needs a geometry that ends in Resize((h, w))"},
		{[]optab.Op{photometricOp(), zoom, {Kind: OpRandomCrop, Size: [2]int{8, 8}}}, "needs a geometry that ends in Resize((h, w))"},
		{[]optab.Op{photometricOp(), photometricOp(), photometricOp(), photometricOp(), photometricOp(), resize}, "5 ops before the geometry"},
		{[]optab.Op{resize, bad}, "hue [-0.6 0]"},
		{[]optab.Op{photometricOp()}, "no geometry op"},
	} {
		_, err := NewTransform(CHW, tc.ops...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(tc.ops), err, tc.want)
		}
	}
}
