package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
)

// TestVersion builds stoker as make build does, with the version stamped
// by the linker, and finds that version in `stoker --version`, in serve's
// first log line and in `stoker status` (the server's own).
func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stoker and runs stoker serve")
	}
	parallelTest(t)
	// The two builds first, under buildCtx's hang guard: on a loaded
	// machine a build takes minutes, which the test's deadline (for
	// what the binaries do) must not count.
	bctx := buildCtx(t)
	const stamped = "v9.8.7-test"
	bin := filepath.Join(t.TempDir(), "stoker")
	build := exec.CommandContext(bctx, "go", "build", "-ldflags",
		"-X github.com/stoker-dev/stoker/internal/version.stamped="+stamped, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Without cgo: no libjpeg-turbo, and it says so. Built as make static
	// and make test-go-once's build without cgo are (the Makefile's
	// NOCGO_AS_STATIC: -trimpath, STATIC_TAGS read from the Makefile,
	// -s -w), which then share their compiles; under makeMu, as the
	// image tests' make static and make gpuhost, so that side by side
	// the second finds the first's packages in the go build cache.
	nocgo := filepath.Join(t.TempDir(), "stoker-nocgo")
	build = exec.CommandContext(bctx, "go", "build", "-trimpath", "-tags", staticTags(t), "-ldflags", "-s -w", "-o", nocgo, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	makeMu.Lock()
	nocgoOut, err := build.CombinedOutput()
	makeMu.Unlock()
	if err != nil {
		t.Fatalf("go build (no cgo): %v\n%s", err, nocgoOut)
	}
	ctx := processTest(t, 5*time.Minute)
	// The version on the first line, then the Go toolchain, the JPEG
	// decoder and the SIMD levels of this build on this CPU.
	id := pipeline.LocalIdentity()
	want := []string{"stoker " + stamped + "\n", "go: " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH,
		"output: v" + strconv.Itoa(pipeline.OutputVersion)}
	if id.Path == pipeline.PathTurbo {
		want = append(want, "jpeg: libjpeg-turbo ", "libjpeg API ", "simd on this CPU: libjpeg-turbo "+id.SIMD+", stoker's resampler "+pipeline.ResamplerSIMD())
	}
	for _, arg := range []string{"--version", "-version", "version"} {
		out, err := exec.CommandContext(ctx, bin, arg).Output()
		for _, w := range want {
			if err != nil || !strings.Contains(string(out), w) || !strings.HasPrefix(string(out), want[0]) {
				t.Errorf("stoker %s: %q, %v; want %q in it (and the version first)", arg, out, err, w)
			}
		}
		t.Logf("stoker %s:\n%s", arg, out)
	}
	// Unstamped (a plain go build): still a version, never empty.
	out, err := exec.CommandContext(ctx, stokerBinary(t), "--version").Output()
	first, _, _ := strings.Cut(string(out), "\n")
	if fields := strings.Fields(first); err != nil || len(fields) != 2 || fields[0] != "stoker" {
		t.Errorf("unstamped stoker --version: %q, %v", out, err)
	}
	// Without cgo: no libjpeg-turbo, and it says so.
	if out, err := exec.CommandContext(ctx, nocgo, "--version").Output(); err != nil ||
		!strings.Contains(string(out), "no cgo") || !strings.Contains(string(out), "jpeg: Go's image/jpeg (built without cgo: no libjpeg-turbo)") {
		t.Errorf("stoker --version without cgo: %q, %v", out, err)
	}

	p := launchServe(t, serveConfig{name: "stamped serve", bin: bin, dataset: writeDataset(t, 8, 2, 0), workers: 1})
	p.waitReady(t, ctx)
	if logs := p.logRecords(); len(logs) == 0 || logs[0]["msg"] != "stoker serve" || logs[0]["version"] != stamped {
		t.Errorf("serve's first log line is not its version: %v", logs[:min(1, len(logs))])
	}
	var buf bytes.Buffer
	if err := statusTo(&buf, []string{p.addr}); err != nil {
		t.Fatal(err)
	}
	if want := p.addr + ": stoker " + stamped + ","; !strings.HasPrefix(buf.String(), want) {
		t.Errorf("status does not start with %q:\n%s", want, buf.String())
	}
}

// staticTags is the Makefile's STATIC_TAGS, make static's build tags.
func staticTags(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	return makeVar(t, mk, "STATIC_TAGS")
}

// makeVar is the value of the Makefile's simple variable name (a
// `name := value` line), its $(var) references to others expanded.
func makeVar(t *testing.T, mk []byte, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` := (.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatalf("Makefile: no %s := ... line", name)
	}
	return regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(strings.TrimSpace(string(m[1])), func(ref string) string {
		return makeVar(t, mk, ref[2:len(ref)-1])
	})
}
