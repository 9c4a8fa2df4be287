package det

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
	num := n // the linspace's points
	if L < n {
		num = n - L
	}
	stop := float64(L - 1)
	step := 0.0
	if num > 1 {
		step = stop / float64(num-1)
	}
	// lin is np.linspace(0, L-1, num)'s i-th: i*step, the last exactly
	// L-1; [0] for num 1.
	lin := func(i int) float64 {
		if i == num-1 && num > 1 {
			return stop
		}
		return float64(i) * step
	}
	vertex := func(j int) [2]float32 {
		if j < len(s) {
			return s[j]
		}
		return s[0] // the closing point
	}
	// interp is np.interp(x, 0..L-1, the closed segment): below the first
	// or at a vertex (or the last) its value, else slope*(x - j) + fp[j]
	// in float64, slope fp[j+1] - fp[j] (over a step of 1).
	interp := func(x float64) [2]float32 {
		j := int(x)
		switch {
		case x <= 0:
			return s[0]
		case j >= L-1:
			return vertex(L - 1)
		case float64(j) == x:
			return vertex(j)
		}
		a, b := vertex(j), vertex(j+1)
		var p [2]float32
		for c := 0; c < 2; c++ {
			slope := float64(b[c]) - float64(a[c])
			p[c] = float32(float64(slope*(x-float64(j))) + float64(a[c]))
		}
		return p
	}
	out := make([][2]float32, 0, n)
	i := 0
	if L < n {
		// The linspace with the vertices' positions 0..L-1 merged in
		// (np.insert at np.searchsorted(x, v), left: before the first
		// value not below v).
		for v := 0; v < L; v++ {
			for ; i < num && lin(i) < float64(v); i++ {
				out = append(out, interp(lin(i)))
			}
			out = append(out, vertex(v))
		}
	}
	for ; i < num; i++ {
		out = append(out, interp(lin(i)))
	}
	return out
}
