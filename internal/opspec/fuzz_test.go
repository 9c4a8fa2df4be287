package opspec

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/transform"
	"google.golang.org/protobuf/proto"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// FuzzTransformSpec: whatever TransformSpec a client sends, the server's
// compile of it returns a Transform or an error, and never panics (the
// server recovers none: a panic would stop it for every trainer). The seeds
// (testdata/fuzz) are what the Python client sends for a classification
// recipe, the DETR pipeline, a policy, rotations and affines, containers
// with a named op, and a preset; `make test` runs them, `go test -fuzz`
// mutates them.
func FuzzTransformSpec(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var spec stokerv1.TransformSpec
		if proto.Unmarshal(b, &spec) != nil {
			return
		}
		for _, l := range []transform.Layout{transform.CHW, transform.HWC} {
			tf, err := Transform(&spec, l)
			if (tf == nil) == (err == nil) {
				t.Fatalf("Transform: %v and %v: want exactly one", tf, err)
			}
		}
	})
}
