package dataset

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// TestOpenSourceProgress: a local dataset opened without a manifest (a
// server's start) reports its walk and its shard reads, as stoker index
// does, so that a long start can say how far it has come.
func TestOpenSourceProgress(t *testing.T) {
	folder := t.TempDir()
	files := map[string][]byte{}
	for i := range 4100 {
		files[filepath.Join(fmt.Sprintf("c%d", i%2), fmt.Sprintf("%05d.jpg", i))] = []byte("x")
	}
	writeTree(t, folder, files)
	shards := t.TempDir()
	for i := range 3 {
		writeShard(t, filepath.Join(shards, fmt.Sprintf("s%d.tar", i)), []tarMember{{Name: "a.jpg", Data: []byte("x")}, {Name: "a.cls", Data: []byte("0")}})
	}
	for _, c := range []struct {
		dir  string
		want []IndexProgress
	}{
		{folder, []IndexProgress{{Phase: "list", Done: 4096}}},
		{shards, []IndexProgress{{Phase: "scan", Done: 1, Total: 3}, {Phase: "scan", Done: 2, Total: 3}, {Phase: "scan", Done: 3, Total: 3}}},
	} {
		var got []IndexProgress
		ds, err := OpenSource(context.Background(), c.dir, WithIndexOptions(IndexOptions{Progress: func(p IndexProgress) { got = append(got, p) }}))
		if err != nil {
			t.Fatal(err)
		}
		ds.Close()
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: progress %+v, want %+v", c.dir, got, c.want)
		}
	}
	if u := (IndexProgress{Phase: "scan", Done: 2, Total: 3, Bytes: 10, TotalBytes: 30}).Update(); u.Phase != "reading shards" || u.Unit != "shards" ||
		u.Done != 2 || u.Total != 3 || u.TotalBytes != 30 {
		t.Errorf("Update: %+v", u)
	}
}
