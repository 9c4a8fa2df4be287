// Package ragged is a batch's detection targets on the wire: the samples'
// targets, each made as targets.AppendTargets encodes one sample (the
// maker's and the verifier's unit, compared byte for byte), packed into a
// BatchTargets of ragged arrays (per array, every sample's instances back
// to back, and offsets into them) as a batch's header is made, and
// unpacked from a peer's header into the same per-sample bytes, every
// offset and length checked first.
package ragged

import (
	"encoding/binary"
	"fmt"
	"math"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// The per-sample encoding (targets.AppendTargets): a 24-byte header (u32
// H, u32 W, i64 image id, u32 K, u32 word: the boxes' format in its low
// byte, P above it, wordMasks when masks follow), K x 16 bytes of boxes, K
// x 8 of labels, K x P x 8 of keypoints, K crowd flags, K x P
// visibilities; with masks, zeros to a multiple of 4, K u32 run counts and
// the runs (u32), and where a Mask fill other than 0 filled pixels the
// fill block (u32 F, F u32 runs, F/2 values, zeros to a multiple of 4);
// with the overlap mask (wordOverlap, never with masks), zeros to a
// multiple of 4, then its H/r x W/r map (uint8, int32 past 255
// instances; r the job's mask_ratio) and zeros to a multiple of 4, or,
// with mask_overlap false, K such masks as bits, zeros to a multiple of 4.
const (
	header      = 24
	wordMasks   = 1 << 31
	wordOverlap = 1 << 30
	// maxP bounds P (the word's bits 8 to 29).
	maxP = 1<<22 - 1
	// formats is the boxes' formats (XYXY, XYWH, CXCYWH).
	formats = 3
)

var le = binary.LittleEndian

// sample is one sample's encoding, parsed.
type sample struct {
	h, w, k, p uint32
	id         int64
	format     uint32
	masks      bool
	overlap    bool
	// The byte offsets of its arrays in the encoding.
	labels, points, crowd, vis, counts, runs int
	nruns                                    int
	// fill is where the fill block starts (the encoding's end: none).
	fill int
	// omap is where the overlap mask starts.
	omap int
}

// Overlap is the ultralytics Format mask a job asks for (target_fields
// "overlap_mask"): Ratio its mask_ratio (0: none asked), Instances its
// mask_overlap=False (one mask an instance, as bits, in place of the map).
type Overlap struct {
	Ratio     int
	Instances bool
}

// OverlapOf is the mask a job's field set asks for (dataset.FieldSet's).
func OverlapOf(fs interface {
	OverlapMask() bool
	MaskRatio() int
	MaskOverlap() bool
}) Overlap {
	if !fs.OverlapMask() {
		return Overlap{}
	}
	return Overlap{Ratio: fs.MaskRatio(), Instances: !fs.MaskOverlap()}
}

// On says whether the job asks for it.
func (o Overlap) On() bool { return o.Ratio > 0 }

// bytes is the bytes of a sample's mask of k instances on an h x w
// canvas, padded to a multiple of 4 (pipeline/targets' MaskSize).
func (o Overlap) bytes(h, w, k int64) int64 {
	r := int64(o.Ratio)
	n := (h / r) * (w / r)
	if o.Instances {
		return ((k*n+7)/8 + 3) / 4 * 4
	}
	if k > 255 {
		n *= 4
	}
	return (n + 3) / 4 * 4
}

// parse parses one sample's encoding, checking that its lengths add up
// (ov: the mask the job asks for, for its size).
func parse(v []byte, ov Overlap) (sample, error) {
	var s sample
	if len(v) < header {
		return s, fmt.Errorf("%d bytes, want at least %d", len(v), header)
	}
	s.h, s.w, s.id, s.k = le.Uint32(v), le.Uint32(v[4:]), int64(le.Uint64(v[8:])), le.Uint32(v[16:])
	word := le.Uint32(v[20:])
	s.format, s.p = word&0xFF, (word&^(wordMasks|wordOverlap))>>8
	s.masks, s.overlap = word&wordMasks != 0, word&wordOverlap != 0
	k, p := int64(s.k), int64(s.p)
	size := header + 25*k + 9*k*p
	if size > int64(len(v)) {
		return s, fmt.Errorf("%d bytes for %d instances of %d keypoints, want %d", len(v), k, p, size)
	}
	s.labels = header + 16*int(k)
	s.points = s.labels + 8*int(k)
	s.crowd = s.points + 8*int(k*p)
	s.vis = s.crowd + int(k)
	if s.masks && s.overlap {
		return s, fmt.Errorf("masks and the overlap mask together")
	}
	if s.overlap && !ov.On() {
		return s, nil // the caller refuses it (a mask the job does not ask for)
	}
	if s.overlap {
		s.omap = int(size+3) / 4 * 4
		if want := int64(s.omap) + ov.bytes(int64(s.h), int64(s.w), k); want != int64(len(v)) {
			return s, fmt.Errorf("%d bytes for %d instances of %d keypoints and an overlap mask of %dx%d, want %d", len(v), k, p, s.w, s.h, want)
		}
		return s, nil
	}
	if !s.masks {
		if size != int64(len(v)) {
			return s, fmt.Errorf("%d bytes for %d instances of %d keypoints, want %d", len(v), k, p, size)
		}
		return s, nil
	}
	s.counts = int(size+3) / 4 * 4
	if int64(s.counts)+4*k > int64(len(v)) {
		return s, fmt.Errorf("%d bytes: %d masks' run counts need %d", len(v), k, int64(s.counts)+4*k)
	}
	s.runs = s.counts + 4*int(k)
	var total int64
	for j := range int(k) {
		total += int64(le.Uint32(v[s.counts+4*j:]))
	}
	end := int64(s.runs) + 4*total
	if end > int64(len(v)) || end < int64(len(v)) && end+4 > int64(len(v)) {
		return s, fmt.Errorf("%d bytes for %d masks of %d runs, want %d (and a fill block)", len(v), k, total, end)
	}
	s.nruns, s.fill = int(total), int(end)
	if s.fill < len(v) {
		f := int64(le.Uint32(v[s.fill:]))
		if want := end + fillBlockBytes(f); want != int64(len(v)) {
			return s, fmt.Errorf("%d bytes for %d masks of %d runs and a fill block of %d runs, want %d", len(v), k, total, f, want)
		}
	}
	return s, nil
}

// fillBlockBytes is the bytes of a fill block of f runs: F, the runs and
// their f/2 values padded to a multiple of 4 (pipeline's FillBlockSize).
func fillBlockBytes(f int64) int64 { return 4 + 4*f + (f/2+3)/4*4 }

// Pack packs a batch's targets, vals[i] sample i's encoding, into a
// BatchTargets, its arrays slices of buf (grown as needed, returned for
// reuse): what goes on the wire in place of the per-sample bytes. Every
// sample has the same boxes' format, and masks exactly when the job asks
// for them (masks: a batch of no samples says so too), and the overlap
// mask exactly when the job asks for it (ov, whose ratio and mode give its
// size); else an error, as for an encoding whose lengths do not add up.
func Pack(vals [][]byte, masks bool, ov Overlap, buf []byte) (*stokerv1.BatchTargets, []byte, error) {
	overlap := ov.On()
	n := len(vals)
	ss := make([]sample, n)
	var k, kp, runs, om, fills int
	hasP := false
	for i, v := range vals {
		s, err := parse(v, ov)
		if err != nil {
			return nil, buf, fmt.Errorf("sample %d's targets: %v", i, err)
		}
		if s.masks != masks {
			return nil, buf, fmt.Errorf("sample %d's targets: masks %v, the job asks for masks %v", i, s.masks, masks)
		}
		if s.overlap != overlap {
			return nil, buf, fmt.Errorf("sample %d's targets: overlap mask %v, the job asks for it %v", i, s.overlap, overlap)
		}
		if i > 0 && s.format != ss[0].format {
			return nil, buf, fmt.Errorf("sample %d's targets: boxes' format %d, sample 0's %d: a batch's is one", i, s.format, ss[0].format)
		}
		ss[i] = s
		k += int(s.k)
		kp += int(s.k) * int(s.p)
		runs += s.nruns
		if masks {
			fills += len(v) - s.fill
		}
		if overlap {
			om += len(v) - s.omap
		}
		hasP = hasP || s.p != 0
	}
	if k > math.MaxUint32 || runs > math.MaxUint32 || fills > math.MaxUint32 {
		return nil, buf, fmt.Errorf("%d instances, %d runs and %d bytes of fill blocks: over the wire's uint32 offsets", k, runs, fills)
	}
	bt := &stokerv1.BatchTargets{
		Offsets:  make([]uint32, n+1),
		Canvas:   make([]uint32, 2*n),
		ImageIds: make([]int64, n),
	}
	bt.Masks, bt.OverlapMask = masks, overlap
	if overlap {
		mo := !ov.Instances
		bt.MaskRatio, bt.MaskOverlap = uint32(ov.Ratio), &mo
	}
	if n > 0 {
		bt.BoxFormat = ss[0].format
	}
	if hasP {
		bt.KeypointsPerInstance = make([]uint32, n)
	}
	size := 25*k + 9*kp
	if masks {
		size += 4*(k+1) + 4*runs
	}
	if fills > 0 {
		size += 4*(n+1) + fills
	}
	size += om
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	at := 0
	take := func(m int) []byte {
		b := buf[at : at+m : at+m]
		at += m
		return b
	}
	boxes, labels, crowd := take(16*k), take(8*k), take(k)
	points, vis := take(8*kp), take(kp)
	var moff, mruns, foff, mfills []byte
	if masks {
		moff, mruns = take(4*(k+1)), take(4*runs)
	}
	if fills > 0 {
		foff, mfills = take(4*(n+1)), take(fills)
	}
	omaps := take(om)
	var o, op, or, oo, of int
	for i, s := range ss {
		v, sk, skp := vals[i], int(s.k), int(s.k)*int(s.p)
		bt.Offsets[i] = uint32(o)
		bt.Canvas[2*i], bt.Canvas[2*i+1], bt.ImageIds[i] = s.h, s.w, s.id
		if hasP {
			bt.KeypointsPerInstance[i] = s.p
		}
		copy(boxes[16*o:], v[header:s.labels])
		copy(labels[8*o:], v[s.labels:s.points])
		copy(crowd[o:], v[s.crowd:s.vis])
		copy(points[8*op:], v[s.points:s.crowd])
		copy(vis[op:], v[s.vis:s.vis+skp])
		if masks {
			for j := range sk {
				le.PutUint32(moff[4*(o+j):], uint32(or))
				or += int(le.Uint32(v[s.counts+4*j:]))
			}
			copy(mruns[4*(or-s.nruns):], v[s.runs:s.fill])
		}
		if fills > 0 {
			le.PutUint32(foff[4*i:], uint32(of))
			of += copy(mfills[of:], v[s.fill:])
		}
		if overlap {
			oo += copy(omaps[oo:], v[s.omap:])
		}
		o, op = o+sk, op+skp
	}
	bt.Offsets[n] = uint32(o)
	if masks {
		le.PutUint32(moff[4*k:], uint32(or))
		bt.MaskOffsets, bt.MaskRuns = moff, mruns
	}
	if fills > 0 {
		le.PutUint32(foff[4*n:], uint32(of))
		bt.MaskFillOffsets, bt.MaskFills = foff, mfills
	}
	if overlap {
		bt.OverlapMasks = omaps
	}
	bt.Boxes, bt.Labels, bt.Iscrowd = boxes, labels, crowd
	if hasP {
		bt.Keypoints, bt.KeypointsVisibility = points, vis
	}
	return bt, buf, nil
}

// Size is the bytes the arrays of Pack's BatchTargets for a batch whose
// samples' encodings take total bytes hold at most: each sample's header
// (24 bytes) and masks' padding go, one run offset comes.
func Size(total int64) int64 { return total + 4 }
