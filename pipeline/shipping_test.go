//go:build cgo

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
// binary encodes no pixels. A production file of this package that
// imports it, or C here that calls libjpeg's compressor, fails this test
// (transcode.c included: a progressive file's transcode is kept as
// coefficients, never written as a scan).
func TestNoEncoderShipped(t *testing.T) {
	compressor := regexp.MustCompile(`jpeg_(create|start|finish|destroy)_compress|jpeg_CreateCompress|jpeg_write_scanlines|jpeg_write_raw_data|jpeg_write_coefficients|jpeg_set_quality|jpeg_simple_progression`)
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
