package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnnotationsCommand: `stoker annotations check` reads mkdata's COCO
// file and YOLO labels clean, names a malformed sample and exits 1, and
// refuses a file that is not COCO saying what was expected.
func TestAnnotationsCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := stokerBinary(t)
	dir := t.TempDir()
	run := func(args ...string) (string, int) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run("mkdata", "--coco", "--yolo", "--out", dir, "--n", "12"); code != 0 {
		t.Fatalf("mkdata --coco: %d\n%s", code, out)
	}
	ann := filepath.Join(dir, "annotations", "instances.json")
	if out, code := run("annotations", "check", ann); code != 0 || !strings.Contains(out, "12 images") || !strings.Contains(out, "0 samples malformed") {
		t.Fatalf("check: %d\n%s", code, out)
	}
	yaml, imgs := filepath.Join(dir, "data.yaml"), filepath.Join(dir, "images", "train")
	if out, code := run("annotations", "check", yaml, imgs); code != 0 || !strings.Contains(out, "12 images") {
		t.Fatalf("check (YOLO): %d\n%s", code, out)
	}
	b, _ := os.ReadFile(ann)
	os.WriteFile(ann, []byte(strings.Replace(string(b), `"category_id":`, `"category_id":77,"x":`, 1)), 0o644)
	if out, code := run("annotations", "check", ann); code != 1 || !strings.Contains(out, "field category_id: 77 is not among the file's categories") {
		t.Fatalf("check of a bad category: %d\n%s", code, out)
	}
	os.WriteFile(ann, []byte(`{"labels": []}`), 0o644)
	if out, code := run("annotations", "check", ann); code != 1 || !strings.Contains(out, "not a COCO annotations file") || !strings.Contains(out, `want a JSON object with "images"`) {
		t.Fatalf("check of a non-COCO file: %d\n%s", code, out)
	}
}
