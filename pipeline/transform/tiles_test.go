package transform

import (
	"errors"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestTileGrid: get_optimal_tiled_canvas as transformers 5.24's got_ocr2
// image processor computes it (InternVL's; the values printed by it), for
// COCO-sized, tiny, long and square images, other tile counts, and the
// ties its rule settles (a square of 1000: 1x1, 2x2 and 3x3 tie, 3x3 the
// last whose area the image's passes half of; 1792x896: 2x1 and 4x2).
func TestTileGrid(t *testing.T) {
	for _, c := range [][7]int{ // w, h, tile, min, max, want columns, rows
		{640, 480, 448, 1, 12, 4, 3},
		{480, 640, 448, 1, 12, 3, 4},
		{20, 12, 448, 1, 12, 3, 2},
		{240, 1000, 448, 1, 12, 1, 4},
		{1400, 180, 448, 1, 12, 8, 1},
		{1, 1, 448, 1, 12, 1, 1},
		{3000, 4000, 448, 1, 12, 3, 4},
		{1190, 8, 448, 1, 12, 12, 1},
		{896, 448, 448, 1, 12, 2, 1},
		{448, 448, 448, 1, 12, 1, 1},
		{1000, 1000, 448, 1, 12, 3, 3},
		{300, 300, 448, 1, 12, 1, 1},
		{600, 300, 448, 1, 6, 2, 1},
		{640, 480, 56, 2, 6, 3, 2},
		{1400, 180, 56, 2, 6, 6, 1},
		{200, 100, 448, 1, 6, 2, 1},
		{2000, 1000, 448, 1, 6, 2, 1},
		{1792, 896, 448, 1, 12, 4, 2},
		{800, 800, 448, 4, 12, 2, 2},
		{500, 250, 448, 1, 12, 2, 1},
	} {
		op := &optab.Op{Kind: OpTileResize, Args: &TileResizeArgs{TileSize: c[2], MinTiles: c[3], MaxTiles: c[4]}}
		cols, rows := TileGrid(op, c[0], c[1])
		w, h, err := TileSize(op, c[0], c[1])
		if past := max(c[5], c[6])*c[2] > optab.MaxSide; past { // 12x1 of 448: a side past MaxSide fails alone
			if cols != c[5] || rows != c[6] || !errors.Is(err, errs.TooLarge) {
				t.Errorf("TileGrid(%dx%d) = %dx%d, %v; want transformers' %dx%d, and too large", c[0], c[1], cols, rows, err, c[5], c[6])
			}
			continue
		}
		if cols != c[5] || rows != c[6] || err != nil || w != cols*c[2] || h != rows*c[2] {
			t.Errorf("TileGrid(%dx%d, tile %d, %d..%d tiles) = %dx%d (%dx%d, %v); transformers' %dx%d", c[0], c[1], c[2], c[3], c[4], cols, rows, w, h, err, c[5], c[6])
		}
	}
	for _, op := range []optab.Op{
		{Kind: OpTileResize, Args: &TileResizeArgs{TileSize: 448, MinTiles: 0, MaxTiles: 12}},
		{Kind: OpTileResize, Args: &TileResizeArgs{TileSize: 448, MinTiles: 13, MaxTiles: 12}},
		{Kind: OpTileResize, Args: &TileResizeArgs{TileSize: 0, MinTiles: 1, MaxTiles: 12}},
		{Kind: OpTileResize, Args: &TileResizeArgs{TileSize: 448, MinTiles: 1, MaxTiles: maxTiles + 1}},
		{Kind: OpTileResize, Args: &TileResizeArgs{TileSize: 448, MinTiles: 1, MaxTiles: 12, TokensPerTile: 0}},
	} {
		if err := checkTiles(&op, 0); err == nil {
			t.Errorf("checkTiles(%+v) accepted", op)
		}
	}
}

// TestTileViews: InternVL's canvas and thumbnail as two views: the
// canvas view's samples have their own sizes, the transform is ragged
// from the start (JobSpec.ragged or not), its layout's views ragged and
// not; a view of per-sample sizes that is not a vision-language resize is
// still refused.
func TestTileViews(t *testing.T) {
	tiles := optab.Op{Kind: OpTileResize, Args: &TileResizeArgs{TileSize: 448, MinTiles: 1, MaxTiles: 12, TokensPerTile: 256, Resampling: optab.Resampling{Interp: InterpBicubic}}}
	thumb := optab.Op{Kind: OpResize, Size: [2]int{448, 448}, Args: &ResizeArgs{Resampling: optab.Resampling{Interp: InterpBicubic}}}
	tf, err := NewViews(CHW, ViewGroup{Name: "tiles", Count: 1, Ops: []optab.Op{tiles}}, ViewGroup{Name: "thumbnail", Count: 1, Ops: []optab.Op{thumb}})
	if err != nil {
		t.Fatal(err)
	}
	if !tf.Varies() || !tf.Ragged() || !tf.View(0).Varies() || tf.View(1).Varies() || !tf.View(0).Ragged() {
		t.Fatalf("varies %v ragged %v; views: varies %v %v, ragged %v", tf.Varies(), tf.Ragged(), tf.View(0).Varies(), tf.View(1).Varies(), tf.View(0).Ragged())
	}
	if l := tf.ViewLayout(); len(l.ragged) != 2 || !l.ragged[0] || l.ragged[1] {
		t.Fatalf("layout's ragged views %v; want [true false]", l.ragged)
	}
	if h, w := tf.View(0).Size(); h != 5*448 || w != 5*448 {
		t.Fatalf("canvas bound %dx%d; want 5x5 tiles", h, w)
	}
	for _, c := range [][3]int{{640, 480, 13 * 256}, {448, 448, 256}, {896, 448, 3 * 256}} { // 4x3 and a thumbnail; one tile, none; 2x1 and one
		if got, err := tf.VisionTokens(c[0], c[1]); err != nil || got != int64(c[2]) {
			t.Errorf("VisionTokens(%dx%d) = %d, %v; want %d (tiles, the thumbnail past one, times 256)", c[0], c[1], got, err, c[2])
		}
	}
	bounded, err := NewViewsBound(CHW, [2]int{448, 8 * 448}, ViewGroup{Count: 1, Ops: []optab.Op{tiles}}, ViewGroup{Count: 1, Ops: []optab.Op{thumb}})
	if err != nil {
		t.Fatal(err)
	}
	if h, w := bounded.View(0).Size(); h != 448 || w != 8*448 {
		t.Fatalf("canvas bound %dx%d with max_size 448x3584", h, w)
	}
	if h, w := bounded.View(1).Size(); h != 448 || w != 448 {
		t.Fatalf("thumbnail %dx%d with max_size: a view of one size ignores it", h, w)
	}
	shortest := optab.Op{Kind: OpRandomShortestSize, Args: &ShortestSizeArgs{MinSize: []int{20, 30}, MaxSize: 40}}
	if _, err := NewViews(CHW, ViewGroup{Count: 2, Ops: []optab.Op{shortest}}); err == nil {
		t.Fatal("RandomShortestSize in two views accepted")
	}
}
