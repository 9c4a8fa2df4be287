package ragged

import (
	"errors"
	"fmt"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Unpack unpacks bt, the targets of a peer's batch of n samples, into
// each sample's encoding (targets.AppendTargets' bytes, as the sample's
// maker made them), calling put(i, v) with sample i's, v appended to
// dst(i) (the sample's own buffer, emptied). Nothing of bt is trusted:
// the per-sample lists must be n long, the offsets start at 0, never go
// down and end at the arrays' lengths, every array be exactly as long as
// they say, the boxes' format one of three, masks as the job asks
// (masks), the overlap mask as the job asks (ov: its ratio and mode too), and no sample's
// encoding over max bytes (the job's bound of a sample's targets). The
// first that is not is the error, naming it.
func Unpack(bt *stokerv1.BatchTargets, n int, masks bool, ov Overlap, max int64, dst func(i int) []byte, put func(i int, v []byte)) error {
	overlap := ov.On()
	if bt == nil {
		return errors.New("a batch without its targets (BatchHeader.targets)")
	}
	off, canvas, ids, ps := bt.GetOffsets(), bt.GetCanvas(), bt.GetImageIds(), bt.GetKeypointsPerInstance()
	switch {
	case len(off) != n+1 || len(canvas) != 2*n || len(ids) != n:
		return fmt.Errorf("targets: %d offsets, %d canvas sizes and %d image ids for %d samples: want %d, %d and %d", len(off), len(canvas), len(ids), n, n+1, 2*n, n)
	case len(ps) != 0 && len(ps) != n:
		return fmt.Errorf("targets: %d keypoint counts for %d samples", len(ps), n)
	case off[0] != 0:
		return fmt.Errorf("targets: offsets start at %d, want 0", off[0])
	case bt.GetBoxFormat() >= formats:
		return fmt.Errorf("targets: box format %d, want 0 (XYXY), 1 (XYWH) or 2 (CXCYWH)", bt.GetBoxFormat())
	case bt.GetMasks() != masks:
		return fmt.Errorf("targets: masks %v, the job asks for masks %v", bt.GetMasks(), masks)
	case bt.GetOverlapMask() != overlap:
		return fmt.Errorf("targets: overlap mask %v, the job asks for it %v", bt.GetOverlapMask(), overlap)
	case masks && overlap:
		return errors.New("targets: masks and the overlap mask together")
	case overlap && (int(bt.GetMaskRatio()) != ov.Ratio || (bt.MaskOverlap == nil || *bt.MaskOverlap) == ov.Instances):
		return fmt.Errorf("targets: mask_ratio %d, mask_overlap %v, the job asks for %d, %v", bt.GetMaskRatio(), bt.MaskOverlap == nil || *bt.MaskOverlap, ov.Ratio, !ov.Instances)
	}
	var kp, om int64
	for i := range n {
		if off[i+1] < off[i] {
			return fmt.Errorf("targets: offsets go down at sample %d (%d, then %d)", i, off[i], off[i+1])
		}
		if len(ps) > 0 {
			if ps[i] > maxP {
				return fmt.Errorf("targets: sample %d with %d keypoints an instance, over %d", i, ps[i], maxP)
			}
			kp += int64(off[i+1]-off[i]) * int64(ps[i])
		}
		if overlap {
			om += ov.bytes(int64(canvas[2*i]), int64(canvas[2*i+1]), int64(off[i+1]-off[i]))
		}
	}
	k := int64(off[n])
	want := []struct {
		name string
		got  int
		size int64
	}{
		{"boxes", len(bt.GetBoxes()), 16 * k}, {"labels", len(bt.GetLabels()), 8 * k}, {"iscrowd", len(bt.GetIscrowd()), k},
		{"keypoints", len(bt.GetKeypoints()), 8 * kp}, {"keypoints_visibility", len(bt.GetKeypointsVisibility()), kp},
		{"mask_offsets", len(bt.GetMaskOffsets()), 0}, {"mask_runs", len(bt.GetMaskRuns()), 0},
		{"overlap_masks", len(bt.GetOverlapMasks()), om},
		{"mask_fill_offsets", len(bt.GetMaskFillOffsets()), 0}, {"mask_fills", len(bt.GetMaskFills()), 0},
	}
	var moff, runs, foff, fills []byte
	if masks {
		moff, runs = bt.GetMaskOffsets(), bt.GetMaskRuns()
		want[5].size = 4 * (k + 1)
		want[6].size = int64(len(runs)) / 4 * 4
		if foff, fills = bt.GetMaskFillOffsets(), bt.GetMaskFills(); len(foff) > 0 {
			want[8].size, want[9].size = 4*int64(n+1), int64(len(fills))
		}
	}
	for _, w := range want {
		if int64(w.got) != w.size {
			return fmt.Errorf("targets: %s of %d bytes, want %d for %d instances (offsets[%d])", w.name, w.got, w.size, k, n)
		}
	}
	if masks {
		prev := uint32(0)
		for j := range k + 1 {
			o := le.Uint32(moff[4*j:])
			switch {
			case j == 0 && o != 0:
				return fmt.Errorf("targets: mask offsets start at %d, want 0", o)
			case o < prev:
				return fmt.Errorf("targets: mask offsets go down at instance %d (%d, then %d)", j, prev, o)
			}
			prev = o
		}
		if int64(prev) != int64(len(runs))/4 {
			return fmt.Errorf("targets: mask offsets end at %d, mask_runs holds %d runs", prev, len(runs)/4)
		}
	}
	if len(foff) > 0 {
		prev := uint32(0)
		for i := range n + 1 {
			o := le.Uint32(foff[4*i:])
			switch {
			case i == 0 && o != 0:
				return fmt.Errorf("targets: mask fill offsets start at %d, want 0", o)
			case o < prev || o%4 != 0:
				return fmt.Errorf("targets: mask fill offsets at sample %d: %d after %d, want non-decreasing multiples of 4", i, o, prev)
			}
			prev = o
		}
		if int64(prev) != int64(len(fills)) {
			return fmt.Errorf("targets: mask fill offsets end at %d, mask_fills holds %d bytes", prev, len(fills))
		}
		for i := range n { // each sample's block: F and its runs and values
			f0, f1 := int64(le.Uint32(foff[4*i:])), int64(le.Uint32(foff[4*(i+1):]))
			if f1 > f0 && (f1-f0 < 4 || fillBlockBytes(int64(le.Uint32(fills[f0:]))) != f1-f0) {
				return fmt.Errorf("targets: sample %d's fill block of %d bytes does not add up", i, f1-f0)
			}
		}
	}
	var op, oo int64
	for i := range n {
		a, b := int64(off[i]), int64(off[i+1])
		sk := b - a
		var p int64
		if len(ps) > 0 {
			p = int64(ps[i])
		}
		size := header + 25*sk + 9*sk*p
		var r0, r1, f0, f1 int64
		if masks {
			r0, r1 = int64(le.Uint32(moff[4*a:])), int64(le.Uint32(moff[4*b:]))
			size = (size+3)/4*4 + 4*sk + 4*(r1-r0)
			if len(foff) > 0 {
				f0, f1 = int64(le.Uint32(foff[4*i:])), int64(le.Uint32(foff[4*(i+1):]))
				size += f1 - f0
			}
		}
		var ob int64
		if overlap {
			ob = ov.bytes(int64(canvas[2*i]), int64(canvas[2*i+1]), sk)
			size = (size+3)/4*4 + ob
		}
		if size > max {
			return fmt.Errorf("targets: sample %d's of %d bytes, over the job's bound of %d", i, size, max)
		}
		v := dst(i)
		base := len(v)
		v = le.AppendUint32(v, canvas[2*i])
		v = le.AppendUint32(v, canvas[2*i+1])
		v = le.AppendUint64(v, uint64(ids[i]))
		v = le.AppendUint32(v, uint32(sk))
		word := bt.GetBoxFormat() | uint32(p)<<8
		if masks {
			word |= wordMasks
		}
		if overlap {
			word |= wordOverlap
		}
		v = le.AppendUint32(v, word)
		v = append(v, bt.GetBoxes()[16*a:16*b]...)
		v = append(v, bt.GetLabels()[8*a:8*b]...)
		v = append(v, bt.GetKeypoints()[8*op:8*(op+sk*p)]...)
		v = append(v, bt.GetIscrowd()[a:b]...)
		v = append(v, bt.GetKeypointsVisibility()[op:op+sk*p]...)
		op += sk * p
		if masks {
			for (len(v)-base)%4 != 0 {
				v = append(v, 0)
			}
			for j := a; j < b; j++ {
				v = le.AppendUint32(v, le.Uint32(moff[4*(j+1):])-le.Uint32(moff[4*j:]))
			}
			v = append(v, runs[4*r0:4*r1]...)
			v = append(v, fills[f0:f1]...)
		}
		if overlap {
			for (len(v)-base)%4 != 0 {
				v = append(v, 0)
			}
			v = append(v, bt.GetOverlapMasks()[oo:oo+ob]...)
			oo += ob
		}
		put(i, v)
	}
	return nil
}
