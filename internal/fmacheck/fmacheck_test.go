package fmacheck

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/racebuild"
)

const module = "github.com/stoker-dev/stoker"

// buildTimeout bounds each go command: a cold cache on a loaded 2-core
// machine compiles the standard library and the dependencies for another
// architecture first. It turns a hang into a failure, no measure of speed.
const buildTimeout = 20 * time.Minute

// The fused multiply-add instructions, as go build -gcflags=-S and the
// assembler spell them: arm64's scalar ones, amd64's FMA3 ones.
var (
	fusedARM64 = regexp.MustCompile(`^F(N)?M(ADD|SUB)[DS]$`)
	fusedAMD64 = regexp.MustCompile(`^VF(N)?M(ADD|SUB)(132|213|231)[SP][DS]$`)
)

// probe is the one function of the module that fuses on purpose:
// pipeline's fmaProbe, x*y + z as the build compiles it, which the
// handshake's identity reports (pipeline/identity.go).
const probe = module + "/pipeline.fmaProbe"

// notUnderRace skips t under -race. These tests run compilers and read
// what they write (the listings: a million lines of assembly for
// pipeline/... and internal/...) on one goroutine, where the race
// detector has nothing to find and multiplies the reading's time by ten
// (3 s a listing without it, 30 s with it, on a loaded 2-core machine);
// the go commands and the golden test binaries they run are built
// without -race whatever this binary is. make test-go runs the package
// once more without -race.
func notUnderRace(t *testing.T) {
	t.Helper()
	if racebuild.Enabled {
		t.Skip("reads the compiler's listings: make test-go runs internal/fmacheck without -race")
	}
}

// besideTheOthers is notUnderRace for a test that runs in parallel with
// the package's other parallel test, after its sequential ones: the
// GOAMD64=v3 build (amd64, its own packages in the go build cache) and
// the C files' compiles (gcc, one at a time, one core), whose CPU then
// overlaps. The arm64 tests stay sequential, one after the other: the
// second finds what the first compiled in the go build cache, where
// side by side both would compile it.
func besideTheOthers(t *testing.T) {
	t.Helper()
	notUnderRace(t)
	t.Parallel()
}

// root is the module's root directory.
func root(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// goCmd runs the go command in dir with env added to this process's
// environment, and returns its standard output and error; a failure ends
// the test with both.
func goCmd(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		e := errb.String()
		if len(e) > 4000 {
			e = "..." + e[len(e)-4000:]
		}
		t.Fatalf("%s go %s: %v\n%s%s", strings.Join(env, " "), strings.Join(args, " "), err, out.String(), e)
	}
	return out.String(), errb.String()
}

// instr is one instruction of go build -gcflags=-S's listing.
type instr struct {
	fn   string // the function it is compiled into
	pos  string // file:line it comes from (inlined code: the callee's)
	op   string
	args string
}

var (
	textLine  = regexp.MustCompile(`^(\S+) STEXT`)
	instrLine = regexp.MustCompile(`^\t0x[0-9a-f]+ \d+ \(([^)]*)\)\t(\S+)(?:\t(.*))?$`)
)

// parseListing reads the compiler's assembly listing.
func parseListing(listing string) []instr {
	var out []instr
	fn := ""
	sc := bufio.NewScanner(strings.NewReader(listing))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if m := textLine.FindStringSubmatch(line); m != nil {
			fn = m[1]
			continue
		}
		if m := instrLine.FindStringSubmatch(line); m != nil && fn != "" {
			out = append(out, instr{fn: fn, pos: m[1], op: m[2], args: strings.TrimSpace(m[3])})
		}
	}
	return out
}

// sourceLine is the text of file:line, "" where it cannot be read. A
// build with -trimpath (make's GOFLAGS) names the module's files by
// import path, which moduleDir (the module's root) maps back to files.
func sourceLine(files map[string][]string, moduleDir, pos string) string {
	i := strings.LastIndexByte(pos, ':')
	if i < 0 {
		return ""
	}
	file := pos[:i]
	if rel, ok := strings.CutPrefix(file, module+"/"); ok {
		file = filepath.Join(moduleDir, filepath.FromSlash(rel))
	}
	var n int
	if _, err := fmt.Sscan(pos[i+1:], &n); err != nil {
		return ""
	}
	lines, ok := files[file]
	if !ok {
		b, _ := os.ReadFile(file)
		lines = strings.Split(string(b), "\n")
		files[file] = lines
	}
	if n < 1 || n > len(lines) {
		return ""
	}
	return lines[n-1]
}

// fusingMath is the set of package math's functions (as "math.Name")
// that execute a fused multiply-add on goarch (env: its GOARCH and
// GOAMD64), directly or through math's own calls: the compiler's fusions
// in its Go code (its listing, -gcflags=math=-S) and its assembly for
// goarch (math/*_goarch.s). math.FMA is left out: a call of it is the
// explicit fused operation, compiled inline.
func fusingMath(t *testing.T, goarch string, env []string, fused *regexp.Regexp) map[string]bool {
	_, listing := goCmd(t, root(t), env, "build", "-gcflags=math=-S", "math")
	fusing := map[string]bool{}
	calls := map[string][]string{}
	for _, in := range parseListing(listing) {
		switch {
		case fused.MatchString(in.op):
			fusing[in.fn] = true
		case in.op == "CALL" && strings.HasPrefix(in.args, "math."):
			calls[in.fn] = append(calls[in.fn], strings.TrimSuffix(in.args, "(SB)"))
		}
	}
	goroot, _ := goCmd(t, root(t), env, "env", "GOROOT")
	asm, err := filepath.Glob(filepath.Join(strings.TrimSpace(goroot), "src", "math", "*_"+goarch+".s"))
	if err != nil || len(asm) == 0 {
		t.Fatalf("no assembly of package math for %s: %v", goarch, err)
	}
	textAsm := regexp.MustCompile(`^TEXT\s+·(\w+)\(SB\)`)
	for _, f := range asm {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fn := ""
		for _, line := range strings.Split(string(b), "\n") {
			if m := textAsm.FindStringSubmatch(line); m != nil {
				fn = "math." + m[1]
				continue
			}
			if f := strings.Fields(line); fn != "" && len(f) > 0 && fused.MatchString(f[0]) {
				fusing[fn] = true
			}
		}
	}
	delete(fusing, "math.FMA")
	for changed := true; changed; {
		changed = false
		for fn, callees := range calls {
			for _, c := range callees {
				if fusing[c] && !fusing[fn] {
					fusing[fn], changed = true, true
				}
			}
		}
	}
	return fusing
}

// checkListing fails the test for each fused multiply-add the compiler
// chose in the module's code of the listing, and each call into a
// function of package math that fuses; explicit math.FMA calls and the
// probe are what they say. It returns how many explicit math.FMA
// instructions it saw, to show that it recognises them.
func checkListing(t *testing.T, what, listing string, fused *regexp.Regexp, fusing map[string]bool) (explicit int) {
	t.Helper()
	dir := root(t)
	files := map[string][]string{}
	bad := map[string]bool{}
	funcs := map[string]bool{}
	instrs := parseListing(listing)
	inTest := map[string]bool{} // functions declared in _test.go files: the TEXT line's position
	for _, in := range instrs {
		if in.op == "TEXT" && strings.Contains(in.pos, "_test.go:") {
			inTest[in.fn] = true
		}
	}
	for _, in := range instrs {
		if !strings.HasPrefix(in.fn, module+"/") || inTest[in.fn] {
			continue
		}
		funcs[in.fn] = true
		switch {
		case fused.MatchString(in.op):
			src := sourceLine(files, dir, in.pos)
			switch {
			case strings.Contains(src, "math.FMA("):
				explicit++
			case in.fn == probe:
			default:
				bad[fmt.Sprintf("%s: %s %s in %s, fused by the compiler: %q (round the product: float64(x*y) + z)",
					in.pos, in.op, in.args, in.fn, strings.TrimSpace(src))] = true
			}
		case in.op == "CALL" && fusing[strings.TrimSuffix(in.args, "(SB)")]:
			bad[fmt.Sprintf("%s: %s calls %s, which fuses multiply-adds on this target (use its twin in pipeline/det)",
				in.pos, in.fn, strings.TrimSuffix(in.args, "(SB)"))] = true
		}
	}
	if len(funcs) < 100 {
		t.Fatalf("%s: the listing holds %d functions of the module: not the listing of the packages asked for", what, len(funcs))
	}
	for b := range bad {
		t.Errorf("%s: %s", what, b)
	}
	t.Logf("%s: %d functions of the module, %d explicit math.FMA instructions, %d fused elsewhere", what, len(funcs), explicit, len(bad))
	return explicit
}

// arm64Env is the pure-Go arm64 build's environment (the _nocgo.go twins
// of the C).
var arm64Env = []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}

// TestARM64NoFusedMultiplyAdd: pipeline/... and internal/... (listed)
// compiled for arm64 (pure Go: CGO_ENABLED=0, the _nocgo.go twins of the C) hold no
// multiply-add the compiler fused and call no function of package math
// that fuses.
func TestARM64NoFusedMultiplyAdd(t *testing.T) {
	notUnderRace(t)
	env := arm64Env
	fusing := fusingMath(t, "arm64", env, fusedARM64)
	for _, f := range []string{"math.Atan", "math.Erfc", "math.Exp", "math.Log"} {
		if !fusing[f] {
			t.Errorf("%s does not fuse on arm64 by this test's reading of package math: the reading is wrong (or Go changed)", f)
		}
	}
	_, listing := goCmd(t, root(t), env, append([]string{"build", "-gcflags=-S"}, listed(t)...)...)
	if checkListing(t, "arm64", listing, fusedARM64, fusing) == 0 {
		t.Error("no explicit math.FMA seen (det.Exp has them): the listing is not read right")
	}
}

// notListed are the packages of pipeline/... and internal/... whose
// listing is not read: the object stores' clients and the tests' stores.
// They make no byte or value a sample carries (requests, retries,
// listings, emulators' set-up), and building them for arm64 compiled the
// S3, GCS and Azure SDKs once more (about 76 CPU-s). No package the
// goldens run imports them (TestStoresOutsideGoldens).
var notListed = []string{module + "/pipeline/source/bucket", module + "/internal/storetest"}

// listed is pipeline/... and internal/... less notListed, by import path.
func listed(t *testing.T) []string {
	out, _ := goCmd(t, root(t), nil, "list", "./pipeline/...", "./internal/...")
	var pkgs []string
	for _, p := range strings.Fields(out) {
		if !slices.Contains(notListed, p) {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) != len(strings.Fields(out))-len(notListed) {
		t.Fatalf("go list ./pipeline/... ./internal/... lacks one of %v: a package moved, and notListed says where it was", notListed)
	}
	return pkgs
}

// TestStoresOutsideGoldens: no package that a golden test's binary links
// is one whose listing TestARM64NoFusedMultiplyAdd does not read.
func TestStoresOutsideGoldens(t *testing.T) {
	for _, g := range goldenTests {
		out, _ := goCmd(t, root(t), nil, "list", "-deps", "-test", g.pkg)
		for _, p := range strings.Fields(out) {
			if slices.Contains(notListed, p) {
				t.Errorf("%s's tests link %s, whose listing is not read (notListed)", g.pkg, p)
			}
		}
	}
}

// goldenTests are the tests that pin bytes to hashes or values made by the
// default (GOAMD64=v1) build, by package: the pipeline's plans, batches
// through both decode paths, presets, the resamplers and the geometric
// kernels (pipeline/fn's torch resampling axis and functional ops, and
// pipeline/kernels', run through the root's tests, which link them);
// pipeline/det's RNG and deterministic maths.
var goldenTests = []goldenPkg{
	{"./pipeline/", "TestGoldenPlans|TestGoldenBatchReference|TestGoldenBatchFast|TestGoldenPresets|TestGoldenInterpTorch", 3},
	{"./pipeline/transform/", "TestGeomGolden|TestPlanGolden", 2},
	{"./pipeline/det/", "TestRNGGolden|TestDetMathGolden|TestDetTrigGolden|TestDetAtanErfcGolden", 4},
}

// goldenPkg is one package's golden tests: a -test.run pattern, and how
// many of them its test binary must hold at least.
type goldenPkg struct {
	pkg, tests string
	least      int
}

// buildGoldens compiles each package of goldenTests into a test binary
// with env and extra go test flags, and returns the binaries (by package)
// and the compiler's output (its listing, with -gcflags=-S).
func buildGoldens(t *testing.T, env []string, extra ...string) (map[string]string, string) {
	t.Helper()
	bins := map[string]string{}
	var listing strings.Builder
	for _, g := range goldenTests {
		bin := filepath.Join(t.TempDir(), filepath.Base(filepath.Clean(g.pkg))+".test")
		// -vet=off: these builds are read for their listing and run for
		// their bytes; lint's go vet has checked the same files.
		_, out := goCmd(t, root(t), env, append(append([]string{"test", "-c", "-vet=off", "-o", bin}, extra...), g.pkg)...)
		listing.WriteString(out)
		bins[g.pkg] = bin
	}
	return bins, listing.String()
}

// runAllGoldens is runGoldens over every package's binary; ran is false
// when one could not run on this CPU.
func runAllGoldens(t *testing.T, what string, runner []string, bins map[string]string) (out []byte, ran bool) {
	t.Helper()
	for _, g := range goldenTests {
		o, ok := runGoldens(t, what, runner, g, bins[g.pkg])
		out = append(out, o...)
		if !ok {
			return out, false
		}
	}
	return out, true
}

// TestAMD64v3SameBytes: the pipeline compiled with GOAMD64=v3, where Go
// fuses x*y + z into VFMADD231SD (cgo on, as make test builds it): its
// listing and that of the module's packages it links hold no fusion the
// compiler chose and no call into math that fuses, and where this CPU
// runs v3 code, its golden tests give the very hashes of the default
// build.
func TestAMD64v3SameBytes(t *testing.T) {
	besideTheOthers(t)
	if runtime.GOARCH != "amd64" {
		t.Skipf("GOAMD64=v3 builds are for amd64 machines; this is %s (the arm64 listing is checked by TestARM64NoFusedMultiplyAdd)", runtime.GOARCH)
	}
	env := []string{"GOOS=linux", "GOARCH=amd64", "GOAMD64=v3"}
	fusing := fusingMath(t, "amd64", env, fusedAMD64)
	for _, f := range []string{"math.Atan", "math.Erfc", "math.Exp"} {
		if !fusing[f] {
			t.Errorf("%s does not fuse under GOAMD64=v3 by this test's reading of package math: the reading is wrong (or Go changed)", f)
		}
	}
	bins, listing := buildGoldens(t, env, "-gcflags="+module+"/...=-S")
	if checkListing(t, "amd64 v3", listing, fusedAMD64, fusing) == 0 {
		t.Error("no explicit math.FMA seen (det.Exp has them): the listing is not read right")
	}
	if t.Failed() {
		return
	}

	out, ran := runAllGoldens(t, "the GOAMD64=v3 build", nil, bins)
	if !ran {
		t.Skipf("the listing is checked; this CPU does not run GOAMD64=v3 code, so the golden tests did not run in that build: %s", bytes.TrimSpace(out))
	}
}

// runGoldens runs package g's golden tests that test binary bin (run
// through runner, if any) holds, in the package's directory, and fails the
// test unless each passes. ran is false when the binary could not run on
// this CPU (the runtime's message for a GOAMD64 level it lacks).
func runGoldens(t *testing.T, what string, runner []string, g goldenPkg, bin string) (out []byte, ran bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	argv := append(append(append([]string{}, runner...), bin), "-test.run", "^("+g.tests+")$", "-test.count=1", "-test.v")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(root(t), filepath.Clean(g.pkg))
	out, err := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("microarchitecture support")) {
		return out, false
	}
	if err != nil {
		t.Fatalf("the pipeline's golden tests in %s: %v\n%s", what, err, out)
	}
	list, err := exec.CommandContext(ctx, argv[0], append(argv[1:len(argv)-4], "-test.list", "^("+g.tests+")$")...).Output()
	if err != nil {
		t.Fatalf("%s -test.list: %v", bin, err)
	}
	names := strings.Fields(string(list))
	if len(names) < g.least {
		t.Fatalf("%s holds only %d of %s's golden tests (%s)", bin, len(names), g.pkg, list)
	}
	for _, name := range names {
		if !bytes.Contains(out, []byte("--- PASS: "+name+" ")) {
			t.Errorf("%s did not pass in %s (skipped or absent):\n%s", name, what, out)
		}
	}
	t.Logf("%s: %d golden tests: %s", what, len(names), strings.Join(names, " "))
	return out, true
}

// TestARM64GoldenUnderQemu runs the pipeline's golden tests compiled for
// arm64 (pure Go: the _nocgo.go twins of the C) under qemu-user
// (qemu-aarch64, which computes arm64's fused multiply-adds as the
// hardware does): the hashes of the default amd64 build. Without
// qemu-aarch64 (make apt-test installs qemu-user) it skips and says so.
// The cgo build is not run under qemu here.
func TestARM64GoldenUnderQemu(t *testing.T) {
	notUnderRace(t)
	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		t.Skip("no qemu-aarch64 (Debian's qemu-user, which make apt-test installs): the arm64 golden tests did not run")
	}
	// The module's packages with -S, as TestARM64NoFusedMultiplyAdd
	// compiles them: the same compile flags, so the go build cache has
	// them (the listing is not read here).
	bins, _ := buildGoldens(t, arm64Env, "-gcflags="+module+"/...=-S")
	if _, ran := runAllGoldens(t, "arm64 under qemu", []string{qemu}, bins); !ran {
		t.Fatal("the arm64 test binary did not run under qemu")
	}
}

// TestCNoContraction: the pipeline's C files (pipeline/codec/,
// pipeline/kernels/ and pipeline/kernels/cv/) give the same object with -mfma (x86-64 with FMA
// instructions, which GCC contracts a*b + c into by default in GNU C
// mode, as it does on arm64) as with -ffp-contract=off:
// their pragmas turn contraction off, so the only fused operations are
// the intrinsics the source names. cgo refuses -ffp-contract in #cgo
// CFLAGS, hence pragmas.
func TestCNoContraction(t *testing.T) {
	besideTheOthers(t)
	if runtime.GOARCH != "amd64" {
		t.Skipf("-mfma is an x86-64 flag; this is %s", runtime.GOARCH)
	}
	ccOut, _ := goCmd(t, root(t), nil, "env", "CC")
	cc := strings.Fields(ccOut)
	if len(cc) == 0 {
		t.Skip("go env CC is empty")
	}
	if _, err := exec.LookPath(cc[0]); err != nil {
		t.Skipf("no C compiler (%s): the pipeline's C is not built here", cc[0])
	}
	dir := t.TempDir()
	compile := func(src string, extra ...string) []byte {
		t.Helper()
		obj := filepath.Join(dir, "out.o")
		args := append(append(append([]string{}, cc[1:]...), "-O3", "-mfma", "-c", src, "-o", obj), extra...)
		if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", cc[0], strings.Join(args, " "), err, out)
		}
		b, err := os.ReadFile(obj)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The check can see a contraction: a*b + c without a pragma contracts.
	probeC := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(probeC, []byte("double f(double a, double b, double c) { return a * b + c; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(compile(probeC), compile(probeC, "-ffp-contract=off")) {
		t.Skipf("%s does not contract a*b + c with -mfma: this check could not see a contraction", cc[0])
	}
	var srcs []string
	for _, dir := range []string{filepath.Join("pipeline", "codec"), filepath.Join("pipeline", "kernels"), filepath.Join("pipeline", "kernels", "cv")} {
		got, err := filepath.Glob(filepath.Join(root(t), dir, "*.c"))
		if err != nil || len(got) == 0 {
			t.Fatalf("no C files in %s/: %v", dir, err)
		}
		srcs = append(srcs, got...)
	}
	for _, src := range srcs {
		if !bytes.Equal(compile(src), compile(src, "-ffp-contract=off")) {
			t.Errorf("%s: contracted multiply-adds with -mfma (its object differs from -ffp-contract=off's): it lacks the pragmas turbo.c starts with", filepath.Base(src))
		}
	}
}

// TestARM64CgoGoldenUnderQemu runs the pipeline's golden tests in the
// arm64 build with cgo (the C cross-compiled by aarch64-linux-gnu-gcc,
// Debian's arm64 libjpeg-turbo with its NEON code, linked statically as
// make static links: qemu-user hangs in a dynamically linked cgo binary)
// under qemu-aarch64: the hashes of the amd64 build. It needs make
// apt-arm64's packages, which make test does not install (make
// cross-arm64 runs it): without them it skips and says so.
func TestARM64CgoGoldenUnderQemu(t *testing.T) {
	notUnderRace(t)
	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		t.Skip("no qemu-aarch64 (Debian's qemu-user: make apt-test, make apt-arm64): the arm64 cgo golden tests did not run")
	}
	const cc = "aarch64-linux-gnu-gcc"
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no %s (make apt-arm64 installs it and the arm64 libraries; make cross-arm64 runs this test): the arm64 cgo golden tests did not run", cc)
	}
	bins, _ := buildGoldens(t, []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=1", "CC=" + cc},
		"-tags", "jpegstatic netgo osusergo nonvml", "-ldflags", "-linkmode external -extldflags -static")
	if _, ran := runAllGoldens(t, "arm64 with cgo under qemu", []string{qemu}, bins); !ran {
		t.Fatal("the arm64 test binary did not run under qemu")
	}
}
