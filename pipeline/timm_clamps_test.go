package pipeline

import (
	"math"
	"testing"
)

// TestTimmMagnitudeClamps: past m10 (mmax > 10) every argument is what
// timm's level functions give, clamps included: SolarizeAdd's addition at
// most 128 (min(128, ...)), Solarize's threshold min(256, ...) so the
// increasing one's never negative, and the increasing Posterize's bits
// never negative; the magnitude itself within [0, mmax].
func TestTimmMagnitudeClamps(t *testing.T) {
	for _, cfg := range []string{"rand-m15-mmax15-inc1", "rand-m30-mmax30", "rand-m12-mmax15-mstd0.5-inc1", "rand-m30-mmax30-tweights-n15"} {
		tr, err := NewTransform(CHW, Op{Kind: OpCenterCrop, Size: [2]int{16, 16}}, Op{Kind: OpTimmRandAugment, Policy: cfg, Interp: InterpBilinear})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[Fn]bool{}
		for i := range 4000 {
			var d Decoder
			if _, _, err := d.draw(tr, &header{w: 16, h: 16}, Key{Seed: 1, Index: uint64(i)}); err != nil {
				t.Fatal(err)
			}
			for _, st := range d.vd[0].steps {
				seen[st.Fn] = true
				switch st.Fn {
				case FnSolarizeAdd:
					if st.I[0] < 0 || st.I[0] > 128 {
						t.Fatalf("%s: solarize_add addition %d: timm's is min(128, level * 110)", cfg, st.I[0])
					}
				case FnSolarize:
					if st.F[0] < 0 || st.F[0] > 255 {
						t.Fatalf("%s: solarize threshold %v", cfg, st.F[0])
					}
				case FnPosterize:
					if st.I[0] < 0 || st.I[0] > 7 {
						t.Fatalf("%s: posterize bits %d", cfg, st.I[0])
					}
				case FnRotate:
					if limit := 30 * 3.0; math.Abs(st.F[0]) > limit {
						t.Fatalf("%s: rotate %v past %v", cfg, st.F[0], limit)
					}
				}
			}
		}
		for _, fn := range []Fn{FnSolarizeAdd, FnPosterize, FnRotate} {
			// Posterize at m30 keeps int(3 * 4) >= 8 bits: timm returns the
			// image as it is, and no step is drawn.
			if !seen[fn] && !(fn == FnPosterize && cfg == "rand-m30-mmax30") {
				t.Errorf("%s: no %s drawn in 4000 samples", cfg, fn.String())
			}
		}
	}
}
