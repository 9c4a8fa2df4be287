package transform_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestViewPresets: dino's and dinov2's 2 global and 8 local views, and the
// blur rates DINOv2 was released with (global crop 1 never blurred, 2 with
// p 0.9, the local ones with p 0.5), counted over traces.
func TestViewPresets(t *testing.T) {
	for _, c := range []struct {
		name  string
		sizes []int
		blur  []float64 // per view: the share of samples blurred
	}{
		{"simclr", []int{224, 224}, []float64{0.5, 0.5}},
		{"dino", []int{224, 224, 96, 96, 96, 96, 96, 96, 96, 96}, []float64{1, 0.1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}},
		{"dinov2", []int{224, 224, 96, 96, 96, 96, 96, 96, 96, 96}, []float64{0, 0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}},
	} {
		tr, err := transform.ParseTransform(c.name, transform.CHW)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Views() != len(c.sizes) {
			t.Fatalf("%s: %d views, want %d", c.name, tr.Views(), len(c.sizes))
		}
		for v, side := range c.sizes {
			if h, w := tr.View(v).Size(); h != side || w != side {
				t.Errorf("%s view %d: %dx%d, want %d", c.name, v, h, w, side)
			}
		}
		const n = 4000
		blurred := make([]int, tr.Views())
		for i := range n {
			js, err := tr.Trace(640, 480, det.Key{Seed: 2, Index: uint64(i)})
			if err != nil {
				t.Fatal(err)
			}
			var views []json.RawMessage
			if err := json.Unmarshal(js, &views); err != nil {
				t.Fatal(err)
			}
			for v, vt := range views {
				if bytes.Contains(vt, []byte(`"gaussian_blur"`)) {
					blurred[v]++
				}
			}
		}
		for v, p := range c.blur {
			// 5 standard deviations of a binomial share of n.
			got, tol := float64(blurred[v])/n, 5*math.Sqrt(p*(1-p)/n)
			if got < p-tol || got > p+tol {
				t.Errorf("%s view %d: blurred in %.3f of %d samples, want %.2f", c.name, v, got, n, p)
			}
		}
	}
	if _, err := transform.Preset("dino"); !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "several views") {
		t.Errorf("Preset(dino): %v", err)
	}
}
