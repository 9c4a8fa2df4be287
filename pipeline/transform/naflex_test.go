package transform

import (
	"testing"

	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestNaFlexSize: get_image_size_for_max_num_patches as transformers
// 5.24's siglip2 image processor computes it (the values printed by it),
// for COCO-sized, tiny, long and square images and other patch budgets.
func TestNaFlexSize(t *testing.T) {
	for _, c := range [][6]int{ // w, h, patch, max patches, want w, want h
		{640, 480, 16, 256, 288, 224},
		{480, 640, 16, 256, 224, 288},
		{12, 20, 16, 256, 192, 320},
		{240, 1000, 16, 256, 128, 512},
		{1400, 180, 16, 256, 672, 96},
		{1, 1, 16, 256, 112, 112},
		{3000, 4000, 16, 1024, 432, 576},
		{777, 333, 14, 729, 560, 252},
		{1010, 5, 16, 256, 3232, 16},
		{224, 224, 16, 196, 224, 224},
		{70, 98, 16, 64, 112, 144},
	} {
		op := &optab.Op{Kind: OpNaFlexResize, Args: &NaFlexResizeArgs{PatchSize: c[2], MaxPatches: c[3]}}
		w, h, err := NaFlexSize(op, c[0], c[1])
		if err != nil || w != c[4] || h != c[5] {
			t.Errorf("NaFlexSize(%dx%d, patch %d, %d patches) = %dx%d, %v; transformers' %dx%d", c[0], c[1], c[2], c[3], w, h, err, c[4], c[5])
		}
	}
	if err := checkNaFlex(&optab.Op{Kind: OpNaFlexResize, Args: &NaFlexResizeArgs{PatchSize: 16, MaxPatches: 0}}, 0); err == nil {
		t.Error("max_num_patches 0 accepted")
	}
}
