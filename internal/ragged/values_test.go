package ragged

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/targets"
)

// TestCheck: the encodings a maker makes (keypoints, masks, a fill block,
// an overlap map) pass Check, and each value a lying peer could send out
// of range fails it, naming what.
func TestCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const k, p, classes = 3, 2, 80
	base := encode(r, 2, k, p, targets.BoxXYXY, true)
	labels := header + 16*k
	points := labels + 8*k
	crowd := points + 8*k*p
	vis := crowd + k
	counts := (vis + k*p + 3) / 4 * 4
	for j := range k { // labels within the classes
		le.PutUint64(base[labels+8*j:], uint64(r.IntN(classes)))
	}
	filled := withFill(r, slices.Clone(base))
	for _, v := range [][]byte{base, filled, encode(r, 1, 0, 0, targets.BoxXYWH, false), encode(r, 4, 5, 0, targets.BoxXYWH, false)} {
		if err := Check(v, Overlap{}, 0); err != nil {
			t.Fatalf("a maker's encoding: %v", err)
		}
	}
	if err := Check(base, Overlap{}, classes); err != nil {
		t.Fatalf("labels within %d classes: %v", classes, err)
	}
	nan := math.Float32bits(float32(math.NaN()))
	for _, tc := range []struct {
		name, want string
		v          []byte
		lie        func(v []byte)
	}{
		{"NaN box", "box: coordinate 1 is NaN", base, func(v []byte) { le.PutUint32(v[header+16+4:], nan) }},
		{"infinite box", "+Inf", base, func(v []byte) { le.PutUint32(v[header:], math.Float32bits(float32(math.Inf(1)))) }},
		{"label past the classes", "label 80", base, func(v []byte) { le.PutUint64(v[labels+8:], classes) }},
		{"negative label", "label -1", base, func(v []byte) { le.PutUint64(v[labels:], math.MaxUint64) }},
		{"crowd flag", "crowd flag 7", base, func(v []byte) { v[crowd+2] = 7 }},
		{"NaN keypoint", "keypoint 1: coordinate 0 is NaN", base, func(v []byte) { le.PutUint32(v[points+8*(p+1):], nan) }},
		{"visibility", "visibility 3", base, func(v []byte) { v[vis+1] = 3 }},
		{"mask runs short", "runs covering", base, func(v []byte) {
			at := counts + 4*k // instance 0's first run
			le.PutUint32(v[at:], le.Uint32(v[at:])+1)
		}},
		{"fill runs short", "fill block", filled, func(v []byte) {
			at := len(base) + 4 // the fill block's first run
			le.PutUint32(v[at:], le.Uint32(v[at:])+1)
		}},
		{"fill of 0", "the value 0", filled, func(v []byte) {
			f := int(le.Uint32(v[len(base):]))
			v[len(base)+4+4*f] = 0
		}},
		{"lengths", "want", base, func(v []byte) { le.PutUint32(v[16:], k+1) }},
	} {
		v := slices.Clone(tc.v)
		tc.lie(v)
		err := Check(v, Overlap{}, classes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestCheckOverlap: an overlap map's pixels are 0 to K (uint8, or int32
// past 255 instances); one past K fails. The bits of mask_overlap=False
// are not checked (any bit is a pixel).
func TestCheckOverlap(t *testing.T) {
	for _, k := range []int{3, 300} {
		tg := &targets.Targets{W: 41, H: 30, WantOverlap: true}
		for range k {
			tg.Add([4]float32{1, 2, 3, 4}, 0, false)
		}
		v := targets.AppendTargets(nil, tg)
		for len(v)%4 != 0 {
			v = append(v, 0)
		}
		at := len(v)
		ov := Overlap{Ratio: 4}
		v = append(v, make([]byte, ov.bytes(30, 41, int64(k)))...)
		if k > 255 {
			le.PutUint32(v[at+4*5:], uint32(k))
		} else {
			v[at+5] = byte(k)
		}
		if err := Check(v, ov, 1); err != nil {
			t.Fatalf("%d instances, a pixel of the last: %v", k, err)
		}
		if k > 255 {
			le.PutUint32(v[at+4*5:], uint32(k+1))
		} else {
			v[at+5] = byte(k + 1)
		}
		if err := Check(v, ov, 1); err == nil || !strings.Contains(err.Error(), "pixel 5") {
			t.Errorf("%d instances, a pixel past them: %v", k, err)
		}
		bits := Overlap{Ratio: 4, Instances: true}
		ones := append(slices.Clone(v[:at]), slices.Repeat([]byte{0xFF}, int(bits.bytes(30, 41, int64(k))))...)
		if err := Check(ones, bits, 1); err != nil {
			t.Errorf("%d instances' bits: %v", k, err)
		}
	}
}
