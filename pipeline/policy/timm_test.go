package policy

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TestTimmConfigSections: timm's rand_augment_transform's sections as timm
// reads them (timm/data/auto_augment.py): the first mstd and mmax count
// (hparams.setdefault), the last m, n and p; mmax0 is the default bound 10
// (magnitude_max or _LEVEL_DENOM); inc is on for any value (bool of the
// string); the first t names the set, "weights" the weighted one; and
// what stoker cannot run is refused naming what it can.
func TestTimmConfigSections(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want timmConfig
	}{
		{"rand-m9-mstd0.5-inc1", timmConfig{m: 9, n: 2, p: 0.5, mstd: 0.5, mmax: 10, increase: true}},
		{"rand-m12-mmax15", timmConfig{m: 12, n: 2, p: 0.5, mmax: 15}},
		{"rand-mmax0-m7", timmConfig{m: 7, n: 2, p: 0.5, mmax: 10}},
		{"rand-mmax12-mmax20-mstd1-mstd2-m3-m4", timmConfig{m: 4, n: 2, p: 0.5, mstd: 1, mmax: 12}},
		{"rand-p0.8-p1-n3", timmConfig{m: 10, n: 3, p: 1, mmax: 10}},
		{"rand-inc0", timmConfig{m: 10, n: 2, p: 0.5, mmax: 10, increase: true}},
		{"rand-mstd101", timmConfig{m: 10, n: 2, p: 0.5, mstd: math.Inf(1), mmax: 10}},
		{"rand-tweights-m9", timmConfig{m: 9, n: 2, p: 0.5, mmax: 10, weighted: true}},
		{"rand-tother-tweights", timmConfig{m: 10, n: 2, p: 0.5, mmax: 10}},
	} {
		got, err := parseTimmConfig(tc.s)
		if err != nil {
			t.Errorf("%s: %v", tc.s, err)
			continue
		}
		tc.want.text, tc.want.translate = tc.s, 0.45
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.s, got, tc.want)
		}
	}
	for _, tc := range []struct{ s, want string }{
		{"rand-t3a", `transform set "3a" is not supported`},
		{"rand-m9-t3aw", "stoker runs timm's default set (no t section, or any other name) and tweights"},
		{"rand-w0", "stoker knows m, n, p, mstd, mmax, inc and t"},
		{"rand-p1.5", "p1.5: want a probability 0..1"},
		{"rand-mmax31", "mmax31: want an integer 0..30"},
		{"rand-n16-tweights", "without replacement from 15 ops"},
	} {
		_, err := parseTimmConfig(tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.s, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), " w ") {
			t.Errorf("%s: %v names timm's removed w key", tc.s, err)
		}
	}
}

// TestTimmAutoAugmentConfig: timm's auto_augment_transform's config as timm
// reads it: the policy's name, the first mstd (hparams.setdefault), a
// section without a digit skipped, any other section refused; 3a refused
// naming why; and each policy's tables as timm's (25 sub-policies of two).
func TestTimmAutoAugmentConfig(t *testing.T) {
	for _, tc := range []struct {
		s    string
		name string
		mstd float64
	}{
		{"original", "original", 0}, {"originalr-mstd0.5", "originalr", 0.5}, {"v0-mstd1-mstd2", "v0", 1},
		{"v0r-x-mstd0.25", "v0r", 0.25},
	} {
		got, err := parseTimmAAConfig(tc.s)
		if err != nil {
			t.Errorf("%s: %v", tc.s, err)
			continue
		}
		if got.mstd != tc.mstd || got.mmax != 10 || len(got.aa) != 25 || &got.aa[0][0] != &timmAutoAugmentPolicies[tc.name][0][0] {
			t.Errorf("%s: mstd %v, mmax %v, %d sub-policies: want %s's, mstd %v, mmax 10", tc.s, got.mstd, got.mmax, len(got.aa), tc.name, tc.mstd)
		}
	}
	for _, tc := range []struct{ s, want string }{
		{"v1", "want original, originalr, v0, v0r or 3a"},
		{"rand-m9", "want original, originalr, v0, v0r or 3a"},
		{"v0-m9", `unknown section "m9" (timm's AutoAugment knows mstd only)`},
		{"v0-mstd1e9", "is not a number up to 1000"},
	} {
		_, err := parseTimmAAConfig(tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.s, err, tc.want)
		}
	}
	// The r variants differ from theirs only in Posterize's level function.
	for _, name := range []string{"original", "v0"} {
		a, b := timmAutoAugmentPolicies[name], timmAutoAugmentPolicies[name+"r"]
		for i := range a {
			for j := range a[i] {
				x, y := a[i][j], b[i][j]
				if x.op == augPosterize {
					x.variant, y.variant = 0, 0
				}
				if x != y {
					t.Errorf("%s and %sr differ at %d/%d beyond Posterize: %+v, %+v", name, name, i, j, a[i][j], b[i][j])
				}
			}
		}
	}
}

// TestTimmAugMixConfig: timm's augment_and_mix_transform's config as timm
// reads it: defaults m3, w3, d-1, a1, uniform magnitudes (mstd infinite),
// the first mstd, sections without a digit skipped, b any integer (timm's
// bool(int(val))); what timm would fail on refused; create_transform's
// translate_pct 0.3.
func TestTimmAugMixConfig(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want timmConfig
	}{
		{"augmix", timmConfig{m: 3, width: 3, depth: -1, alpha: 1, mstd: math.Inf(1)}},
		{"augmix-m5-w4-d2", timmConfig{m: 5, width: 4, depth: 2, alpha: 1, mstd: math.Inf(1)}},
		{"augmix-a0.5-mstd1-mstd2-x-b0", timmConfig{m: 3, width: 3, depth: -1, alpha: 0.5, mstd: 1}},
		{"augmix-b2-w2", timmConfig{m: 3, width: 2, depth: -1, alpha: 1, mstd: math.Inf(1), blended: true}},
	} {
		got, err := parseTimmAugMixConfig(tc.s)
		if err != nil {
			t.Errorf("%s: %v", tc.s, err)
			continue
		}
		tc.want.text, tc.want.mmax, tc.want.translate = tc.s, 10, 0.3
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.s, got, tc.want)
		}
	}
	for _, tc := range []struct{ s, want string }{
		{"augmix-m5.5", "m5.5: want an integer 0..30"},
		{"augmix-w0", "w0: want an integer 1..16"},
		{"augmix-a0", "a0: want 0 < alpha <= 1000"},
		{"augmix-q3", `unknown section "q3"`},
		{"rand-m9", `want "augmix-..."`},
	} {
		_, err := parseTimmAugMixConfig(tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.s, err, tc.want)
		}
	}
}

// TestTimmMagnitudeClamps: past m10 (mmax > 10) every argument is what
// timm's level functions give, clamps included: SolarizeAdd's addition at
// most 128 (min(128, ...)), Solarize's threshold min(256, ...) so the
// increasing one's never negative, and the increasing Posterize's bits
// never negative; the magnitude itself within [0, mmax].
func TestTimmMagnitudeClamps(t *testing.T) {
	for _, cfg := range []string{"rand-m15-mmax15-inc1", "rand-m30-mmax30", "rand-m12-mmax15-mstd0.5-inc1", "rand-m30-mmax30-tweights-n15"} {
		pol, err := New(&Params{Kind: TimmRandAugment, Policy: cfg, Interp: kernels.Bilinear}, 16, 16)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[fn.Fn]bool{}
		for i := range 4000 {
			// The stream a Transform's op right after its geometry draws
			// from (pipeline/ops' Node.Draw).
			r := det.Key{Seed: 1, Index: uint64(i)}.Stream(2)
			for _, st := range pol.Draw(&r, 16, 16, nil) {
				seen[st.Fn] = true
				switch st.Fn {
				case fn.SolarizeAdd:
					if st.I[0] < 0 || st.I[0] > 128 {
						t.Fatalf("%s: solarize_add addition %d: timm's is min(128, level * 110)", cfg, st.I[0])
					}
				case fn.Solarize:
					if st.F[0] < 0 || st.F[0] > 255 {
						t.Fatalf("%s: solarize threshold %v", cfg, st.F[0])
					}
				case fn.Posterize:
					if st.I[0] < 0 || st.I[0] > 7 {
						t.Fatalf("%s: posterize bits %d", cfg, st.I[0])
					}
				case fn.Rotate:
					if limit := 30 * 3.0; math.Abs(st.F[0]) > limit {
						t.Fatalf("%s: rotate %v past %v", cfg, st.F[0], limit)
					}
				}
			}
		}
		for _, f := range []fn.Fn{fn.SolarizeAdd, fn.Posterize, fn.Rotate} {
			// Posterize at m30 keeps int(3 * 4) >= 8 bits: timm returns the
			// image as it is, and no step is drawn.
			if !seen[f] && !(f == fn.Posterize && cfg == "rand-m30-mmax30") {
				t.Errorf("%s: no %s drawn in 4000 samples", cfg, f.String())
			}
		}
	}
}
