package bench

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteCaptionShards: every photo becomes a sample of three members,
// KEY.jpg, KEY.txt and KEY.json, in shards of the size asked for; the
// captions and the metadata are of the sizes the benchmark promises, the
// metadata valid JSON naming its key.
func TestWriteCaptionShards(t *testing.T) {
	src := "../testdata/photos"
	photos, _ := filepath.Glob(filepath.Join(src, "*", "*.jpg"))
	dst := t.TempDir()
	n, err := writeCaptionShards(src, dst, 10)
	if err != nil || n != len(photos) || n == 0 {
		t.Fatalf("%d samples, %v; want %d", n, err, len(photos))
	}
	shards, _ := filepath.Glob(filepath.Join(dst, "shard-*.tar"))
	if want := (n + 9) / 10; len(shards) != want {
		t.Fatalf("%d shards, want %d", len(shards), want)
	}
	members := 0
	for _, s := range shards {
		f, err := os.Open(s)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(tr)
			key, ext, _ := strings.Cut(h.Name, ".")
			members++
			switch ext {
			case "jpg":
			case "txt":
				if len(data) < captionMin || len(data) > captionMax {
					t.Errorf("%s: %d bytes, want %d..%d", h.Name, len(data), captionMin, captionMax)
				}
			case "json":
				var m struct{ Key string }
				if err := json.Unmarshal(data, &m); err != nil || m.Key != key || len(data) < metaMin || len(data) > metaMax {
					t.Errorf("%s: %d bytes, key %q, %v; want %d..%d bytes naming its key", h.Name, len(data), m.Key, err, metaMin, metaMax)
				}
			default:
				t.Errorf("member %s", h.Name)
			}
		}
	}
	if members != 3*n {
		t.Errorf("%d members, want %d", members, 3*n)
	}
}
