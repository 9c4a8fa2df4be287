package ragged

import (
	"fmt"
	"math"
)

// Check checks the values of one sample's targets (targets.AppendTargets'
// encoding, as Unpack makes it of a peer's header) where a linear pass
// over them can: boxes and keypoints finite in float32, labels within
// [0, classes) (classes 0: the dataset names no classes, and labels are
// not checked), crowd flags 0 or 1, visibilities 0, 1 or 2 (COCO's v),
// each instance's mask runs covering its H x W canvas exactly, the fill
// block's runs too with a value other than 0 a fill run, and the overlap
// map's values at most K (0: no instance, i: the i-th). Unpack checked
// that the lengths add up; Check parses them again (ov: the mask the job
// asks for), so it takes any bytes. What it cannot see (a finite box
// moved, a label changed within range) is left to the bytes compared
// where a sample is made again. The first value out of range is the
// error, naming the instance and the field.
func Check(v []byte, ov Overlap, classes int) error {
	s, err := parse(v, ov)
	if err != nil {
		return err
	}
	k, p := int(s.k), int(s.p)
	for j := range k {
		for c := range 4 {
			if f := math.Float32frombits(le.Uint32(v[header+16*j+4*c:])); math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("instance %d's box: coordinate %d is %v, want a finite number", j, c, f)
			}
		}
		if l := int64(le.Uint64(v[s.labels+8*j:])); classes > 0 && (l < 0 || l >= int64(classes)) {
			return fmt.Errorf("instance %d's label %d: the dataset's labels are 0 to %d", j, l, classes-1)
		}
		if c := v[s.crowd+j]; c > 1 {
			return fmt.Errorf("instance %d's crowd flag %d: want 0 or 1", j, c)
		}
	}
	for q := range k * p {
		for c := range 2 {
			if f := math.Float32frombits(le.Uint32(v[s.points+8*q+4*c:])); math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("instance %d's keypoint %d: coordinate %d is %v, want a finite number", q/p, q%p, c, f)
			}
		}
		if vis := v[s.vis+q]; vis > 2 {
			return fmt.Errorf("instance %d's keypoint %d: visibility %d, want 0, 1 or 2", q/p, q%p, vis)
		}
	}
	canvas := uint64(s.h) * uint64(s.w)
	switch {
	case s.masks:
		r := s.runs
		for j := range k {
			n := int(le.Uint32(v[s.counts+4*j:]))
			var sum uint64
			for q := range n {
				sum += uint64(le.Uint32(v[r+4*q:]))
			}
			r += 4 * n
			if sum != canvas {
				return fmt.Errorf("instance %d's mask: %d runs covering %d pixels, want %dx%d = %d", j, n, sum, s.w, s.h, canvas)
			}
		}
		if s.fill < len(v) {
			return checkFills(v[s.fill:], canvas)
		}
	case s.overlap && ov.On() && !ov.Instances:
		n := int(s.h/uint32(ov.Ratio)) * int(s.w/uint32(ov.Ratio))
		m := v[s.omap:]
		for q := range n {
			var x uint32
			if k > 255 {
				x = le.Uint32(m[4*q:])
			} else {
				x = uint32(m[q])
			}
			if x > uint32(k) {
				return fmt.Errorf("overlap mask: pixel %d is %d, past the %d instances", q, x, k)
			}
		}
	}
	return nil
}

// checkFills checks a fill block (parse checked its length): its runs
// cover the canvas of n pixels, each fill run's value is one other than 0
// (a fill of 0 is the masks' own pixels).
func checkFills(b []byte, n uint64) error {
	f := int(le.Uint32(b))
	var sum uint64
	for q := range f {
		sum += uint64(le.Uint32(b[4+4*q:]))
	}
	if sum != n {
		return fmt.Errorf("the masks' fill block: %d runs covering %d pixels, want %d", f, sum, n)
	}
	for q, val := range b[4+4*f : 4+4*f+f/2] {
		if val == 0 {
			return fmt.Errorf("the masks' fill block: fill run %d has the value 0, want a fill other than 0", q)
		}
	}
	return nil
}
