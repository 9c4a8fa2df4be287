package transform

// TileResize: the image side of InternVL's dynamic tiling (transformers'
// GotOcr2ImageProcessor with crop_to_patches, which InternVLProcessor
// holds): the grid of tiles (columns x rows, min_tiles to max_tiles of
// them) whose aspect is closest to the image's (get_optimal_tiled_canvas,
// its tie rule), and the whole image resized to that canvas, tile_size a
// tile's side, with torchvision's uint8 resize (bicubic, antialiased, by
// default). Each sample has its own size, as SmartResize's (op_smart.go);
// cutting the canvas into tiles is a view of it on the trainer's device
// (Batch.vision_inputs). The processor's thumbnail (the whole image
// resized to one tile, when the grid has more than one) is another view of
// the same decode: the preset "internvl" is a MultiView of the two.

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// OpTileResize is InternVL's tiled canvas: Multiple its tile side
// (size's height and width, square), MinPixels and MaxPixels its
// min_patches and max_patches (tiles), Interp its resample.
const OpTileResize optab.OpKind = "TileResize"

// TileResizeArgs are TileResize's arguments (optab.Op.Args): tile_size,
// min_tiles, max_tiles and tokens_per_tile, the model's vision tokens a
// tile becomes, for batch_tokens (InternVL's 256: 448 / 14 patches a
// side, halved by its pixel shuffle), and its interpolation.
type TileResizeArgs struct {
	TileSize, MinTiles, MaxTiles, TokensPerTile int
	optab.Resampling
}

// maxTiles bounds max_tiles (InternVL's checkpoints use 6 to 12; its
// document recipes up to 40): the grid search walks every grid of at most
// max_tiles tiles for each sample (about max_tiles^2 / 2 steps).
const maxTiles = 64

func init() {
	optab.Define(optab.Def{Kind: OpTileResize,
		Doc:   "InternVL's dynamic tiling (transformers' GotOcr2ImageProcessor, crop_to_patches): the whole image resized to the grid of tile_size tiles, min_tiles to max_tiles of them, whose aspect is closest to the image's; each sample its own size (the trainer cuts the tiles)",
		Named: true, Geometry: true, Targets: optab.TargetsMove, Stays: true,
		Params: []optab.Param{
			{Name: "tile_size", Typ: optab.PInt, Def: "448", At: func(o *optab.Op) any { return &optab.ArgsAt[TileResizeArgs](o).TileSize }, Lo: 1, Hi: optab.MaxSide},
			{Name: "min_tiles", Typ: optab.PInt, Def: "1", At: func(o *optab.Op) any { return &optab.ArgsAt[TileResizeArgs](o).MinTiles }, Lo: 1, Hi: maxTiles},
			{Name: "max_tiles", Typ: optab.PInt, Def: "12", At: func(o *optab.Op) any { return &optab.ArgsAt[TileResizeArgs](o).MaxTiles }, Lo: 1, Hi: maxTiles},
			{Name: "interpolation", Typ: optab.PInterp, Def: "'bicubic'", At: func(o *optab.Op) any { return &optab.ArgsAt[TileResizeArgs](o).Interp }},
			{Name: "tokens_per_tile", Typ: optab.PInt, Def: "256", At: func(o *optab.Op) any { return &optab.ArgsAt[TileResizeArgs](o).TokensPerTile }, Lo: 1, Hi: 1 << 16},
		},
		Misplaced: "TileResize after other ops is not supported: it is the geometry, first and alone, fused into the decode",
		Format: func(b *strings.Builder, op *optab.Op) {
			ta := optab.ArgsOf[TileResizeArgs](op)
			fmt.Fprintf(b, "(tile_size=%d, min_tiles=%d, max_tiles=%d, tokens_per_tile=%d", ta.TileSize, ta.MinTiles, ta.MaxTiles, ta.TokensPerTile)
			formatInterp(b, op)
		}})
	defineSelfSized(OpTileResize, selfSizer{check: checkTiles, size: TileSize,
		tokens: func(op *optab.Op, w, h, views int) (int64, error) { return tileTokens(op, w, h, views > 1) }, // its thumbnail a view
		bound: func(op *optab.Op) (int, int, string) {
			ta := optab.ArgsOf[TileResizeArgs](op)
			s := tileBound(op)
			return s, s, fmt.Sprintf("TileResize's own bound, a square of twice max_tiles=%d tiles", ta.MaxTiles)
		}})
}

// checkTiles checks a TileResize, the geometry's op n.
func checkTiles(op *optab.Op, n int) error {
	ta := optab.ArgsOf[TileResizeArgs](op)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: TileResize %s", errs.Unsupported, fmt.Sprintf(format, a...))
	}
	switch {
	case n > 0:
		return bad("must come first: it resizes the whole image")
	case ta.TileSize < 1 || ta.TileSize > optab.MaxSide:
		return bad("tile_size %d: want 1..%d", ta.TileSize, optab.MaxSide)
	case ta.MinTiles < 1 || ta.MaxTiles < ta.MinTiles || ta.MaxTiles > maxTiles:
		return bad("min_tiles %d, max_tiles %d: want 1 <= min_tiles <= max_tiles <= %d", ta.MinTiles, ta.MaxTiles, maxTiles)
	case ta.TokensPerTile < 1 || ta.TokensPerTile > 1<<16:
		return bad("tokens_per_tile %d: want 1..%d", ta.TokensPerTile, 1<<16)
	}
	return nil
}

// TileGrid is transformers' get_optimal_tiled_canvas for a w x h image:
// the (columns, rows) whose columns/rows is closest to w/h, in float64 as
// Python's; on a tie, the later grid (more tiles) while the image's area
// is more than half the grid's. The grids are walked in the order of
// get_all_supported_aspect_ratios (every columns x rows of min_tiles to
// max_tiles tiles, columns the outer loop, stably sorted by tiles): by
// tiles, then columns ascending; nothing is allocated.
func TileGrid(op *optab.Op, w, h int) (cols, rows int) {
	ta := optab.ArgsOf[TileResizeArgs](op)
	aspect, area := float64(w)/float64(h), float64(w)*float64(h)
	t := float64(ta.TileSize)
	best, diff := [2]int{1, 1}, math.Inf(1)
	for n := ta.MinTiles; n <= ta.MaxTiles; n++ {
		for c := 1; c <= n; c++ {
			if n%c != 0 {
				continue
			}
			g := [2]int{c, n / c}
			d := math.Abs(aspect - float64(g[0])/float64(g[1]))
			switch {
			case d < diff:
				best, diff = g, d
			case d == diff && area > float64(float64(0.5*t)*t)*float64(g[0])*float64(g[1]):
				best = g
			}
		}
	}
	return best[0], best[1]
}

// TileSize is a TileResize's canvas for a w x h image: tile_size times
// its grid's columns and rows.
func TileSize(op *optab.Op, w, h int) (rw, rh int, err error) {
	ta := optab.ArgsOf[TileResizeArgs](op)
	if w < 1 || h < 1 {
		return 0, 0, fmt.Errorf("%w: TileResize of a %dx%d image", errs.Unsupported, w, h)
	}
	c, r := TileGrid(op, w, h)
	rw, rh = c*ta.TileSize, r*ta.TileSize
	if rw > optab.MaxSide || rh > optab.MaxSide {
		return 0, 0, fmt.Errorf("%w: TileResize makes the %dx%d image %dx%d (%dx%d tiles of %d): past the largest side, %d",
			errs.TooLarge, w, h, rw, rh, c, r, ta.TileSize, optab.MaxSide)
	}
	return rw, rh, nil
}

// tileBound is the bound on a TileResize's samples without the job's
// max_size: a square of twice max_tiles tiles (its side rounded up to
// whole tiles, at most MaxSide), as smartBound's, so that every grid of
// up to about 2:1 fits (5x5 tiles of 12: 1x6 to 6x1 and 2x5); a longer
// one fails alone, naming the bound (give the job a max_size=(h, w) for
// panoramas).
func tileBound(op *optab.Op) int {
	ta := optab.ArgsOf[TileResizeArgs](op)
	s := int(math.Ceil(math.Sqrt(2*float64(ta.MaxTiles)))) * ta.TileSize
	return max(min(s, optab.MaxSide), ta.TileSize)
}

// tileTokens is the vision tokens a w x h image's tiles become under a
// TileResize: its tiles, and a thumbnail when thumbnail says the
// transform makes one (a second view) and the grid has more than one
// tile (as the processor adds it), times tokens_per_tile.
func tileTokens(op *optab.Op, w, h int, thumbnail bool) (int64, error) {
	ta := optab.ArgsOf[TileResizeArgs](op)
	if _, _, err := TileSize(op, w, h); err != nil {
		return 0, err
	}
	c, r := TileGrid(op, w, h)
	n := int64(c * r)
	if thumbnail && n > 1 {
		n++
	}
	return n * int64(ta.TokensPerTile), nil
}
