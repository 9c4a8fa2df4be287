package kernels

// Mixer is AugMix's blending state, kept in a Scratch (Scratch.Mix): the
// image as Begin found it, the weighted sum so far (float32), and the
// weight of the chain being applied. A mix is Begin, then Chain before
// each chain's ops, then End; timm's AugMix blends with Blend, or with
// Fold after each chain (its blended mode).
type Mixer struct {
	orig   []byte
	run    []byte // timm's blended AugMix: the image so far
	acc    []float32
	weight float32
	open   bool
}

// Begin keeps p's pixels as every chain's start and starts the sum with
// weight times them.
func (m *Mixer) Begin(p Planes, weight float64) {
	n := len(p.Pix)
	if cap(m.orig) < n {
		m.orig, m.acc = make([]byte, n), make([]float32, n)
	}
	m.orig, m.acc = m.orig[:n], m.acc[:n]
	copy(m.orig, p.Pix)
	m.run = m.run[:0] // fold starts from orig
	w := float32(weight)
	for i, v := range p.Pix {
		m.acc[i] = float32(w * float32(v))
	}
	m.open = false
}

// Chain ends the chain in progress (adding p, its result, to the sum) and
// starts one of the given weight from the kept image.
func (m *Mixer) Chain(p Planes, weight float64) {
	m.add(p)
	copy(p.Pix, m.orig)
	m.weight, m.open = float32(weight), true
}

// End adds the last chain and writes the sum into p, truncated to uint8 as
// torchvision's AugMix converts its float mix back to the image's dtype.
func (m *Mixer) End(p Planes) {
	m.add(p)
	for i, v := range m.acc {
		p.Pix[i] = byte(min(max(v, 0), 255))
	}
}

// Blend is PIL's Image.blend(orig, p, weight), as timm's AugMix ends: in
// float32, orig + weight * (p - orig), truncated (PIL's ImagingBlend for
// a weight in [0, 1]).
func (m *Mixer) Blend(p Planes, weight float64) {
	n := min(len(p.Pix), len(m.orig)) // a parsed trace may Blend without a Begin
	pilBlend(p.Pix[:n], m.orig[:n], p.Pix[:n], float32(weight))
}

// Fold is timm's blended AugMix after a chain: the image so far (orig at
// first) blended with p, the chain's result, by weight as PIL's
// Image.blend; p becomes that image.
func (m *Mixer) Fold(p Planes, weight float64) {
	if len(m.run) == 0 {
		m.run = append(m.run[:0], m.orig...)
	}
	n := min(len(p.Pix), len(m.run))
	pilBlend(m.run[:n], m.run[:n], p.Pix[:n], float32(weight))
	copy(p.Pix, m.run[:n])
}

// pilBlend is PIL's ImagingBlend(a, b, alpha) into out: in float32,
// a + alpha * (b - a), clipped to 0..255 (PIL's extrapolation, alpha
// outside [0, 1]) and truncated.
func pilBlend(out, a, b []byte, alpha float32) {
	for i := range out {
		o := float32(a[i])
		v := float32(o + float32(alpha*float32(float32(b[i])-o)))
		out[i] = byte(min(max(v, 0), 255))
	}
}

func (m *Mixer) add(p Planes) {
	if !m.open {
		return
	}
	for i, v := range p.Pix {
		m.acc[i] += float32(m.weight * float32(v))
	}
	m.open = false
}
