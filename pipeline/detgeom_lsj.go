package pipeline

// FixedSizeCrop's boxes (large-scale jitter, lsj.go), as torchvision's
// FixedSizeCrop moves a tv_tensors.BoundingBoxes, in float32.

// fixedSizeCrop is FixedSizeCrop on t's instances on a w x h canvas, with
// st's crop (top, left, height, width) and size: when the crop is not the
// whole canvas (its needs_crop), torchvision's crop_bounding_boxes (the
// offset subtracted, clamped to the crop), then the instances whose
// width or height (XYWH's, x2 - x1 and y2 - y1 in float32) is not above 0
// dropped with their labels and crowd flags (its is_valid); then pad on
// the right and bottom, which moves no box. Keypoints are cropped as
// crop_keypoints does (the offset subtracted, not clamped) and dropped
// with their instance, as SanitizeBoundingBoxes drops them; masks are
// cropped and dropped so, and padded with 0 (the detection references'
// FixedSizeCrop pads target["masks"] with 0 whatever its fill). It
// returns the canvas, the size.
func (t *Targets) fixedSizeCrop(w, h int, st *Step) (int, int) {
	top, left, ch, cw := st.I[0], st.I[1], st.I[2], st.I[3]
	if ch != h || cw != w {
		if t.WantMasks {
			t.cropMasks(top, left, ch, cw)
		}
		cropBoxes(t.Boxes, top, left, ch, cw)
		shiftPoints(t.Points, -left, -top)
		n := 0
		for k, b := range t.Boxes {
			if b[2]-b[0] > 0 && b[3]-b[1] > 0 {
				t.Boxes[n], t.Labels[n], t.Crowd[n] = b, t.Labels[k], t.Crowd[k]
				t.KeepPoints(n, k)
				n++
			}
		}
		t.Boxes, t.Labels, t.Crowd = t.Boxes[:n], t.Labels[:n], t.Crowd[:n]
		t.CutPoints(n)
	}
	if t.WantMasks { // the references' pad of the masks: 0, right and bottom
		t.cropMasks(0, 0, st.I[4], st.I[5])
	}
	return st.I[5], st.I[4]
}
