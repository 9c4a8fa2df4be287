package storetest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/pipeline/dataset"
)

// TestWriteShards: the shards are the same bytes on every run, each
// sample's offset and size point at its image, and stoker's own readers
// see sample i of the shards as sample i of the ImageFolder: the same
// bytes and label.
func TestWriteShards(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	samples := storetest.WriteShards(t, photos, a, 10)
	storetest.WriteShards(t, photos, b, 10)
	shards, _ := filepath.Glob(filepath.Join(a, "*.tar"))
	if len(samples) < 40 || len(shards) != (len(samples)+9)/10 {
		t.Fatalf("%d samples in %d shards", len(samples), len(shards))
	}
	for _, p := range shards {
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, filepath.Base(p)))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs (%v)", filepath.Base(p), err)
		}
	}
	for _, s := range samples {
		shard, _ := os.ReadFile(filepath.Join(a, s.Shard))
		file, _ := os.ReadFile(filepath.Join(photos, s.Source))
		if s.Offset+s.Size > int64(len(shard)) || !bytes.Equal(shard[s.Offset:s.Offset+s.Size], file) {
			t.Errorf("%s/%s at %d+%d is not %s", s.Shard, s.Member, s.Offset, s.Size, s.Source)
		}
	}

	wds, err := dataset.OpenWebDataset(a)
	if err != nil {
		t.Fatal(err)
	}
	defer wds.Close()
	folder, err := dataset.OpenImageFolder(photos)
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	if wds.Len() != len(samples) || folder.Len() != len(samples) {
		t.Fatalf("%d samples written; the WebDataset has %d, the ImageFolder %d", len(samples), wds.Len(), folder.Len())
	}
	for i, s := range samples {
		if got, want := wds.Name(i), s.Shard+"/"+s.Member; got != want {
			t.Errorf("sample %d is %s, want %s", i, got, want)
		}
		if folder.Name(i) != s.Source || wds.Label(i) != folder.Label(i) || wds.Label(i) != int64(s.Label) {
			t.Errorf("sample %d: %s label %d, the ImageFolder's %s label %d, written %d",
				i, wds.Name(i), wds.Label(i), folder.Name(i), folder.Label(i), s.Label)
		}
		x, err1 := wds.Read(i, nil)
		y, err2 := folder.Read(i, nil)
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("sample %d: bytes differ (%v, %v)", i, err1, err2)
		}
	}
}
