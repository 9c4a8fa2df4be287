package fn

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TestPermuteChannels: output channel c is input channel perm[c]
// (torchvision's image[:, perm]), for every permutation.
func TestPermuteChannels(t *testing.T) {
	for _, pm := range [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		p := kernels.Planes{Pix: make([]byte, 3*6), W: 3, H: 2}
		for i := range p.Pix {
			p.Pix[i] = byte(i)
		}
		orig := append([]byte(nil), p.Pix...)
		Apply(p, &Step{Fn: PermuteChannels, I: [6]int{pm[0], pm[1], pm[2]}}, nil)
		for c := range 3 {
			if string(p.Plane(c)) != string(orig[6*pm[c]:6*pm[c]+6]) {
				t.Errorf("%v: plane %d is %v", pm, c, p.Plane(c))
			}
		}
		if err := Check(&Step{Fn: PermuteChannels, I: [6]int{pm[0], pm[1], pm[2]}}, 3, 2); err != nil {
			t.Error(err)
		}
	}
	if err := Check(&Step{Fn: PermuteChannels, I: [6]int{0, 0, 3}}, 3, 2); err == nil {
		t.Error("permutation [0 0 3] taken")
	}
}
