package transform

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// MaxViews bounds the views of one transform (turbo.c's STOKER_MAX_VIEWS):
// DINO's recipes take 10 (2 global + 8 local crops), multi-crop variants a
// few more.
const MaxViews = 32

// ViewGroup is Count views made by the same ops, each with its own draws:
// DINO's 2 global crops are one group, its 8 local crops another. Name is
// optional: the trainer finds the group's views by it.
type ViewGroup struct {
	Name  string
	Count int
	Ops   []optab.Op
	// Images is which images the group's views are made for: every one,
	// or those of records of one or of several images only (the others'
	// views zeros: SkipViews).
	Images RecordImages
}

// RecordImages is which images of a dataset of records a view group is
// made for (ViewGroup.Images).
type RecordImages uint8

const (
	// AnyImage: every image.
	AnyImage RecordImages = iota
	// OneImage: the images of records of one image (LLaVA-OneVision's
	// canvas and base).
	OneImage
	// SeveralImages: the images of records of several (its square).
	SeveralImages
)

// maxViewName bounds a group's name.
const maxViewName = 64

// NewViews compiles a transform of several views: each sample is decoded
// once (the union of the views' regions, at the coarsest DCT scale that
// serves every view) and made into every group's views, in order, each view
// with its own geometry and ops drawn from its own streams of the sample's
// key (Key.View: view v's key is the sample's with View v, so view 0 draws
// what a one-view transform of its ops would). A batch holds each view's
// samples back to back, view after view (ViewLayout).
//
// Every view's ops are a transform of their own (NewTransform's rules:
// geometry first); the views share the layout and must agree on Normalize
// (all float or all uint8). A single group of one view is a plain
// one-view transform.
func NewViews(layout Layout, groups ...ViewGroup) (*Transform, error) {
	return NewViewsBound(layout, [2]int{}, groups...)
}

// NewViewsBound is NewViews with the job's max_size, bound: each view of
// per-sample sizes (a vision-language resize's) is bounded by it, as
// NewTransformBound bounds one view; a view of one size ignores it.
func NewViewsBound(layout Layout, bound [2]int, groups ...ViewGroup) (*Transform, error) {
	bad := func(format string, a ...any) (*Transform, error) {
		return nil, transformErr(format, a...)
	}
	if len(groups) == 0 {
		return bad("no views: give at least one (count, transform) pair")
	}
	total := 0
	for g, vg := range groups {
		if vg.Count < 1 {
			return bad("view group %d%s: count %d: want at least 1", g, groupName(vg.Name), vg.Count)
		}
		if len(vg.Name) > maxViewName {
			return bad("view group %d: name of %d bytes: the limit is %d", g, len(vg.Name), maxViewName)
		}
		total += vg.Count
		if total > MaxViews {
			return bad("%d views or more: the limit is %d", total, MaxViews)
		}
	}
	if len(groups) == 1 && groups[0].Count == 1 {
		t, err := newTransform(layout, bound, "", groups[0].Ops...)
		if err != nil {
			return nil, viewError(0, groups[0].Name, err)
		}
		return t, nil
	}
	t := &Transform{layout: layout}
	for g, vg := range groups {
		vt, err := newTransform(layout, bound, "", vg.Ops...)
		if err != nil {
			return nil, viewError(g, vg.Name, err)
		}
		if (vt.vary && (vt.resize == nil || !selfSized(vt.resize))) || vt.geomW > 0 {
			return bad("view group %d: a transform of per-sample sizes (RandomShortestSize, RandomRotation with expand=True) in several views is not supported (of the geometries of per-sample sizes, only the vision-language resizes: SmartResize, NaFlexResize, TileResize)", g)
		}
		if vt.mosaic != nil {
			return bad("view group %d: a %s in several views is not supported", g, vt.mosaic.Kind)
		}
		if len(t.views) > 0 && vt.Float() != t.views[0].Float() {
			return bad("view group %d%s ends in Normalize and view group 0 does not, or the other way round: a batch's views are all float32 or all uint8", g, groupName(vg.Name))
		}
		for range vg.Count {
			t.views = append(t.views, vt)
			t.viewNames = append(t.viewNames, vg.Name)
			t.viewImages = append(t.viewImages, vg.Images)
		}
	}
	if err := t.setSharedPre(groups); err != nil {
		return nil, err
	}
	v0 := t.views[0]
	t.setSkipViews()
	t.outH, t.outW, t.norm = v0.outH, v0.outW, v0.norm
	t.setLayout()
	for _, vt := range t.views {
		t.vary = t.vary || vt.vary
	}
	if t.vary { // views of per-sample sizes travel ragged, always (ragged.go)
		return t.WithRagged(), nil
	}
	return t, nil
}

// groupName is " (name)" for messages, or nothing.
func groupName(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", name)
}

// viewError says which view group an op list's error is in.
func viewError(g int, name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), errs.Unsupported.Error()+": ")
	msg = strings.TrimPrefix(msg, "transform: ")
	return fmt.Errorf("%w: transform: view group %d%s: %s", errs.Unsupported, g, groupName(name), msg)
}

// Views is how many views each sample makes: 1 for a one-view transform.
func (t *Transform) Views() int { return max(len(t.views), 1) }

// View is view v's transform (t itself for a one-view transform).
func (t *Transform) View(v int) *Transform {
	if t.views == nil {
		return t
	}
	return t.views[v]
}

// SkipViews is which of t's views an image of a record of one (several
// false) or of several images does not get (ViewGroup.Images): nil where
// it gets them all.
func (t *Transform) SkipViews(several bool) []bool {
	if several {
		return t.skipViews[1]
	}
	return t.skipViews[0]
}

// setSharedPre sets t.sharedPre where t's views are a vision-language
// processor's (one of them resized to the image's own size: SmartResize,
// TileResize, AnyResResize, NaFlexResize) and some have ops (or a crop)
// before their geometry: those are the trainer's augmentation before the
// processor, of one image, so every group must start with the same ones.
func (t *Transform) setSharedPre(groups []ViewGroup) error {
	vlm, pre := false, false
	for _, vt := range t.views {
		vlm = vlm || vt.resize != nil && selfSized(vt.resize)
		pre = pre || len(vt.pre) > 0 || vt.preCrop != nil
	}
	if !vlm || !pre {
		return nil
	}
	ops0 := groups[0].Ops[:beforeGeometry(groups[0].Ops)]
	for g, vg := range groups {
		if ops := vg.Ops[:beforeGeometry(vg.Ops)]; !reflect.DeepEqual(ops, ops0) {
			return fmt.Errorf("%w: transform: view group %d%s starts with %s before its geometry, view group 0 with %s: the views of a vision-language processor are of one augmented image, drawn once: give every group the same ops before its resize",
				errs.Unsupported, g, groupName(vg.Name), opsOrNone(ops), opsOrNone(ops0))
		}
	}
	t.sharedPre = true
	return nil
}

// opsOrNone is ops for a message, "no ops" for none.
func opsOrNone(ops []optab.Op) string {
	if len(ops) == 0 {
		return "no ops"
	}
	return optab.OpsString(ops)
}

// beforeGeometry counts ops' ops before a resize of the whole image: a
// crop (cropBefore) and the ops on pixels after it, or those alone
// (leadingPre).
func beforeGeometry(ops []optab.Op) int {
	if n := leadingPre(ops); n > 0 {
		return n
	}
	return cropBefore(ops)
}

// SharedPre reports whether t's views draw their crop and ops before the
// geometry once, with view 0's key (setSharedPre): the same crop and
// steps in every view (and its plan's other draws: a fused flip).
func (t *Transform) SharedPre() bool { return t.sharedPre }

// setSkipViews computes SkipViews' answers from t's views' Images.
func (t *Transform) setSkipViews() {
	for k, several := range []bool{false, true} {
		for v, im := range t.viewImages {
			if im == AnyImage || (im == SeveralImages) == several {
				continue
			}
			if t.skipViews[k] == nil {
				t.skipViews[k] = make([]bool, len(t.views))
			}
			t.skipViews[k][v] = true
		}
	}
}

// ViewName is view v's group's name ("" when unnamed).
func (t *Transform) ViewName(v int) string {
	if t.views == nil {
		return ""
	}
	return t.viewNames[v]
}

// ViewLayout is how t's samples lie in a batch buffer.
func (t *Transform) ViewLayout() ViewLayout { return t.vlayout }

// setLayout computes t's ViewLayout, once it is compiled.
func (t *Transform) setLayout() {
	t.vlayout = ViewLayout{prefix: make([]int, t.Views()+1)}
	for v := range t.Views() {
		t.vlayout.prefix[v+1] = t.vlayout.prefix[v] + t.View(v).viewBytes()
	}
}

// viewBytes is one view's output size.
func (t *Transform) viewBytes() int {
	n := 3 * t.outH * t.outW
	if t.norm != nil {
		n *= 4
	}
	if t.vary {
		n += SizeTrailer // the sample's own size (lsj.go)
	}
	return n
}

// ViewLayout says where each view of each sample lies in a batch buffer of
// n samples: view after view, each view's samples back to back (view-major),
// so that each view of a batch is one [n, C, H, W] array. View v of sample
// i is Bytes(v) bytes at n*Start(v) + i*Bytes(v). A one-view layout is
// samples back to back. The zero ViewLayout has no views.
type ViewLayout struct {
	prefix []int // prefix[v]: the bytes of views 0..v-1 of one sample
	// ragged: of a ragged transform (WithRagged), each view's: made
	// compact in its slot, elem bytes a value; SameSample compares its
	// compact bytes alone. nil: no view is.
	ragged []bool
	elem   int
}

// OneView is the layout of one view of size bytes.
func OneView(size int) ViewLayout { return ViewLayout{prefix: []int{0, size}} }

// LayoutOf is the layout of views of the given sizes, in order.
func LayoutOf(sizes ...int) ViewLayout {
	l := ViewLayout{prefix: make([]int, len(sizes)+1)}
	for v, s := range sizes {
		l.prefix[v+1] = l.prefix[v] + s
	}
	return l
}

// Views is how many views a sample has.
func (l ViewLayout) Views() int { return max(len(l.prefix)-1, 0) }

// SampleBytes is one sample's size: its views' sizes added up.
func (l ViewLayout) SampleBytes() int {
	if len(l.prefix) == 0 {
		return 0
	}
	return l.prefix[len(l.prefix)-1]
}

// Bytes is view v's size in one sample.
func (l ViewLayout) Bytes(v int) int { return l.prefix[v+1] - l.prefix[v] }

// Start is the bytes of the views before v in one sample: view v's block
// of a batch of n samples starts at n*Start(v).
func (l ViewLayout) Start(v int) int { return l.prefix[v] }

// Offset is where view v of sample i lies in a batch buffer of n samples.
func (l ViewLayout) Offset(n, v, i int) int { return n*l.prefix[v] + i*l.Bytes(v) }

// CopySample copies sample si of src (a buffer of sn samples) to sample di
// of dst (dn samples), view by view.
func (l ViewLayout) CopySample(dst []byte, dn, di int, src []byte, sn, si int) {
	for v := range l.Views() {
		b := l.Bytes(v)
		copy(dst[l.Offset(dn, v, di):][:b], src[l.Offset(sn, v, si):][:b])
	}
}

// AppendSample appends sample i of data (a buffer of n samples), its views
// in order, to b.
func (l ViewLayout) AppendSample(b, data []byte, n, i int) []byte {
	for v := range l.Views() {
		b = append(b, data[l.Offset(n, v, i):][:l.Bytes(v)]...)
	}
	return b
}

// Repack moves the first k samples of each view of data, a buffer of n
// samples (k <= n), to where a buffer of k samples has them; data[:k*
// SampleBytes()] is then that buffer.
func (l ViewLayout) Repack(data []byte, n, k int) {
	if k >= n {
		return
	}
	// View v's block moves down (k*Start(v) <= n*Start(v)) and ends below
	// where view v+1's block starts now: in view order, no move overwrites
	// bytes still to be moved.
	for v := 1; v < l.Views(); v++ {
		b := l.Bytes(v)
		copy(data[k*l.prefix[v]:][:k*b], data[n*l.prefix[v]:][:k*b])
	}
}

// Spans calls f for each contiguous run of bytes of sample i in a buffer
// of n samples: its views, in order, with the run's offset in the buffer and
// in the sample.
func (l ViewLayout) Spans(n, i int, f func(off, within, size int)) {
	for v := range l.Views() {
		f(l.Offset(n, v, i), l.prefix[v], l.Bytes(v))
	}
}
