package cv

import (
	"fmt"
	"maps"
	"slices"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// The parity cases: each kernel of this package called by name, on
// images and instances, with the arguments a case gives, as
// `stoker ops cv` reads them (cvcase) for the parity tests against
// ultralytics (python/tests/test_yolo_kernels.py and its neighbours).
// Each kernel's file registers its own case (addCase, in its init)
// beside the kernel, so that a kernel added is its file and its tests.

// CaseIn is one case's input: its images (changed in place where the
// kernel works in place), its instances, checked (Instances.Check), and
// Args, which decodes the case's arguments into a struct of the fields
// the kernel reads (JSON tags: dw, dh, m, border, ...).
type CaseIn struct {
	Images []kernels.Planes
	Labels []Instances
	Args   func(v any) error
}

// CaseOut is what a case gives: images, instances and numbers, each
// where the kernel has them.
type CaseOut struct {
	Images []kernels.Planes
	Labels *Instances
	Matrix []float32
	Ints   []int
	Mask   []int32
}

// caseKind is a registered case: the images it wants at least, and its
// run.
type caseKind struct {
	images int
	run    func(c *CaseIn) (CaseOut, error)
}

var caseKinds = map[string]caseKind{}

// addCase registers the case name, which wants images images at least.
func addCase(name string, images int, run func(c *CaseIn) (CaseOut, error)) {
	if _, dup := caseKinds[name]; dup {
		panic("cv: case " + name + " registered twice")
	}
	caseKinds[name] = caseKind{images, run}
}

// CaseNames lists the registered cases, sorted.
func CaseNames() []string { return slices.Sorted(maps.Keys(caseKinds)) }

// RunCase runs the case name on c.
func RunCase(name string, c *CaseIn) (CaseOut, error) {
	k, ok := caseKinds[name]
	if !ok {
		return CaseOut{}, fmt.Errorf("unknown op %q", name)
	}
	if len(c.Images) < k.images {
		return CaseOut{}, fmt.Errorf("%s wants %d images, got %d", name, k.images, len(c.Images))
	}
	return k.run(c)
}

// newPlanes is a w x h image's planes, zeroed.
func newPlanes(w, h int) kernels.Planes {
	return kernels.Planes{Pix: make([]byte, 3*w*h), W: w, H: h}
}

// sizeArgs are the output size a case gives (dw, dh).
type sizeArgs struct {
	DW int `json:"dw"`
	DH int `json:"dh"`
}

// checkSize refuses an output size a case cannot have.
func (a sizeArgs) checkSize() error {
	if a.DW < 1 || a.DH < 1 || a.DW > 1<<14 || a.DH > 1<<14 {
		return fmt.Errorf("dw and dh %dx%d: want 1..16384 each", a.DW, a.DH)
	}
	return nil
}
