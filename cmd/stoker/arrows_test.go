package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// module is the module's import path.
const module = "github.com/stoker-dev/stoker"

// TestArrows: the layers docs/ARCHITECTURE.md draws hold, as `go list`
// sees the packages (without their tests):
//
//   - the coordinator (server/internal/coord) links no gRPC, none of the
//     protocol's generated code, no store client and nothing of the
//     server's: it speaks internal/lease and pipeline/batch, and what it
//     emits is its own types, which the server puts on the wire;
//   - internal/lease, pipeline/batch and pipeline's internal/det and
//     internal/errs are leaves: the standard library only;
//   - pipeline/kernels links pipeline/internal/det alone, pipeline/codec
//     pipeline/internal/errs and pipeline/codec/index alone,
//     pipeline/codec/index nothing of the module,
//     pipeline/dataset neither the pipeline's root nor its kernels, and
//     pipeline/targets neither the root nor the codec, pipeline/fn
//     (the functional ops) neither the root nor the codec, and
//     pipeline/policy (the augmentation policies) of the module
//     pipeline/fn, pipeline/kernels and pipeline/internal/... alone, and
//     pipeline/ops (the op table) of the module pipeline/fn,
//     pipeline/policy, pipeline/kernels, pipeline/targets,
//     pipeline/batch and pipeline/internal/... alone, and
//     pipeline/transform (the Transform) of the module pipeline/ops,
//     pipeline/fn, pipeline/kernels(/cv), pipeline/targets,
//     pipeline/dataset and pipeline/internal/... alone;
//   - only the root, pipeline/transform and the tests'
//     pipeline/internal/testops import pipeline/internal/samplerkey, the
//     key to a Transform's side for the Decoder (Transform.Sampler);
//   - pipeline (with its subpackages) imports no gRPC, and of the module
//     only pipeline's packages and leaves of internal/ (the standard
//     library only): no arrow back up into internal/work, the server or
//     the protocol.
func TestArrows(t *testing.T) {
	coordDeps := goList(t, "-deps", "-f", "{{.ImportPath}}", "./server/internal/coord")
	for _, banned := range []string{"google.golang.org/grpc", module + "/proto/", module + "/pipeline/source",
		"cloud.google.com/", "github.com/aws/", "github.com/Azure/", "gocloud.dev/", module + "/internal/work", module + "/server"} {
		for _, d := range coordDeps {
			if strings.HasPrefix(d, banned) && d != module+"/server/internal/coord" {
				t.Errorf("server/internal/coord links %s (%s...)", d, banned)
				break
			}
		}
	}
	for _, imp := range strings.Fields(strings.Join(goList(t, "-f", `{{join .Imports " "}}`, "./server/internal/plan"), " ")) {
		if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && imp != module+"/pipeline" {
			t.Errorf("server/internal/plan imports %s: the epoch plan is a pure function of the job (the standard library and pipeline's keyed RNG only)", imp)
		}
	}
	for _, leaf := range []string{"./internal/lease", "./pipeline/batch", "./pipeline/internal/det", "./pipeline/internal/errs", "./server/internal/limits"} {
		if notStd := nonStandardDeps(t, leaf); len(notStd) > 0 {
			t.Errorf("%s is to be a leaf (the standard library only), but links %v", leaf, notStd)
		}
	}
	// The kernels are functions on planes with plain arguments: of the
	// module they link pipeline/internal/det's maths and RNG alone, never
	// the ops, the codec, the datasets or the executor.
	for _, d := range nonStandardDeps(t, "./pipeline/kernels") {
		if d != module+"/pipeline/internal/det" {
			t.Errorf("pipeline/kernels links %s: it may link the standard library and pipeline/internal/det only", d)
		}
	}
	// The codec (the C decoders and the resampler, as Go's image/jpeg,
	// with the caches its decodes keep) knows nothing of the ops, the
	// transforms or the executor: of the module it links
	// pipeline/internal/errs' sentinels and its decoder index
	// (pipeline/codec/index) alone, and xxhash, never the pipeline's root,
	// its kernels or its datasets.
	for _, d := range nonStandardDeps(t, "./pipeline/codec") {
		if d != module+"/pipeline/internal/errs" && d != module+"/pipeline/codec/index" && d != "github.com/cespare/xxhash/v2" {
			t.Errorf("pipeline/codec links %s: it may link the standard library, pipeline/internal/errs, pipeline/codec/index and xxhash only", d)
		}
	}
	// The decoder index (pipeline/codec/index) is plain Go below the
	// codec: its entries, its budget and its files, with the standard
	// library and xxhash alone; it links nothing of the module.
	for _, d := range nonStandardDeps(t, "./pipeline/codec/index") {
		if d != "github.com/cespare/xxhash/v2" {
			t.Errorf("pipeline/codec/index links %s: it may link the standard library and xxhash only", d)
		}
	}
	// The YOLO family's kernels (OpenCV's semantics as ultralytics calls
	// them) are a room beside the kernels: of the module they link
	// pipeline/internal/det and pipeline/kernels (its Planes) only, never
	// the ops, the codec or the pipeline's root.
	for _, d := range nonStandardDeps(t, "./pipeline/kernels/cv") {
		if d != module+"/pipeline/internal/det" && d != module+"/pipeline/kernels" {
			t.Errorf("pipeline/kernels/cv links %s: it may link the standard library, pipeline/internal/det and pipeline/kernels only", d)
		}
	}
	// The datasets are a portable type over pipeline/source: of the
	// pipeline they link its leaves (batch's Field, internal/errs'
	// sentinels), the store drivers and the annotations' parsers, never
	// the root (the decoder, the ops, the executor) nor the kernels.
	for _, d := range nonStandardDeps(t, "./pipeline/dataset") {
		if d == module+"/pipeline" || strings.HasPrefix(d, module+"/pipeline/kernels") {
			t.Errorf("pipeline/dataset links %s: the datasets know nothing of decoding or augmenting", d)
		}
	}
	// The targets (pipeline/targets: torchvision's box, keypoint and mask
	// kernels on plain arguments, and their wire) know nothing of the ops,
	// the steps or the decoder: they link the datasets' Instances, the
	// kernels and the sentinels, never the pipeline's root nor the codec.
	for _, d := range nonStandardDeps(t, "./pipeline/targets") {
		if d == module+"/pipeline" || strings.HasPrefix(d, module+"/pipeline/codec") {
			t.Errorf("pipeline/targets links %s: the targets' kernels take plain arguments, not the ops or the decoder", d)
		}
	}
	// The functional ops (pipeline/fn: Fn, Step, their table, their
	// kernels' calls and their targets' moves, as
	// torchvision.transforms.v2.functional) stand below the ops that draw
	// them and the decoder that fuses their geometry: they link the
	// kernels, the targets and the pipeline's internals, never the root
	// nor the codec.
	for _, d := range nonStandardDeps(t, "./pipeline/fn") {
		if d == module+"/pipeline" || strings.HasPrefix(d, module+"/pipeline/codec") {
			t.Errorf("pipeline/fn links %s: the functional ops take a Step and planes, not the ops or the decoder", d)
		}
	}
	// The Transform (pipeline/transform: the compiled transform, its
	// geometry's families and plan, views, presets, cost) stands below
	// the decoder that fuses its plan: of the module it imports the op
	// table, the functional ops, the kernels, the targets, the datasets'
	// names and the pipeline's internals, never the root nor the codec.
	for _, line := range goList(t, "-f", `{{join .Imports " "}}`, "./pipeline/transform") {
		for _, imp := range strings.Fields(line) {
			switch {
			case !strings.HasPrefix(imp, module+"/"):
			case imp == module+"/pipeline/ops", imp == module+"/pipeline/fn", imp == module+"/pipeline/kernels",
				imp == module+"/pipeline/kernels/cv", imp == module+"/pipeline/targets", imp == module+"/pipeline/dataset",
				strings.HasPrefix(imp, module+"/pipeline/internal/"):
			default:
				t.Errorf("pipeline/transform imports %s: the Transform draws plans and steps, it knows nothing of the decoder or the codec", imp)
			}
		}
	}
	// The op table (pipeline/ops: Op, the registry, the schema, the
	// compiler and the families that only draw steps) stands below the
	// Transform and its geometry, which the root keeps: of the module it
	// imports the functional ops, the policies, the kernels', targets' and
	// batch's names and the pipeline's internals, never the root nor the
	// codec.
	for _, line := range goList(t, "-f", `{{join .Imports " "}}`, "./pipeline/ops") {
		for _, imp := range strings.Fields(line) {
			switch {
			case !strings.HasPrefix(imp, module+"/"):
			case imp == module+"/pipeline/fn", imp == module+"/pipeline/policy", imp == module+"/pipeline/kernels",
				imp == module+"/pipeline/targets", imp == module+"/pipeline/batch",
				strings.HasPrefix(imp, module+"/pipeline/internal/"):
			default:
				t.Errorf("pipeline/ops imports %s: the op table draws functional steps, it knows nothing of the Transform, the decoder or the codec", imp)
			}
		}
	}
	// The augmentation policies (pipeline/policy: torchvision's and
	// timm's) draw functional steps: of the module they import the
	// functional ops, the kernels' names and the pipeline's internals
	// alone, never the ops that register them as ops, the root or the
	// codec.
	for _, line := range goList(t, "-f", `{{join .Imports " "}}`, "./pipeline/policy") {
		for _, imp := range strings.Fields(line) {
			switch {
			case !strings.HasPrefix(imp, module+"/"):
			case imp == module+"/pipeline/fn", imp == module+"/pipeline/kernels",
				strings.HasPrefix(imp, module+"/pipeline/internal/"):
			default:
				t.Errorf("pipeline/policy imports %s: a policy draws functional steps (pipeline/fn), it knows nothing of the ops, the decoder or the codec", imp)
			}
		}
	}
	// A Transform's side for the Decoder (Transform.Sampler: a sample's
	// plan, draws and compiled nodes) opens with a key of
	// pipeline/internal/samplerkey: of the packages, only the root, whose
	// Decoder reads it, pipeline/transform, which asks for it, and the
	// tests' pipeline/internal/testops (never linked into the binary: its
	// Tracer is the Decoder's draw for pipeline/transform's tests) import
	// it (internal/ keeps the rest of the module out).
	for _, line := range goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...") {
		pkg, imports, _ := strings.Cut(line, " ")
		switch pkg {
		case module + "/pipeline", module + "/pipeline/transform", module + "/pipeline/internal/testops":
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if imp == module+"/pipeline/internal/samplerkey" {
				t.Errorf("%s imports %s: only the pipeline's root reads a Transform's side for the Decoder", pkg, imp)
			}
		}
	}
	for _, line := range goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./pipeline/...") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			switch {
			case strings.HasPrefix(imp, "google.golang.org/grpc"):
				t.Errorf("%s imports %s: pipeline never imports gRPC", pkg, imp)
			case !strings.HasPrefix(imp, module+"/") || strings.HasPrefix(imp, module+"/pipeline"):
			case strings.HasPrefix(imp, module+"/internal/"):
				if notStd := nonStandardDeps(t, imp); len(notStd) > 0 {
					t.Errorf("%s imports %s, which is not a leaf: it links %v", pkg, imp, notStd)
				}
			default:
				t.Errorf("%s imports %s: an arrow back up, out of pipeline", pkg, imp)
			}
		}
	}
}

// nonStandardDeps is what pkg links outside the standard library, itself
// left out.
func nonStandardDeps(t *testing.T, pkg string) []string {
	t.Helper()
	var out []string
	lines := goList(t, "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg)
	for _, line := range lines[:len(lines)-1] { // -deps lists pkg itself last
		if p, std, _ := strings.Cut(line, " "); std != "true" {
			out = append(out, p)
		}
	}
	return out
}

// goList runs `go list args...` at the module's root: its output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// Bounds of server/'s top level (issue 36): its rooms (the job, the
// makers, the plan, the limits, the coordinator) are packages of their
// own under server/internal, and what is left is files of one concern.
const (
	maxServerFiles     = 20  // non-test .go files, of every build
	maxServerFileLines = 500 // lines of each
)

// TestLayout: server/'s top level holds at most maxServerFiles non-test
// files, none over maxServerFileLines lines; and no package under it
// (server/internal/...) nor below it (internal/..., pipeline/...) links
// the server package: every arrow into server comes from cmd, bench or
// a test.
func TestLayout(t *testing.T) {
	files, err := filepath.Glob("../../server/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		n++
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if lines := bytes.Count(b, []byte("\n")); lines > maxServerFileLines {
			t.Errorf("%s: %d lines, over %d: split it by concern, or move a room of it under server/internal", filepath.Base(f), lines, maxServerFileLines)
		}
	}
	if n == 0 || n > maxServerFiles {
		t.Errorf("server/ has %d non-test .go files at its top level; want 1..%d", n, maxServerFiles)
	}
	below := goList(t, "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./server/internal/...", "./internal/...", "./pipeline/...")
	for _, line := range below {
		pkg, imports, _ := strings.Cut(line, " ")
		if pkg == module+"/server" {
			t.Errorf("the server package is linked by one of server/internal/..., internal/... or pipeline/... (go list -deps lists it)")
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if imp == module+"/server" {
				t.Errorf("%s imports %s: an arrow back up into the server", pkg, imp)
			}
		}
	}
}

// Bounds of pipeline's packages: each room below the root holds at most
// maxRoomFiles non-test .go and .c files, of every build; the root at most
// maxPipelineRootFiles, a bound lowered as rooms are carved out of it
// (kernels: 93 to 77; then 82 with five detection files, until the ops
// room takes them; dataset: 82 to 66; the op registry's family files,
// 66 to 80, until the ops room takes them; turbo.c cut in two, 81; the
// codec's C and its link flags, 81 to 70; the decoder index, 70 to 68;
// the coefficient cache, the transcodes' bookkeeping and the decodes that
// use them, 68 to 64; the targets' kernels and wire, 64 to 61; the
// functional ops, 61 to 60; the per-thread CPU clock's system calls, 60
// to 58; the Decoder's targets and trace out of the ops' files, 59,
// until the ops room takes them; the augmentation policies, 59 to 55;
// the identity's cgo and non-cgo halves, which pipeline/codec answers in
// both builds, folded into identity.go, 55 to 53; the op table, 53 to
// 39; the Transform, 39 to 20, with cpuclock.go folded into
// queue_sched.go and names.go for the rooms' internals): at
// maxRoomFiles.
const (
	maxRoomFiles         = 20
	maxPipelineRootFiles = 20
)

// Bounds of pipeline/'s files: a Go file of at most pipelineGoLines
// lines, a C file of at most pipelineCLines. pipelineOversize lists the
// files still over them, each at most the lines it has now: they are to be
// cut along their seams as the pipeline's rooms are carved (codec, ops,
// datasets), and none may grow meanwhile; an entry whose file is back
// under the bound must go.
const (
	pipelineGoLines = 500
	pipelineCLines  = 1000
)

var pipelineOversize = map[string]int{
	"pipeline/annot/coco.go": 663,
}

// TestPipelineRooms: no package under pipeline/ imports pipeline itself
// (the rooms are below the executor, never above it), and pipeline/'s
// files and packages keep to their bounds.
func TestPipelineRooms(t *testing.T) {
	for _, line := range goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./pipeline/...") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			if imp == module+"/pipeline" {
				t.Errorf("%s imports %s: an arrow up into the pipeline's root", pkg, imp)
			}
		}
	}
	files := map[string]int{} // non-test .go and .c files, by directory
	seen := map[string]bool{}
	err := filepath.WalkDir("../../pipeline", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return err
		}
		name := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		limit := 0
		switch {
		case strings.HasSuffix(name, "_test.go"):
		case strings.HasSuffix(name, ".go"):
			limit = pipelineGoLines
		case strings.HasSuffix(name, ".c"):
			limit = pipelineCLines
		}
		if limit == 0 {
			return nil
		}
		files[filepath.Dir(name)]++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := bytes.Count(b, []byte("\n"))
		if most, ok := pipelineOversize[name]; ok {
			seen[name] = true
			if lines > most {
				t.Errorf("%s: %d lines, more than the %d it had: cut it along a seam instead of growing it", name, lines, most)
			} else if lines <= limit {
				t.Errorf("%s: %d lines, within the bound of %d now: drop its entry from pipelineOversize", name, lines, limit)
			}
		} else if lines > limit {
			t.Errorf("%s: %d lines, over %d: split it by concern", name, lines, limit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range pipelineOversize {
		if !seen[name] {
			t.Errorf("pipelineOversize lists %s, which is gone: drop its entry", name)
		}
	}
	for dir, n := range files {
		switch {
		case dir == "pipeline" && n > maxPipelineRootFiles:
			t.Errorf("pipeline/ has %d non-test .go and .c files at its top level, over %d: carve a room out of it instead", n, maxPipelineRootFiles)
		case dir != "pipeline" && n > maxRoomFiles:
			t.Errorf("%s has %d non-test .go and .c files, over %d: split the room", dir, n, maxRoomFiles)
		}
	}
	if files["pipeline/kernels"] == 0 || files["pipeline/dataset"] == 0 || files["pipeline/codec"] == 0 {
		t.Error("no non-test files seen in pipeline/kernels, pipeline/dataset or pipeline/codec: the walk is not read right")
	}
}
