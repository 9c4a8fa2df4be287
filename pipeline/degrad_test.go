package pipeline

import (
	"math"
	"testing"
)

// TestDegToRad: CPython's math.radians multiplies by Py_MATH_PI / 180.0,
// rounded once.
func TestDegToRad(t *testing.T) {
	pi := math.Pi
	if degToRad != 0.017453292519943295 || degToRad != pi/180 {
		t.Fatalf("degToRad = %v", degToRad)
	}
}
