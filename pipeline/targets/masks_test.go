package targets

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// refMask is a mask moved op by op as torchvision moves a uint8
// tv_tensors.Mask: crop_mask and pad_mask by their pixels, rotate_mask and
// affine_mask by the image kernels (NEAREST, the Mask's fill) on a plane
// of it in every channel.
type refMask struct {
	w, h int
	px   []byte
}

func (m refMask) crop(top, left, h, w int, fill byte) refMask {
	out := refMask{w, h, make([]byte, w*h)}
	for y := range h {
		for x := range w {
			v := fill
			if sy, sx := y+top, x+left; sy >= 0 && sx >= 0 && sy < m.h && sx < m.w {
				v = m.px[sy*m.w+sx]
			}
			out.px[y*w+x] = v
		}
	}
	return out
}

func (m refMask) resize(h, w int) refMask {
	out := refMask{w, h, make([]byte, w*h)}
	for y := range h {
		for x := range w {
			out.px[y*w+x] = m.px[kernels.NearestIndex(y, m.h, h)*m.w+kernels.NearestIndex(x, m.w, w)]
		}
	}
	return out
}

func (m refMask) flip(horizontal bool) refMask {
	out := refMask{m.w, m.h, make([]byte, len(m.px))}
	for y := range m.h {
		for x := range m.w {
			if horizontal {
				out.px[y*m.w+x] = m.px[y*m.w+m.w-1-x]
			} else {
				out.px[y*m.w+x] = m.px[(m.h-1-y)*m.w+x]
			}
		}
	}
	return out
}

// perspective is perspective_mask through coeffs: the image kernel
// (NEAREST, the Mask's fill) on a plane of it in every channel.
func (m refMask) perspective(coeffs *[8]float32, fill byte) refMask {
	f := float64(fill)
	pix := make([]byte, 3*m.w*m.h)
	for c := range 3 {
		copy(pix[c*m.w*m.h:], m.px)
	}
	p := kernels.Planes{Pix: pix, W: m.w, H: m.h}
	var s kernels.Scratch
	kernels.Perspective(p, coeffs, kernels.Nearest, [3]float64{f, f, f}, false, &s)
	return refMask{p.W, p.H, append([]byte(nil), p.Plane(0)...)}
}

// turn is rotate_mask (turn nil) or affine_mask of a (a's Fill set here).
func (m refMask) turn(angle float64, center [2]float64, hasCenter, expand bool, a *kernels.AffineParams, fill byte) refMask {
	f := float64(fill)
	ow, oh := m.w, m.h
	if a == nil && expand {
		ow, oh = kernels.RotatedSize(m.w, m.h, angle, center, hasCenter)
	}
	pix := make([]byte, 3*max(m.w*m.h, ow*oh))
	for c := range 3 {
		copy(pix[c*m.w*m.h:], m.px)
	}
	p := kernels.Planes{Pix: pix[:3*m.w*m.h], W: m.w, H: m.h}
	var s kernels.Scratch
	switch {
	case a != nil:
		a.Interp, a.Fill = kernels.Nearest, [3]float64{f, f, f}
		kernels.Affine(p, a, &s)
	case expand:
		p = kernels.RotateExpand(p, pix, angle, kernels.Nearest, center, hasCenter, [3]float64{f, f, f}, false, &s)
	default:
		kernels.Rotate(p, angle, kernels.Nearest, center, hasCenter, [3]float64{f, f, f}, false, &s)
	}
	return refMask{p.W, p.H, append([]byte(nil), p.Plane(0)...)}
}

// rle is a row-major 0/1 mask's COCO runs (column-major).
func rle(px []byte, w, h int) annot.RLE {
	var counts []uint32
	var cur byte
	var run uint32
	for x := range w {
		for y := range h {
			if v := px[y*w+x]; v != cur {
				counts, cur, run = append(counts, run), v, 0
			}
			run++
		}
	}
	return annot.RLE{H: h, W: w, Counts: append(counts, run)}
}

// decodeMasks reads AppendMasks' bytes after the targets (from at): k
// masks of w x h, the fill block's values set; and whether it had one.
func decodeMasks(t *testing.T, b []byte, at, k, w, h int) ([][]byte, bool) {
	t.Helper()
	le := binary.LittleEndian
	u32 := func() uint32 {
		if at+4 > len(b) {
			t.Fatalf("masks end at %d bytes, read past them", len(b))
		}
		v := le.Uint32(b[at:])
		at += 4
		return v
	}
	counts := make([]int, k)
	for j := range k {
		counts[j] = int(u32())
	}
	out := make([][]byte, k)
	for j := range k {
		runs := make([]uint32, counts[j])
		for i := range runs {
			runs[i] = u32()
		}
		m, ok := kernels.MaskFromRuns(nil, runs, w*h)
		if !ok {
			t.Fatalf("mask %d: runs %v do not cover %dx%d", j, runs, w, h)
		}
		out[j] = m
	}
	if at == len(b) {
		return out, false
	}
	n := int(u32())
	runs := make([]uint32, n)
	for i := range runs {
		runs[i] = u32()
	}
	vals := b[at : at+n/2]
	if want := at + (n/2+3)/4*4; want != len(b) {
		t.Fatalf("fill block of %d runs ends at %d, the bytes at %d", n, want, len(b))
	}
	for _, m := range out {
		if !kernels.ApplyFill(m, runs, vals) {
			t.Fatalf("fill runs %v (values %v) do not cover %dx%d", runs, vals, w, h)
		}
	}
	for i := 1; i < n; i += 2 {
		if vals[i/2] == 0 {
			t.Fatalf("fill run %d of value 0: the masks' own", i)
		}
	}
	return out, true
}

// TestMaskFillThroughChains moves random masks through random chains of
// pads of a Mask fill (0, 1, 255, any byte), crops, flips, nearest
// resizes, rotations (expanding too), affines and perspectives of a fill, as
// torchvision's Mask kernels move them an op at a time: AppendMasks gives
// those masks byte for byte (the fill block's values over the runs), no
// fill block where every fill was 0 (the bytes of masks filled with 0),
// and a bound one byte short of them fails the sample.
func TestMaskFillThroughChains(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 255))
	fills, perspectives := 0, 0
	for trial := range 300 {
		w, h := 2+r.IntN(30), 2+r.IntN(30)
		tg := &Targets{}
		tg.WantMasks = true
		const k = 2
		refs := make([]refMask, k)
		for j := range k {
			px := make([]byte, w*h)
			for i := range px {
				if r.IntN(3) == 0 {
					px[i] = 1
				}
			}
			refs[j] = refMask{w, h, px}
			tg.Add([4]float32{0, 0, 1, 1}, int64(j), false)
			tg.Masks = append(tg.Masks, rle(px, w, h))
		}
		tg.StartMasks(w, h)
		filled := false
		for range 1 + r.IntN(6) {
			fill := []byte{0, 1, 255, byte(r.IntN(256))}[r.IntN(4)]
			cw, ch := tg.MaskCanvas()
			switch op := r.IntN(8); op {
			case 0: // pad
				l, tp, rt, b := r.IntN(5), r.IntN(5), r.IntN(5), r.IntN(5)
				tg.CropMasks(-tp, -l, ch+tp+b, cw+l+rt, fill)
				for j := range refs {
					refs[j] = refs[j].crop(-tp, -l, ch+tp+b, cw+l+rt, fill)
				}
				filled = filled || fill != 0 && l+tp+rt+b > 0
			case 1: // crop (past the canvas too: zeros)
				top, left, nh, nw := r.IntN(ch+4)-2, r.IntN(cw+4)-2, 1+r.IntN(ch+2), 1+r.IntN(cw+2)
				tg.CropMasks(top, left, nh, nw, 0)
				for j := range refs {
					refs[j] = refs[j].crop(top, left, nh, nw, 0)
				}
			case 2:
				nh, nw := 1+r.IntN(40), 1+r.IntN(40)
				tg.ResizeMasks(nh, nw)
				for j := range refs {
					refs[j] = refs[j].resize(nh, nw)
				}
			case 3:
				tg.FlipMasksX()
				for j := range refs {
					refs[j] = refs[j].flip(true)
				}
			case 4:
				tg.FlipMasksY()
				for j := range refs {
					refs[j] = refs[j].flip(false)
				}
			case 5:
				angle := []float64{0, 90, 180, 270, 33.3, -147, 12}[r.IntN(7)]
				center, hasCenter := [2]float64{r.Float64() * float64(cw), r.Float64() * float64(ch)}, r.IntN(3) == 0
				expand := r.IntN(2) == 0
				tg.RotateMasks(angle, center, hasCenter, expand, fill)
				for j := range refs {
					refs[j] = refs[j].turn(angle, center, hasCenter, expand, nil, fill)
				}
				filled = filled || fill != 0
			case 6:
				a := kernels.AffineParams{Angle: r.Float64()*60 - 30, TX: r.Float64()*6 - 3, TY: r.Float64()*6 - 3, Scale: 0.7 + r.Float64()*0.6,
					ShearX: r.Float64()*20 - 10, ShearY: r.Float64()*10 - 5}
				tg.AffineMasks(&a, fill)
				for j := range refs {
					refs[j] = refs[j].turn(0, [2]float64{}, false, false, &a, fill)
				}
				filled = filled || fill != 0
			case 7: // a perspective's corners, each moved inward up to half the side
				start := [4][2]int{{0, 0}, {cw - 1, 0}, {cw - 1, ch - 1}, {0, ch - 1}}
				bw, bh := cw/2+1, ch/2+1
				end := [4][2]int{{r.IntN(bw), r.IntN(bh)}, {cw - 1 - r.IntN(bw), r.IntN(bh)},
					{cw - 1 - r.IntN(bw), ch - 1 - r.IntN(bh)}, {r.IntN(bw), ch - 1 - r.IntN(bh)}}
				c, err := kernels.PerspectiveCoeffs(&start, &end)
				if err != nil { // corners in a line: no perspective (a sample's fails)
					continue
				}
				perspectives++
				tg.PerspectiveMasks(&c, fill)
				for j := range refs {
					refs[j] = refs[j].perspective(&c, fill)
				}
				filled = filled || fill != 0
			}
		}
		tg.W, tg.H = tg.MaskCanvas()
		b := AppendTargets(nil, tg)
		b, err := tg.AppendMasks(b, 0, 1<<30, nil)
		if err != nil {
			t.Fatal(err)
		}
		at := int(TargetsSize(k, 0)+3) / 4 * 4
		got, block := decodeMasks(t, b, at, k, tg.W, tg.H)
		for j := range refs {
			if refs[j].w != tg.W || refs[j].h != tg.H || !bytes.Equal(got[j], refs[j].px) {
				t.Fatalf("trial %d: mask %d differs from torchvision's kernels' (%dx%d, the maps' %dx%d)", trial, j, refs[j].w, refs[j].h, tg.W, tg.H)
			}
		}
		if block && !filled {
			t.Fatalf("trial %d: a fill block where every fill was 0", trial)
		}
		if block {
			fills++
		}
		if _, err := tg.AppendMasks(AppendTargets(nil, tg), 0, int64(len(b))-1, nil); !errors.As(err, new(*dataset.TargetsTooLarge)) {
			t.Fatalf("trial %d: a bound one byte short of %d: %v", trial, len(b), err)
		}
	}
	if fills < 50 || perspectives < 50 {
		t.Errorf("of 300 chains %d had a fill block, %d perspectives drawn: the test draws too few", fills, perspectives)
	}
}

// TestMasksBoundAndStop: a sample whose instances' masks take more work
// than MaxInstancePixels fails by itself (ErrTooLarge, the message naming
// the bound) at the instance that passes it; one of instances each small
// passes whatever their number on the canvas (the work is their extent,
// not the canvas per instance); and a stop that says the sample was
// abandoned stops the masks before the next instance (ErrStopped).
func TestMasksBoundAndStop(t *testing.T) {
	const side = 512 // the bound lowered to 16 whole-canvas instances' work
	defer func(b int64) { maxInstancePixels = b }(maxInstancePixels)
	maxInstancePixels = 2 * 16 * side * side
	full := annot.RLE{H: side, W: side, Counts: []uint32{0, side * side}}
	small := annot.RLE{H: side, W: side, Counts: []uint32{side*side/2 + 7, 3, side*side/2 - 10}}
	start := func(k int, m annot.RLE) *Targets {
		tg := &Targets{}
		tg.WantMasks = true
		for range k {
			tg.Add([4]float32{0, 0, 1, 1}, 0, false)
			tg.Masks = append(tg.Masks, m)
		}
		tg.StartMasks(side, side)
		tg.W, tg.H = tg.MaskCanvas()
		return tg
	}
	tg := start(200, full)
	_, err := tg.AppendMasks(AppendTargets(nil, tg), 0, 1<<40, nil)
	if !errors.Is(err, dataset.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("over the bound of %d a sample", maxInstancePixels)) {
		t.Fatalf("200 whole-canvas instances of a %dx%d canvas: %v, want ErrTooLarge past the bound", side, side, err)
	}
	t.Log(err)
	tg = start(2000, small) // 2000 canvases walked before: 500 M pixels
	if _, err := tg.AppendMasks(AppendTargets(nil, tg), 0, 1<<40, nil); err != nil {
		t.Fatalf("5000 instances of 3 pixels each: %v", err)
	}
	tg = start(10, small)
	asked := 0
	_, err = tg.AppendMasks(AppendTargets(nil, tg), 0, 1<<40, func() bool { asked++; return asked > 3 })
	if !errors.Is(err, ErrStopped) || asked != 4 {
		t.Fatalf("stopped at the 4th instance: %v after %d asks, want ErrStopped after 4", err, asked)
	}
}
