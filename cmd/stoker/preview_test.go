package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPreviewBucket: stoker preview draws a bucket's samples as it does a
// local directory's (it said "no such file or directory" of an s3://
// URL), and a dataset none of whose samples decode is an error naming
// them, not an empty picture.
func TestPreviewBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker and versitygw processes")
	}
	ctx := processTest(t, 2*time.Minute)
	data := writeDataset(t, 8, 2, 0)
	s := s3Env(t)
	s.PutTree(t, "bkt", "if/", data)
	out := filepath.Join(t.TempDir(), "grid.png")
	if _, errOut, err := runStoker(ctx, nil, "preview", "--data", s.URL("bkt", "if/"), "--transform", "imagenet-eval", "-n", "4", "-o", out); err != nil {
		t.Fatalf("preview of s3://bkt/if/: %v\n%s", err, errOut)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 2*224 {
		t.Fatalf("preview wrote %v (%v), want a 2x2 grid of 224-pixel samples", img.Bounds(), err)
	}

	bad := t.TempDir()
	for _, name := range []string{"a/1.jpg", "b/2.jpg"} {
		os.MkdirAll(filepath.Join(bad, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(bad, name), []byte("not a JPEG"), 0o644)
	}
	_, errOut, err := runStoker(ctx, nil, "preview", "--data", bad, "-o", filepath.Join(t.TempDir(), "bad.png"))
	if err == nil || !strings.Contains(errOut, "none of the 2 samples could be made") || !strings.Contains(errOut, "a/1.jpg") {
		t.Errorf("preview of files that are not images: %v\n%s\nwant an error naming them", err, errOut)
	}
}

// TestPreviewNoSamples: -n 0 (or less) is an error saying so, exit 1, and
// no picture, not an empty grid written with exit 0.
func TestPreviewNoSamples(t *testing.T) {
	ctx := processTest(t, time.Minute)
	data := writeDataset(t, 4, 1, 0)
	for _, n := range []string{"0", "-3"} {
		out := filepath.Join(t.TempDir(), "grid.png")
		_, errOut, err := runStoker(ctx, nil, "preview", "--data", data, "-n", n, "-o", out)
		if err == nil || !strings.Contains(errOut, "-n "+n+": want at least 1 sample") {
			t.Errorf("preview -n %s: %v\n%s\nwant an error saying -n wants at least 1", n, err, errOut)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("preview -n %s wrote %s", n, out)
		}
	}
}

// TestPreviewViews: a preset of several views previews each sample as its
// views side by side.
func TestPreviewViews(t *testing.T) {
	ctx := processTest(t, 2*time.Minute)
	data := writeDataset(t, 4, 1, 0)
	out := filepath.Join(t.TempDir(), "grid.png")
	if _, errOut, err := runStoker(ctx, nil, "preview", "--data", data, "--transform", "dino", "-n", "1", "-o", out); err != nil {
		t.Fatalf("preview of dino: %v\n%s", err, errOut)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if want := 2*224 + 8*96; err != nil || img.Bounds().Dx() < want || img.Bounds().Dy() < 224 {
		t.Fatalf("preview wrote %v (%v), want one cell of dino's 10 views side by side (%d px wide)", img.Bounds(), err, want)
	}
}
