package main

import (
	"bytes"
	"image"
	_ "image/jpeg"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/dataset"
)

// TestIndexSizes: `stoker index --sizes` records every committed photo's
// width and height, as its header declares them, in the manifest of a
// local folder and of the same files in a bucket (a real S3 server), and
// says how many it read; both manifests hold the same sizes.
func TestIndexSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker index and versitygw processes")
	}
	ctx := processTest(t, 2*time.Minute)
	dir := linkTree(t, filepath.Join(repoRoot, "testdata", "photos"))
	os.Remove(filepath.Join(dir, "NOTICE.md"))
	local := filepath.Join(t.TempDir(), "local.manifest")
	out := runIndexCmd(t, ctx, nil, dir, "--sizes", "--out", local)
	s := s3Store(t)
	s.PutTree(t, "bkt", "photos/", dir)
	remote := filepath.Join(t.TempDir(), "remote.manifest")
	rout := runIndexCmd(t, ctx, s.Env(), s.URL("bkt", "photos/"), "--sizes", "--out", remote)
	var fps []string
	for _, c := range []struct{ path, out string }{{local, out}, {remote, rout}} {
		b, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := dataset.DecodeManifest(bytes.NewReader(b), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !m.HasImageSizes() {
			t.Fatalf("%s: no sizes", c.path)
		}
		for i := range m.Len() {
			key := m.Object(m.Sample(i).Object).Key
			f, err := os.Open(filepath.Join(dir, filepath.FromSlash(key)))
			if err != nil {
				t.Fatal(err)
			}
			cfg, _, err := image.DecodeConfig(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if w, h, ok := m.ImageSize(i); !ok || w != cfg.Width || h != cfg.Height {
				t.Errorf("%s: %s is %dx%d (%v), its header says %dx%d", c.path, key, w, h, ok, cfg.Width, cfg.Height)
			}
		}
		want := regexp.MustCompile(`, ` + strconv.Itoa(m.Len()) + ` of the images' sizes \(sizes [0-9a-f]{32}\)`)
		if !want.MatchString(c.out) {
			t.Errorf("stoker index --sizes said %q", c.out)
		}
		fps = append(fps, m.SizesFingerprint())
	}
	if fps[0] != fps[1] {
		t.Errorf("the folder's sizes %s, the bucket's %s", fps[0], fps[1])
	}
}
