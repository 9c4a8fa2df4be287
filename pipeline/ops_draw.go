package pipeline

// Floating point in this file: a sample's steps must be the same bits on
// every machine, so every product that is added is wrapped in float64(...)
// (no fused multiply-add), and exp and log are det.Exp and det.Log.

// drawer collects the steps a sample's ops draw, for an output of w x h;
// r is the generator of the node drawing (node.draw). An op's draw is
// called through its definition, so what it is handed escapes: a Decoder
// keeps its drawer (drawInto), and a sample's draw allocates nothing.
type drawer struct {
	k     Key
	w, h  int
	steps []Step
	r     RNG
}

func (d *drawer) emit(st Step) { d.steps = append(d.steps, st) }

// drawSteps appends to buf the steps t's ops after the geometry draw for
// key k, in the order they run, and returns it.
func (t *Transform) drawSteps(k Key, buf []Step) []Step {
	return t.drawStepsAt(k, t.outW, t.outH, buf)
}

// drawStepsAt is drawSteps for a sample of w x h (its own size, of a
// transform of per-sample sizes).
func (t *Transform) drawStepsAt(k Key, w, h int, buf []Step) []Step {
	return t.drawInto(new(drawer), k, w, h, buf)
}

// drawInto is drawStepsAt with the caller's drawer d, reused.
func (t *Transform) drawInto(d *drawer, k Key, w, h int, buf []Step) []Step {
	*d = drawer{k: k, w: w, h: h, steps: buf}
	for i := range t.post {
		t.post[i].draw(d)
	}
	steps := d.steps
	d.steps = nil
	return steps
}

// draw appends the node's steps for the sample, drawing from its stream,
// with torchvision.transforms.v2's sampling: its definition's draw.
func (n *node) draw(d *drawer) {
	outer := d.r // a container's, around its ops' draws
	d.r = d.k.Stream(n.stream)
	n.def.draw(n, &d.r, d)
	d.r = outer
}
