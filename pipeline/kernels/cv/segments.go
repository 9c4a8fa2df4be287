package cv

import "github.com/stoker-dev/stoker/pipeline/det"

// segment2box is ultralytics.utils.ops.segment2box(segment, w, h) in
// float32: the extent of a segment inside the image (its extent when it is
// wholly inside, zeros when it is wholly outside), else the extent of its
// points inside, its edges' crossings of the image's sides and the image's
// corners inside it (cv2.pointPolygonTest).
func segment2box(s [][2]float32, w, h int) [4]float32 {
	if len(s) == 0 {
		return [4]float32{}
	}
	fw, fh := float32(w), float32(h)
	b := [4]float32{s[0][0], s[0][1], s[0][0], s[0][1]}
	for _, p := range s[1:] {
		b = [4]float32{min(b[0], p[0]), min(b[1], p[1]), max(b[2], p[0]), max(b[3], p[1])}
	}
	if b[0] >= 0 && b[1] >= 0 && b[2] <= fw && b[3] <= fh {
		return b
	}
	if b[2] < 0 || b[3] < 0 || b[0] > fw || b[1] > fh {
		return [4]float32{}
	}
	first := true
	var out [4]float32
	add := func(x, y float32) {
		if first {
			out, first = [4]float32{x, y, x, y}, false
			return
		}
		out = [4]float32{min(out[0], x), min(out[1], y), max(out[2], x), max(out[3], y)}
	}
	for _, p := range s {
		if p[0] >= 0 && p[1] >= 0 && p[0] <= fw && p[1] <= fh {
			add(p[0], p[1])
		}
	}
	// The crossings, in numpy's order of the mask (point by point, then
	// bound by bound: x=0, x=w, y=0, y=h), though only the extent counts.
	bounds := [4]float32{0, fw, 0, fh}
	lims := [4]float32{fh, fh, fw, fw}
	for i, p := range s {
		q := s[(i+1)%len(s)]
		delta := [2]float32{q[0] - p[0], q[1] - p[1]}
		for k := 0; k < 4; k++ {
			ax := k / 2 // 0: x bounds, 1: y bounds
			t := (bounds[k] - p[ax]) / delta[ax]
			ix, iy := p[0]+float32(t*delta[0]), p[1]+float32(t*delta[1])
			other := [2]float32{ix, iy}[1-ax]
			if t >= 0 && t <= 1 && other >= 0 && other <= lims[k] {
				add(ix, iy)
			}
		}
	}
	for _, c := range [4][2]float32{{0, 0}, {fw, 0}, {0, fh}, {fw, fh}} {
		if pointInPolygon(s, c[0], c[1]) >= 0 {
			add(c[0], c[1])
		}
	}
	if first {
		return [4]float32{}
	}
	return out
}

// pointInPolygon is cv2.pointPolygonTest(contour, pt, measureDist=False)
// for a float32 contour: 1 inside, -1 outside, 0 on an edge or vertex.
func pointInPolygon(c [][2]float32, x, y float32) int {
	counter := 0
	v := c[len(c)-1]
	for _, cur := range c {
		v0 := v
		v = cur
		if (v0[1] <= y && v[1] <= y) || (v0[1] > y && v[1] > y) || (v0[0] < x && v[0] < x) {
			if y == v[1] && (x == v[0] || (y == v0[1] && ((v0[0] <= x && x <= v[0]) || (v[0] <= x && x <= v0[0])))) {
				return 0
			}
			continue
		}
		dist := float64(float64(y-v0[1])*float64(v[0]-v0[0])) - float64(float64(x-v0[0])*float64(v[1]-v0[1]))
		if dist == 0 {
			return 0
		}
		if v[1] < v0[1] {
			dist = -dist
		}
		if dist > 0 {
			counter++
		}
	}
	if counter%2 == 0 {
		return -1
	}
	return 1
}

// ResampleSegments resamples every segment to n points (ResampleSegment).
func ResampleSegments(segs [][][2]float32, n int) [][][2]float32 {
	out := make([][][2]float32, len(segs))
	for i, s := range segs {
		out[i] = det.ResampleSegment(s, n)
	}
	return out
}
