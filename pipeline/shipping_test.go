package pipeline

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoEncoderShipped: the libjpeg encoder is test-only code
// (internal/jpegenc, imported from _test.go files only), so the stoker
// binary links no JPEG compressor. A production file of this package that
// imports it, or C here that calls libjpeg's compressor, fails this test.
// (go build ./cmd/stoker && nm stoker | grep -i compress shows the same.)
func TestNoEncoderShipped(t *testing.T) {
	compressor := regexp.MustCompile(`jpeg_(create|start|finish|destroy)_compress|jpeg_CreateCompress|jpeg_write_scanlines|jpeg_set_quality`)
	files, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		prod := strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go")
		c := strings.HasSuffix(f, ".c") || strings.HasSuffix(f, ".h")
		if !prod && !c {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if prod && strings.Contains(string(data), "internal/jpegenc") {
			t.Errorf("%s imports the test-only encoder", f)
		}
		if m := compressor.FindString(string(data)); m != "" {
			t.Errorf("%s uses libjpeg's compressor (%s): encoders belong in internal/jpegenc", f, m)
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
