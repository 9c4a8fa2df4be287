package pipeline

import (
	"image"
	"image/color"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/testfiles"
	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
	"github.com/stoker-dev/stoker/pipeline/internal/testops"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// decoderKinds are the two ways a Decoder can be made: the default (the
// libjpeg-turbo path for JPEG when built with cgo) and the pure-Go
// reference. Tests that hold for every decoder run through both.
var decoderKinds = []struct {
	name string
	opts []Option
}{
	{"default", nil},
	{"reference", []Option{WithReference(true)}},
}

// mustTransform is NewTransform's Transform, or t's end; and the op lists
// the root's tests share with pipeline/transform's
// (pipeline/internal/testops).
var (
	mustTransform   = testops.MustTransform
	recipeOps       = testops.Recipe
	tvPolicies      = testops.TVPolicies
	lsjOps          = testops.LSJ
	segOps          = testops.Seg
	letterboxRecipe = testops.Letterbox
	namedOps        = testops.Named
	geomPlan        = testops.GeomPlan
)

// identity is a transform that copies a w x h image's pixels unchanged:
// CenterCrop of the whole image, no resize, HWC.
func identity(t testing.TB, w, h int) *transform.Transform {
	return mustTransform(t, transform.HWC, ops.Op{Kind: transform.OpCenterCrop, Size: [2]int{h, w}})
}

// hwc returns an image's RGB in HWC order, alpha dropped.
func hwc(img image.Image) []byte {
	b := img.Bounds()
	out := make([]byte, 0, 3*b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			out = append(out, c.R, c.G, c.B)
		}
	}
	return out
}

// diffStats returns the largest and the mean absolute difference of two
// equally long byte slices.
func diffStats(a, b []byte) (maxd, mean float64) {
	var sum float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		if d < 0 {
			d = -d
		}
		maxd = max(maxd, d)
		sum += d
	}
	return maxd, sum / float64(len(a))
}

func readCorpus(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir, path))
	if err != nil {
		t.Fatalf("%v (run go test ./pipeline -run TestGenerateCorpus -gen-corpus)", err)
	}
	return data
}

// exactTest marks t as an exactness or bounds test: arithmetic on one
// goroutine (a fast path against its reference, bytes against bytes over
// many decodes, huge-file checksums), where the race detector has nothing
// to find and multiplies the time by 10 to 100. Under -race it skips; make
// test-go runs it once without -race: the tests that call it are named
// TestExact... (make test-go-once runs -run '^TestExact'; TestTestNames,
// cmd/stoker, holds the rule).
//
// It also runs t in parallel with the other exactness tests: each is
// CPU-bound on its own decoders and state (no process-wide counter, no
// environment), so the exact run, which make test-go runs on its own,
// keeps every core busy instead of one. A test that reads process-wide
// state (runtime.MemStats) calls exactSerialTest instead.
func exactTest(t *testing.T) {
	t.Helper()
	exactSerialTest(t)
	t.Parallel()
}

// exactSerialTest is exactTest for a test that must not overlap others: it
// reads process-wide state (the heap's allocations). Sequential tests run
// before any parallel one resumes, so none overlaps it. Its tests are
// named TestExact... too.
func exactSerialTest(t *testing.T) {
	t.Helper()
	testkit.Exact(t)
}

// allocTest marks t as counting allocations, which under -asan (make
// test-asan) are the instrumentation's: Go's escape analysis and cgo calls
// allocate differently there. It skips under -asan.
func allocTest(t *testing.T) {
	t.Helper()
	testkit.Alloc(t)
}

// The files the tests write, pipeline/internal/testfiles' (pipeline/
// dataset's tests write the same).
var (
	writeTree    = testfiles.WriteTree
	writeShard   = testfiles.WriteShard
	testPicture  = testfiles.Picture
	testGray     = testfiles.Gray
	testPaletted = testfiles.Paletted
	encodeJPEG   = testfiles.JPEG
	encodePNG    = testfiles.PNG
)

// tarMember is a shard's member (writeShard).
type tarMember = testfiles.Member

// fixedBoxes is a Targeted of one sample's boxes, label 0 each.
type fixedBoxes [][4]float32

func (b fixedBoxes) SourceTargets(i, w, h int, t *transform.Instances) error {
	for _, bx := range b {
		t.Add(bx, 0, false)
	}
	return nil
}
