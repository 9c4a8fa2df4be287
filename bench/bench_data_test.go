package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/progress"
)

// TestWriteSyntheticSetProgress: writing a synthetic set reports the
// images written, its last line the whole count, and writes every image.
func TestWriteSyntheticSetProgress(t *testing.T) {
	var out bytes.Buffer
	dir := filepath.Join(t.TempDir(), "data")
	if err := WriteSyntheticSetProgress(context.Background(), dir, 12, 3, 1, progress.New(&out, "stoker mkdata")); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "stoker mkdata: writing images: 12 of 12 (") {
		t.Errorf("progress:\n%s", out.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
	if len(files) != 12 {
		t.Errorf("%d images written, want 12", len(files))
	}
	if _, err := os.Stat(filepath.Join(dir, "class02")); err != nil {
		t.Error(err)
	}
}
