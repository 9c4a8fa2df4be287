package pipeline

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestLocalIdentity(t *testing.T) {
	id := LocalIdentity()
	if id.Output != OutputVersion || id.Version == "" || !strings.HasPrefix(id.Arch, runtime.GOARCH) {
		t.Errorf("identity %+v", id)
	}
	if id.FMA != fusesMultiplyAdd() {
		t.Errorf("FMA %v, the probe says %v", id.FMA, fusesMultiplyAdd())
	}
	if Fast() {
		if id.Path != PathTurbo || id.Turbo < 1000000 || id.JPEGLib < 62 || id.SIMD == "" {
			t.Errorf("cgo build: identity %+v, want libjpeg-turbo's versions and SIMD", id)
		}
	} else if id.Path != PathGo || id.Turbo != 0 || id.SIMD != "none" {
		t.Errorf("pure-Go build: identity %+v", id)
	}
	if err := id.SameOutput(id); err != nil {
		t.Errorf("an identity differs from itself: %v", err)
	}
	t.Logf("%v", id)
}

func TestSameOutput(t *testing.T) {
	base := Identity{Version: "v1.0.0", Output: 3, Arch: "amd64/v1", Path: PathTurbo, SIMD: "avx2", Turbo: 2001005, JPEGLib: 62}
	for _, tc := range []struct {
		name   string
		change func(*Identity)
		differ string // "" when the bytes are the same
	}{
		{"another stoker version, same output", func(id *Identity) { id.Version = "v1.1.0" }, ""},
		{"another SIMD level", func(id *Identity) { id.SIMD = "sse2" }, ""},
		{"another GOAMD64 level", func(id *Identity) { id.Arch = "amd64/v2" }, ""},
		{"arm64 without fusion", func(id *Identity) { id.Arch = "arm64/v8.0" }, ""},
		{"another output version", func(id *Identity) { id.Output = 4 }, "output version 3 vs 4"},
		{"pure Go", func(id *Identity) { id.Path, id.Turbo, id.JPEGLib, id.SIMD = PathGo, 0, 0, "none" }, "decode path"},
		{"another libjpeg-turbo", func(id *Identity) { id.Turbo = 3000001 }, "libjpeg-turbo 2.1.5 (jpeg 62) vs 3.0.1 (jpeg 62)"},
		{"another libjpeg API", func(id *Identity) { id.JPEGLib = 80 }, "jpeg 80"},
		{"fused multiply-adds", func(id *Identity) { id.Arch, id.FMA = "arm64/v8.0", true }, "fused multiply-adds false vs true"},
		{"an architecture not checked", func(id *Identity) { id.Arch = "ppc64le/power8" }, "architecture amd64 vs ppc64le"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := base
			tc.change(&other)
			err := base.SameOutput(other)
			switch {
			case tc.differ == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.differ != "" && (!errors.Is(err, ErrOtherBytes) || !strings.Contains(err.Error(), tc.differ)):
				t.Errorf("got %v, want an ErrOtherBytes saying %q", err, tc.differ)
			case err != nil && !strings.Contains(err.Error(), base.String()) || err != nil && !strings.Contains(err.Error(), other.String()):
				t.Errorf("%v: does not name both identities", err)
			}
			if err2 := other.SameOutput(base); (err == nil) != (err2 == nil) {
				t.Errorf("not symmetric: %v / %v", err, err2)
			}
		})
	}
}
