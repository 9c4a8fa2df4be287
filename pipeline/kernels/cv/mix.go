package cv

import (
	"errors"
	"math"
	"sort"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// MixUp is MixUp.apply_image and apply_instances: a*r + b*(1-r) in float64
// per byte, truncated to uint8 as numpy's astype does, into a (a and b of
// one size); b's instances after a's. r is the drawn Beta(32, 32) ratio.
func MixUp(a, b kernels.Planes, r float64, ia, ib Instances) Instances {
	s := 1 - r
	for i, v := range a.Pix[:3*a.W*a.H] {
		a.Pix[i] = uint8(float64(float64(v)*r) + float64(float64(b.Pix[i])*s))
	}
	return Concat(ia, ib)
}

// FlipInstances is Instances.fliplr(w) in float32: x becomes w - x (boxes'
// ends swapped).
func FlipInstances(in *Instances, w int) {
	fw := float32(w)
	for i := range in.Boxes {
		b := &in.Boxes[i]
		b[0], b[2] = fw-b[2], fw-b[0]
	}
	for _, s := range in.Segments {
		for j := range s {
			s[j][0] = fw - s[j][0]
		}
	}
	for _, k := range in.Keypoints {
		for j := range k {
			k[j][0] = fw - k[j][0]
		}
	}
}

// ioa is utils.metrics.bbox_ioa(b1, b2) for one pair in float32: their
// intersection over b2's area (+1e-7).
func ioa(b1, b2 [4]float32) float32 {
	iw := max(min(b1[2], b2[2])-max(b1[0], b2[0]), 0)
	ih := max(min(b1[3], b2[3])-max(b1[1], b2[1]), 0)
	return float32(iw*ih) / (float32((b2[2]-b2[0])*(b2[3]-b2[1])) + 1e-7)
}

// CopyPasteSelect is CopyPaste.get_params in flip mode for instances in
// (with segments) of a w-wide image: their mirrored copies, and the
// indices of the copies to paste: those whose IoA with every instance is
// below 0.30, by their largest IoA ascending (ties in index order, a
// stable sort: numpy's default argsort, which ultralytics calls, orders
// ties by x86-simd-sort on AVX2 and AVX-512 machines, whatever their
// count, so that the order of tied copies, and which of them a p below 1
// takes, may differ there), the first round(p * count) (Python's
// rounding, half to even).
func CopyPasteSelect(in Instances, w int, p float64) (Instances, []int) {
	flipped := in.Clone()
	FlipInstances(&flipped, w)
	return flipped, selectCopies(in, flipped, p)
}

// CopyPasteMixSelect is CopyPaste.get_params in mixup mode: the indices
// of the instances of another sample (from, made by the pre_transform)
// to paste onto instances in, chosen as CopyPasteSelect chooses the
// mirrored copies (IoA with every instance of in below 0.30, by their
// largest IoA, the first round(p * count)).
func CopyPasteMixSelect(in, from Instances, p float64) []int {
	return selectCopies(in, from, p)
}

// selectCopies is CopyPaste.get_params' choice of the copies of cand to
// paste onto in.
func selectCopies(in, cand Instances, p float64) []int {
	type cnd struct {
		i   int
		max float32
	}
	var cands []cnd
	for i, b2 := range cand.Boxes {
		ok, m := true, float32(0)
		for j, b1 := range in.Boxes {
			v := ioa(b2, b1)
			ok = ok && v < 0.30
			if j == 0 || v > m || v != v {
				m = v
			}
		}
		if ok {
			cands = append(cands, cnd{i, m})
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].max < cands[b].max })
	k := int(math.RoundToEven(p * float64(len(cands))))
	sel := make([]int, 0, k)
	for _, c := range cands[:k] {
		sel = append(sel, c.i)
	}
	return sel
}

// CopyPasteInstances is CopyPaste.apply_instances: in, then the selected
// mirrored copies.
func CopyPasteInstances(in, flipped Instances, sel []int) Instances {
	if len(sel) == 0 {
		return in
	}
	return Concat(in, pick(flipped, sel))
}

// pick is in's instances sel, in sel's order, as instances[sel] takes
// them (their segments and keypoints shared with in).
func pick(in Instances, sel []int) Instances {
	picked := Instances{Boxes: make([][4]float32, len(sel)), Cls: make([]int64, len(sel))}
	if len(in.Segments) > 0 {
		picked.Segments = make([][][2]float32, len(sel))
	}
	if in.Keypoints != nil {
		picked.Keypoints = make([][][3]float32, len(sel))
	}
	for j, i := range sel {
		picked.Boxes[j], picked.Cls[j] = in.Boxes[i], in.Cls[i]
		if picked.Segments != nil {
			picked.Segments[j] = in.Segments[i]
		}
		if picked.Keypoints != nil {
			picked.Keypoints[j] = in.Keypoints[i]
		}
	}
	return picked
}

// CutMixArea is CutMix._rand_bbox on a w x h image given its draws: lam
// (np.random.beta), cx and cy (np.random.randint(w), randint(h)): sides
// int(w*sqrt(1-lam)) and int(h*sqrt(1-lam)) around (cx, cy), clipped to
// the image, as float32 (x1, y1, x2, y2).
func CutMixArea(w, h int, lam float64, cx, cy int) [4]float32 {
	r := math.Sqrt(1 - lam)
	cw, ch := int(float64(w)*r), int(float64(h)*r)
	cl := func(v, hi int) float32 { return float32(min(max(v, 0), hi)) }
	return [4]float32{cl(cx-cw/2, w), cl(cy-ch/2, h), cl(cx+cw/2, w), cl(cy+ch/2, h)}
}

// CutMixFree is the areas that overlap no box (CutMix.get_params'
// bbox_ioa(areas, boxes).sum(1) <= 0), in order.
func CutMixFree(areas, boxes [][4]float32) []int {
	var free []int
	for i, a := range areas {
		var sum float32
		for _, b := range boxes {
			sum += ioa(a, b)
		}
		if sum <= 0 {
			free = append(free, i)
		}
	}
	return free
}

// CutMixPick is the partner's boxes CutMix takes into area: their IoA
// with it (the intersection over the box's own area) at least 0.01 where
// the sample has segments, else 0.1 (compared in float32, as numpy does
// with a Python float).
func CutMixPick(area [4]float32, boxes [][4]float32, segments bool) []int {
	thr := float32(0.1)
	if segments {
		thr = 0.01
	}
	var sel []int
	for j, b := range boxes {
		if ioa(area, b) >= thr {
			sel = append(sel, j)
		}
	}
	return sel
}

// CutMixImage is CutMix.apply_image: a's pixels in area (its corners as
// int32) become b's (a and b of one size), in place.
func CutMixImage(a, b kernels.Planes, area [4]float32) {
	x1, y1, x2, y2 := int(area[0]), int(area[1]), int(area[2]), int(area[3])
	n := a.W * a.H
	for c := 0; c < 3; c++ {
		for y := y1; y < y2; y++ {
			o := c*n + y*a.W
			copy(a.Pix[o+x1:o+x2], b.Pix[o+x1:o+x2])
		}
	}
}

// CutMixInstances is CutMix.apply_instances: in, then b's instances sel
// moved into area: add_padding(-x1, -y1), clipped to the area's size,
// add_padding(x1, y1), in float32 (b is left as it was).
func CutMixInstances(in, b Instances, area [4]float32, sel []int) Instances {
	p := pick(b, sel)
	two := p.Clone()
	x1, y1, x2, y2 := int(area[0]), int(area[1]), int(area[2]), int(area[3])
	two.AddPadding(float32(-x1), float32(-y1))
	two.Clip(x2-x1, y2-y1)
	two.AddPadding(float32(x1), float32(y1))
	return Concat(in, two)
}

// CopyPasteMask is the mask CopyPaste.apply_image pastes through, into m
// (w x h, one byte a pixel, cleared first): each selected mirrored
// segment's points truncated to int32 (astype) and filled with 1
// (cv2.drawContours with cv2.FILLED: OpenCV's outline and scanline fill,
// FillPoly's). pts is scratch (returned for reuse).
func CopyPasteMask(m []byte, w, h int, flipped Instances, sel []int, pts [][2]int32) [][2]int32 {
	clear(m[:w*h])
	for _, i := range sel {
		pts = pts[:0]
		for _, q := range flipped.Segments[i] {
			pts = append(pts, [2]int32{int32(q[0]), int32(q[1])})
		}
		FillPoly(m, w, h, pts)
	}
	return pts
}

// CopyPasteFrom is CopyPaste.apply_image in mixup mode given its mask:
// the pixels of p where it is set take src's (the other sample's, of p's
// size: cv2.copyTo), in place.
func CopyPasteFrom(p, src kernels.Planes, mask []byte) {
	n := p.W * p.H
	for c := 0; c < 3; c++ {
		dst, from := p.Pix[c*n:(c+1)*n], src.Pix[c*n:(c+1)*n]
		for i, m := range mask[:n] {
			if m != 0 {
				dst[i] = from[i]
			}
		}
	}
}

// CopyPasteImage is CopyPaste.apply_image given its mask (one byte a pixel,
// non-zero where a selected mirrored segment was drawn): those pixels take
// the mirrored image's (cv2.flip(im, 1), cv2.copyTo), in place.
func CopyPasteImage(p kernels.Planes, mask []byte) {
	n := p.W * p.H
	for c := 0; c < 3; c++ {
		pl := p.Pix[c*n : (c+1)*n]
		for y := 0; y < p.H; y++ {
			row, m := pl[y*p.W:(y+1)*p.W], mask[y*p.W:(y+1)*p.W]
			// The mirrored pixel of x is row[W-1-x], and a pixel and its
			// mirror may both be pasted: read from a copy of the row.
			var buf [4096]byte
			src := buf[:0]
			if p.W <= len(buf) {
				src = append(src, row...)
			} else {
				src = append([]byte{}, row...)
			}
			for x := range row {
				if m[x] != 0 {
					row[x] = src[p.W-1-x]
				}
			}
		}
	}
}

// The parity cases "mixup" (images[0] and [1], of one size, and their
// labels, mixed at r: into images[0]) and "copypaste" (images[0] and
// labels[0] at p: the mask given as images[1]'s first plane, or
// rasterized from the selected segments, CopyPasteMask; its ints the
// instances selected).
func init() {
	addCase("mixup", 2, func(c *CaseIn) (CaseOut, error) {
		var a struct {
			R float64 `json:"r"`
		}
		if err := c.Args(&a); err != nil {
			return CaseOut{}, err
		}
		ps := c.Images
		if len(c.Labels) != 2 || ps[0].W != ps[1].W || ps[0].H != ps[1].H {
			return CaseOut{}, errors.New("mixup: want two images of one size and their labels")
		}
		out := MixUp(ps[0], ps[1], a.R, c.Labels[0], c.Labels[1])
		return CaseOut{Images: ps[:1], Labels: &out}, nil
	})
	addCase("copypaste", 1, func(c *CaseIn) (CaseOut, error) {
		var a struct {
			P float64 `json:"p"`
		}
		if err := c.Args(&a); err != nil {
			return CaseOut{}, err
		}
		ps := c.Images
		if len(c.Labels) != 1 || len(ps) > 2 || len(ps) == 2 && (ps[1].W != ps[0].W || ps[1].H != ps[0].H) {
			return CaseOut{}, errors.New("copypaste: want the image, a mask of its size or none, and its labels")
		}
		flipped, sel := CopyPasteSelect(c.Labels[0], ps[0].W, a.P)
		var mask []byte
		if len(ps) == 2 {
			mask = ps[1].Pix[:ps[1].W*ps[1].H]
		} else {
			if len(sel) > 0 && len(flipped.Segments) != len(flipped.Boxes) {
				return CaseOut{}, errors.New("copypaste: labels without segments")
			}
			mask = make([]byte, ps[0].W*ps[0].H)
			CopyPasteMask(mask, ps[0].W, ps[0].H, flipped, sel, nil)
		}
		CopyPasteImage(ps[0], mask)
		out := CopyPasteInstances(c.Labels[0], flipped, sel)
		return CaseOut{Images: ps[:1], Labels: &out, Ints: sel}, nil
	})
}
