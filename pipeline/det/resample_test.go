package det

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
)

// TestResampleSegmentIsUltralytics: resample_segments' bits (ultralytics
// 8.4.190, numpy's interp), printed by it for these float32 polygons: 5
// points to 12 (each vertex twice), 13 to 12 (fewer than it has), 5 to
// 1000 (its SHA-256 of little-endian float32).
func TestResampleSegmentIsUltralytics(t *testing.T) {
	pts := func(bits []uint32) [][2]float32 {
		s := make([][2]float32, len(bits)/2)
		for i := range s {
			s[i] = [2]float32{math.Float32frombits(bits[2*i]), math.Float32frombits(bits[2*i+1])}
		}
		return s
	}
	a := pts([]uint32{1091111398, 1102934731, 1117798721, 1114168676, 1092000536, 1110261811, 1111465690, 1098880271, 1116924506, 1094049807})
	b := pts([]uint32{1109163460, 1112453682, 1110196303, 1114290220, 1116967243, 1119830242, 1105419366, 1115796894, 1116421698, 1105866038,
		1041798565, 1120055595, 1106163858, 1106980949, 1118984091, 1114247343, 1111262748, 1117431752, 1078081254, 1116562589, 1108718226,
		1091657029, 1115953562, 1119505139, 1101381824, 1115425085})
	ra := []uint32{1091111398, 1102934731, 1091111398, 1102934731, 1117798721, 1114168676, 1117798721, 1114168676, 1092000536, 1110261811,
		1092000536, 1110261811, 1111465690, 1098880271, 1111465690, 1098880271, 1116924506, 1094049807, 1116924506, 1094049807, 1091111398,
		1102934731, 1091111398, 1102934731}
	rb := []uint32{1109163460, 1112453682, 1111660543, 1115868033, 1113925327, 1118363570, 1112249113, 1110821046, 1100530885, 1117622162,
		1104748704, 1108710214, 1118483156, 1114695643, 1108110130, 1117194708, 1100305568, 1110098943, 1113493520, 1115312281, 1105702995,
		1116273186, 1109163460, 1112453682}
	for _, c := range []struct {
		name string
		in   [][2]float32
		want []uint32
	}{{"5 to 12", a, ra}, {"13 to 12", b, rb}} {
		got := ResampleSegment(c.in, 12)
		if len(got) != 12 {
			t.Fatalf("%s: %d points", c.name, len(got))
		}
		for i, p := range got {
			if math.Float32bits(p[0]) != c.want[2*i] || math.Float32bits(p[1]) != c.want[2*i+1] {
				t.Errorf("%s: point %d is %v, ultralytics (%v, %v)", c.name, i, p, math.Float32frombits(c.want[2*i]), math.Float32frombits(c.want[2*i+1]))
			}
		}
	}
	got := ResampleSegment(a, 1000)
	buf := make([]byte, 0, 8*len(got))
	for _, p := range got {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(p[0]))
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(p[1]))
	}
	sum := sha256.Sum256(buf)
	if h := hex.EncodeToString(sum[:]); len(got) != 1000 || h != "98ff88d692ab9e9b60538532d30d9d5272187c889ad17e1f845175a6d12144e2" {
		t.Errorf("5 to 1000: %d points, sha256 %s", len(got), h)
	}
	if s := ResampleSegment(a, 5); &s[0] != &a[0] {
		t.Error("a segment of n points is not left as it is")
	}
	if SegmentPoints(7) != 1000 || SegmentPoints(1000) != 1000 || SegmentPoints(1001) != 1002 {
		t.Error("SegmentPoints")
	}
}
