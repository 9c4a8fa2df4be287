package transform

import (
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// TestParseTraceRefuses: unknown ops and arguments, and arguments of the
// wrong shape, are errors that say which.
func TestParseTraceRefuses(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{`[["warp", {}]]`, `unknown op "warp"`},
		{`[["adjust_hue", {"hue": 0.1}]]`, `unknown argument "hue"`},
		{`[["gaussian_blur", {"kernel_size": [3, 3, 3]}]]`, "want 2 values"},
		{`[["posterize", {"bits": 2.5}]]`, "not an integer"},
		{`[["rotate", {"angle": 3, "expand": 1}]]`, "want true or false"},
		{`[["rotate", {"angle": 3, "interpolation": "lanczos"}]]`, "lanczos"},
		{`{"op": 1}`, "trace"},
	} {
		if _, err := ParseTrace([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error saying %q", tc.in, err, tc.msg)
		}
	}
}

// TestStepJSONBound: no step's JSON is longer than maxStepJSON, whatever
// its numbers, so MaxTraceBytes bounds a trace.
func TestStepJSONBound(t *testing.T) {
	long := -1.2345678901234567e-300
	for f := fn.Fn(1); int(f) < fn.Count(); f++ {
		st := fn.Step{Fn: f, Interp: InterpBilinear, HasCenter: true}
		for i := range st.I {
			st.I[i] = -1 << 30
		}
		for i := range st.F {
			st.F[i] = long
		}
		st.Fill, st.Center = [3]float64{long, long, long}, [2]float64{long, long}
		if n := len(st.AppendJSON(nil)); n > MaxStepJSON {
			t.Errorf("%s: %d bytes of JSON, over maxStepJSON (%d)", f, n, MaxStepJSON)
		}
	}
}
