package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTar writes a tar of members (name, data) to path, gzip-compressed
// when zip.
func writeTar(t *testing.T, path string, zip bool, members ...[2]string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(m[1]))
	}
	tw.Close()
	data := buf.Bytes()
	if zip {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(data)
		zw.Close()
		data = z.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestServeWebDatasetMessages: stoker serve and stoker index, given
// gzip-compressed shards or a shard with an image and no label, exit at
// once with the message that says what is wrong and what to do (the
// messages docs/datasets.md and docs/operating.md quote).
func TestServeWebDatasetMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and stoker index processes")
	}
	ctx := processTest(t, 2*time.Minute)
	gz := t.TempDir()
	writeTar(t, filepath.Join(gz, "shard-000.tar.gz"), true, [2]string{"a.jpg", "x"}, [2]string{"a.cls", "0"})
	writeTar(t, filepath.Join(gz, "shard-001.tgz"), true, [2]string{"b.jpg", "x"}, [2]string{"b.cls", "0"})
	nolabel := t.TempDir()
	writeTar(t, filepath.Join(nolabel, "shard-000.tar"), false, [2]string{"n01/000001.jpg", "x"}, [2]string{"n01/000001.cls", "3"},
		[2]string{"n01/000002.jpg", "y"})
	for _, c := range []struct {
		name, dir string
		want      []string
	}{
		{"compressed", gz, []string{"compressed tar shards (shard-000.tar.gz, shard-001.tgz)",
			"stoker reads each sample in place at its offset in its shard", "gunzip -k shard-000.tar.gz writes its .tar"}},
		{"no label", nolabel, []string{"sample n01/000002 has an image (n01/000002.jpg) but no label",
			"a member n01/000002.cls beside it in the same shard, holding its class index as decimal text"}},
	} {
		for _, args := range [][]string{
			{"serve", "--listen", "127.0.0.1:0", "--workers", "1", "--dataset", "ds=" + c.dir},
			{"index", c.dir, "--out", filepath.Join(t.TempDir(), "m")},
		} {
			t.Run(c.name+"/"+args[0], func(t *testing.T) {
				_, errOut, err := runStoker(ctx, nil, args...)
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() == 0 {
					t.Fatalf("%v, want a non-zero exit\n%s", err, errOut)
				}
				for _, w := range c.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("stderr does not say %q:\n%s", w, errOut)
					}
				}
				if strings.Contains(errOut, "corrupt image") || strings.Contains(errOut, "no images in") {
					t.Errorf("stderr blames the wrong thing:\n%s", errOut)
				}
			})
		}
	}
}
