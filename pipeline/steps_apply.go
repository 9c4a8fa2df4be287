package pipeline

import "fmt"

// applyStep runs one step's kernel on p. Geometry steps are the decode's,
// and Normalize the packing's: both are no-ops here.
func applyStep(p planes, st *Step, s *opScratch) {
	switch st.Fn {
	case FnHorizontalFlip:
		horizontalFlip(p)
	case FnVerticalFlip:
		verticalFlip(p)
	case FnAdjustBrightness:
		adjustBrightness(p, st.F[0])
	case FnAdjustContrast:
		adjustContrast(p, st.F[0])
	case FnAdjustSaturation:
		adjustSaturation(p, st.F[0])
	case FnAdjustHue:
		adjustHue(p, st.F[0], s)
	case FnAdjustSharpness:
		adjustSharpness(p, st.F[0], s)
	case FnRGBToGrayscale:
		rgbToGrayscale(p)
	case FnGaussianBlur:
		gaussianBlur(p, st.I[0], st.I[1], st.F[0], st.F[1], s)
	case FnSolarize:
		solarize(p, st.F[0])
	case FnSolarizeAdd:
		solarizeAdd(p, st.I[0], st.F[0])
	case FnPosterize:
		posterize(p, st.I[0])
	case FnInvert:
		invert(p)
	case FnEqualize:
		equalize(p, s)
	case FnAutocontrast:
		autocontrast(p)
	case FnRotate:
		rotateFill(p, st.F[0], st.Interp, st.Center, st.HasCenter, st.Fill, st.FillNone, s)
	case FnAffine:
		a := affineParams{angle: st.F[0], tx: st.F[1], ty: st.F[2], scale: st.F[3], shearX: st.F[4], shearY: st.F[5],
			interp: st.Interp, fill: st.Fill, center: st.Center, hasCenter: st.HasCenter, noFill: st.FillNone}
		affine(p, &a, s)
	case FnErase:
		if st.Random {
			eraseRandom(p, st.I[0], st.I[1], st.I[2], st.I[3], st.Seed,
				[3]float64{st.F[0], st.F[1], st.F[2]}, [3]float64{st.F[3], st.F[4], st.F[5]}, s)
		} else {
			erase(p, st.I[0], st.I[1], st.I[2], st.I[3], st.Fill)
		}
	case FnMixBegin:
		s.mix.begin(p, st.F[0])
	case FnMixChain:
		s.mix.chain(p, st.F[0])
	case FnMixEnd:
		s.mix.end(p)
	case FnMixBlend:
		s.mix.blend(p, st.F[0])
	case FnMixFold:
		s.mix.fold(p, st.F[0])
	case FnPermuteChannels:
		permuteChannels(p, [3]int(st.I[:3]))
	}
}

// permuteChannels is permute_channels(img, perm) (image[:, perm]): plane
// c becomes plane perm[c], by swaps of whole planes.
func permuteChannels(p planes, perm [3]int) {
	cur := [3]int{0, 1, 2} // which input channel each plane holds
	for c := range 3 {
		j := c
		for cur[j] != perm[c] {
			j++
		}
		if j != c {
			swapBytesGo(p.plane(c), p.plane(j))
			cur[c], cur[j] = cur[j], cur[c]
		}
	}
}

// checkStep checks a step's arguments as the kernels need them (a parsed
// trace's, say: a drawn step is valid by construction).
func checkStep(st *Step, w, h int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrUnsupported, st.Fn, fmt.Sprintf(format, a...))
	}
	switch st.Fn {
	case FnGaussianBlur:
		for _, k := range st.I[:2] {
			if k <= 0 || k%2 == 0 || k > maxKernel {
				return bad("kernel_size %v: want odd, positive and at most %d", st.I[:2], maxKernel)
			}
		}
		if !(st.F[0] > 0 && st.F[1] > 0) || st.F[0] > 1e6 || st.F[1] > 1e6 {
			return bad("sigma %v: want positive", st.F[:2])
		}
	case FnAdjustBrightness, FnAdjustContrast, FnAdjustSaturation, FnAdjustSharpness:
		if !(st.F[0] >= 0) {
			return bad("factor %v: want >= 0", st.F[0])
		}
	case FnMixBlend:
		if !(st.F[0] >= 0 && st.F[0] <= 1) {
			return bad("weight %v: want 0..1 (PIL's blend between the two images)", st.F[0])
		}
	case FnMixFold:
		if !(st.F[0] >= 0 && st.F[0] <= 2) {
			return bad("weight %v: want 0..2 (PIL's blend, a little past 1 where timm's float32 weights round up)", st.F[0])
		}
	case FnPermuteChannels:
		if pm := st.I; pm[0]+pm[1]+pm[2] != 3 || pm[0]*pm[1]*pm[2] != 0 || min(pm[0], pm[1], pm[2]) < 0 || max(pm[0], pm[1], pm[2]) > 2 ||
			pm[0] == pm[1] || pm[1] == pm[2] || pm[0] == pm[2] {
			return bad("permutation %v: want a permutation of 0, 1, 2", st.I[:3])
		}
	case FnAdjustHue:
		if !(st.F[0] >= -0.5 && st.F[0] <= 0.5) {
			return bad("hue_factor %v: want -0.5..0.5", st.F[0])
		}
	case FnSolarize:
		if !(st.F[0] >= 0 && st.F[0] <= 255) {
			return bad("threshold %v: want 0..255", st.F[0])
		}
	case FnPosterize:
		if st.I[0] < 0 || st.I[0] > 8 {
			return bad("bits %d: want 0..8", st.I[0])
		}
	case FnRGBToGrayscale:
		if st.I[0] != 3 && st.I[0] != 0 {
			return bad("num_output_channels %d: stoker's samples have 3 channels", st.I[0])
		}
	case FnErase:
		i, j, eh, ew := st.I[0], st.I[1], st.I[2], st.I[3]
		if i < 0 || j < 0 || eh < 0 || ew < 0 || i+eh > h || j+ew > w {
			return bad("box (i=%d, j=%d, h=%d, w=%d) is outside the %dx%d image", i, j, eh, ew, w, h)
		}
	case FnResizedCrop, FnResize, FnCenterCrop, FnPad, FnCrop, FnIoUCrop, FnFixedSizeCrop, FnNormalize:
		return bad("a geometry op or Normalize is no kernel after the decode")
	}
	if err := checkGeom(st); err != nil {
		return err
	}
	for _, f := range st.F {
		if f != f || f > 1e9 || f < -1e9 {
			return bad("argument %v out of range", f)
		}
	}
	return nil
}

// ApplyTrace runs a trace's steps after the geometry (AppendTrace's JSON,
// parsed by ParseTrace) on pix, a w x h image as three planes (CHW, uint8),
// in place: the kernels alone, with no decode and no randomness, as the
// parity tests call them. Geometry steps and Normalize are refused: they
// are not kernels after the decode.
func ApplyTrace(pix []byte, w, h int, steps []Step) error {
	if w <= 0 || h <= 0 || w > maxSide || h > maxSide || len(pix) != 3*w*h {
		return fmt.Errorf("%w: %d bytes for a 3x%dx%d image (sides 1..%d)", ErrUnsupported, len(pix), h, w, maxSide)
	}
	for i := range steps {
		if err := checkStep(&steps[i], w, h); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	var s opScratch
	p := planes{pix: pix, w: w, h: h}
	for i := range steps {
		applyStep(p, &steps[i], &s)
	}
	return nil
}
