package det

import "math"

// SegmentPoints is the length ultralytics' YOLODataset.update_labels_info
// resamples an image's segments to: 1000, or one more than its longest
// segment when that is longer.
func SegmentPoints(longest int) int {
	if longest > 1000 {
		return longest + 1
	}
	return 1000
}

// ResampleSegment is ultralytics.utils.ops.resample_segments for one
// segment s to n points: s itself when it has n, else s closed (its first
// point again at its end, L points), interpolated (np.interp in float64,
// then float32) at np.linspace(0, L-1, n-L) merged with the L vertices'
// positions 0..L-1 when L < n, else at np.linspace(0, L-1, n).
func ResampleSegment(s [][2]float32, n int) [][2]float32 {
	if len(s) == n || len(s) == 0 {
		return s
	}
	L := len(s) + 1
	var x []float64
	if L < n {
		lin := linspace(float64(L-1), n-L)
		x = make([]float64, 0, n)
		j := 0
		for v := 0; v < L; v++ {
			// np.insert at np.searchsorted(x, v) (left): before the first
			// value not below v.
			for j < len(lin) && lin[j] < float64(v) {
				x = append(x, lin[j])
				j++
			}
			x = append(x, float64(v))
		}
		x = append(x, lin[j:]...)
	} else {
		x = linspace(float64(L-1), n)
	}
	out := make([][2]float32, len(x))
	fp := func(j, c int) float64 { return float64(s[j%len(s)][c]) }
	for i, xv := range x {
		// np.interp over xp = 0..L-1: below the first or at a vertex (or
		// the last) its value, else slope*(x - xp[j]) + fp[j].
		j := int(math.Floor(xv))
		for c := 0; c < 2; c++ {
			var v float64
			switch {
			case xv <= 0:
				v = fp(0, c)
			case j >= L-1:
				v = fp(L-1, c)
			case float64(j) == xv:
				v = fp(j, c)
			default:
				slope := (fp(j+1, c) - fp(j, c)) / 1
				v = float64(slope*(xv-float64(j))) + fp(j, c)
			}
			out[i][c] = float32(v)
		}
	}
	return out
}

// linspace is np.linspace(0, stop, num) in float64: i*step with step
// stop/(num-1), the last exactly stop; [0] for num 1.
func linspace(stop float64, num int) []float64 {
	if num <= 0 {
		return nil
	}
	y := make([]float64, num)
	if num == 1 {
		return y
	}
	step := stop / float64(num-1)
	for i := range y {
		y[i] = float64(i) * step
	}
	if step == 0 {
		for i := range y {
			y[i] = float64(i) / float64(num-1) * stop
		}
	}
	y[num-1] = stop
	return y
}
