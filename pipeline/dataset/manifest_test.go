package dataset

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// wdsDir is a directory of two shards with every member kind the tar
// parser takes or skips, and a file that is not a shard.
func wdsDir(t *testing.T) string {
	t.Helper()
	jpg := encodeJPEG(testPicture(24, 16), 90)
	long := strings.Repeat("deep/", 30) + "k"
	dir := t.TempDir()
	writeShard(t, filepath.Join(dir, "shard-b.tar"), []tarMember{
		{Name: "x/100.jpeg", Data: jpg[:len(jpg)-1]},
		{Name: "x/100.cls", Data: []byte("2")},
		{Name: long + ".png", Data: encodePNG(testPicture(16, 24))},
		{Name: long + ".cls", Data: []byte("1")},
	}, tar.FormatGNU)
	writeShard(t, filepath.Join(dir, "shard-a.tar"), []tarMember{
		{Name: "000.jpg", Data: jpg},
		{Name: "000.cls", Data: []byte("3")},
		{Name: "001.cls", Data: []byte(" 1\n")},
		{Name: "001.png", Data: encodePNG(testPicture(16, 24))},
		{Name: "dir", Data: nil},
		{Name: "dir/sub.v2/002.jpg", Data: jpg[:100]},
		{Name: "dir/sub.v2/002.cls", Data: []byte("0")},
		{Name: "003.json", Data: []byte("{}")},
	})
	writeShard(t, filepath.Join(dir, "shard-c.tar"), []tarMember{{Name: "only.json", Data: []byte("{}")}}) // no samples
	writeTree(t, dir, map[string][]byte{"README.txt": []byte("not a shard")})
	return dir
}

// sameDataset fails unless got has want's samples (names, labels, bytes),
// classes and fingerprint.
func sameDataset(t *testing.T, got, want Dataset) {
	t.Helper()
	if got.Fingerprint() != want.Fingerprint() {
		t.Errorf("fingerprint %s, want %s", got.Fingerprint(), want.Fingerprint())
	}
	if !slices.Equal(got.Classes(), want.Classes()) {
		t.Errorf("classes %v, want %v", got.Classes(), want.Classes())
	}
	if got.Len() != want.Len() {
		t.Fatalf("%d samples, want %d", got.Len(), want.Len())
	}
	for i := range want.Len() {
		a, errA := got.Read(i, nil)
		b, errB := want.Read(i, nil)
		if got.Name(i) != want.Name(i) || got.Label(i) != want.Label(i) || !bytes.Equal(a, b) || (errA == nil) != (errB == nil) {
			t.Errorf("sample %d: %s label %d, %d bytes (%v); want %s label %d, %d bytes (%v)",
				i, got.Name(i), got.Label(i), len(a), errA, want.Name(i), want.Label(i), len(b), errB)
		}
	}
}

func openDirStore(t *testing.T, dir string) source.Store {
	t.Helper()
	st, err := source.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestManifestLikeOpen: a manifest of a local directory (IndexDir), and
// one made by listing the directory as a store and streaming its shards
// (IndexStore, the object-storage path), each make a dataset with Open's
// samples, classes and fingerprint; and so does each after a round trip
// through the file format.
func TestManifestLikeOpen(t *testing.T) {
	ifRoot, _ := imageFolderTree(t)
	for name, dir := range map[string]string{"imagefolder": ifRoot, "webdataset": wdsDir(t)} {
		t.Run(name, func(t *testing.T) {
			want, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			local, err := IndexDir(context.Background(), dir, IndexOptions{})
			if err != nil {
				t.Fatal(err)
			}
			listed, err := IndexStore(context.Background(), openDirStore(t, dir), IndexOptions{Concurrency: 2})
			if err != nil {
				t.Fatal(err)
			}
			for mname, m := range map[string]*Manifest{"IndexDir": local, "IndexStore": listed} {
				if m.Layout != name {
					t.Errorf("%s: layout %s", mname, m.Layout)
				}
				var buf bytes.Buffer
				if err := m.Encode(&buf); err != nil {
					t.Fatal(err)
				}
				back, err := DecodeManifest(bytes.NewReader(buf.Bytes()), 0)
				if err != nil {
					t.Fatalf("%s: decode: %v", mname, err)
				}
				sameManifest(t, back, m)
				for _, mm := range []*Manifest{m, back} {
					ds, err := NewStoreDataset(openDirStore(t, dir), mm, nil)
					if err != nil {
						t.Fatal(err)
					}
					t.Run(mname, func(t *testing.T) { sameDataset(t, ds, want) })
					ds.Close()
				}
			}
			if filepath.IsAbs(local.Root) != true || listed.Root != dir {
				t.Errorf("roots %q (IndexDir), %q (IndexStore)", local.Root, listed.Root)
			}
		})
	}
}

// sameManifest fails unless got and want hold the same things.
func sameManifest(t *testing.T, got, want *Manifest) {
	t.Helper()
	if got.Root != want.Root || got.Layout != want.Layout || !slices.Equal(got.Classes, want.Classes) {
		t.Errorf("root %q layout %q classes %v; want %q %q %v", got.Root, got.Layout, got.Classes, want.Root, want.Layout, want.Classes)
	}
	if got.NumObjects() != want.NumObjects() || got.Len() != want.Len() {
		t.Fatalf("%d objects, %d samples; want %d, %d", got.NumObjects(), got.Len(), want.NumObjects(), want.Len())
	}
	for i := range want.NumObjects() {
		g, w := got.Object(i), want.Object(i)
		if g.Key != w.Key || g.Size != w.Size || g.Version != w.Version || !g.ModTime.Equal(w.ModTime) {
			t.Errorf("object %d: %+v, want %+v", i, g, w)
		}
	}
	for i := range want.Len() {
		if g, w := got.Sample(i), want.Sample(i); !sameSample(g, w) {
			t.Errorf("sample %d: %+v, want %+v", i, g, w)
		}
	}
	if got.Fingerprint() != want.Fingerprint() {
		t.Errorf("fingerprint %s, want %s", got.Fingerprint(), want.Fingerprint())
	}
}

// TestFolderFromKeys: the ImageFolder rules on a store's keys, which no
// local walk has filtered: dot-names anywhere, empty components, files at
// the top; and classes without an image (a "class/" marker, only other
// files, only hidden images), which are refused as a local tree's are.
func TestFolderFromKeys(t *testing.T) {
	objects := func(keys ...string) []source.Object {
		slices.Sort(keys)
		var objs []source.Object
		for i, k := range keys {
			objs = append(objs, source.Object{Key: k, Size: int64(i + 1), Version: "v" + k})
		}
		return objs
	}
	m := &Manifest{Layout: LayoutImageFolder}
	empty := folderFromKeys(m, objects(".stoker/manifest", "README.jpg", "a b/x.jpg", "a/.cache/y.jpg", "a/.z.jpg", "a/sub/b.jpg",
		"a/z.jpg", "a//w.jpg", "a/sub//v.jpg", ".hidden/q.jpg", "b/notes.txt", "b/x.PNG", "a/sub.d/c.jpg"))
	if err := m.check(); err != nil || len(empty) > 0 {
		t.Fatalf("check: %v; empty classes %v", err, empty)
	}
	if want := []string{"a", "a b", "b"}; !slices.Equal(m.Classes, want) {
		t.Errorf("classes %v, want %v", m.Classes, want)
	}
	want := []string{"a/z.jpg", "a/sub/b.jpg", "a/sub.d/c.jpg", "a b/x.jpg", "b/x.PNG"}
	var got []string
	for i := range m.Len() {
		got = append(got, m.name(i))
		if o := m.Object(m.Sample(i).Object); o.Version != "v"+o.Key || m.Sample(i).Size != o.Size {
			t.Errorf("sample %d: object %+v, sample %+v", i, o, m.Sample(i))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("samples %v, want %v", got, want)
	}
	if l := []int64{m.Sample(0).Label, m.Sample(3).Label, m.Sample(4).Label}; !slices.Equal(l, []int64{0, 1, 2}) {
		t.Errorf("labels %v", l)
	}
	empty = folderFromKeys(&Manifest{Layout: LayoutImageFolder}, objects("a/x.jpg", "empty/", "c/notes.txt", "d/.y.jpg", ".e/z.jpg"))
	if !slices.Equal(empty, []string{"c", "d", "empty"}) {
		t.Errorf("classes without an image: %v, want [c d empty]", empty)
	}
}

// TestShardStarts: a WebDataset from a manifest says where each shard
// with samples starts; an ImageFolder is not sharded.
func TestShardStarts(t *testing.T) {
	m, err := IndexDir(context.Background(), wdsDir(t), IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewStoreDataset(openDirStore(t, t.TempDir()), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	sh, ok := ds.(interface{ ShardStarts() []int })
	if !ok {
		t.Fatalf("%T has no ShardStarts", ds)
	}
	if got := sh.ShardStarts(); !slices.Equal(got, []int{0, 3}) {
		t.Errorf("ShardStarts %v, want [0 3]", got)
	}
	root, _ := imageFolderTree(t)
	m, err = IndexDir(context.Background(), root, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ifd, err := NewStoreDataset(openDirStore(t, root), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ifd.Close()
	if _, ok := ifd.(interface{ ShardStarts() []int }); ok {
		t.Errorf("an ImageFolder from a manifest is sharded (%T)", ifd)
	}
}

// TestManifestTimes: a local manifest keeps each file's modification
// time, to the nanosecond, through the file format.
func TestManifestTimes(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{"a/1.jpg": []byte("x")})
	m, err := IndexDir(context.Background(), root, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := openDirStore(t, root)
	defer st.Close()
	o, err := st.Stat(context.Background(), "a/1.jpg")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Object(0); !got.ModTime.Equal(o.ModTime) || got.ModTime.IsZero() || got.Version != "" {
		t.Errorf("object %+v, file %+v", got, o)
	}
}

// recordRanges reads as Direct does and records the Prefetch hints.
type recordRanges struct {
	source.Direct
	hints [][]source.Range
}

func (r *recordRanges) Prefetch(rs []source.Range) { r.hints = append(r.hints, slices.Clone(rs)) }

// TestPrefetch: a dataset's Prefetch(indices) hands its Ranges the
// samples' byte ranges (a member's inside its shard with the tar header
// before it, which a read checks; the indexed object),
// in the order given, leaving out indices out of range and samples over
// the size cap; reads go through the same Ranges.
func TestPrefetch(t *testing.T) {
	dir := wdsDir(t)
	m, err := IndexDir(context.Background(), dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := openDirStore(t, dir)
	rec := &recordRanges{Direct: source.Direct{Store: st}}
	ds, err := NewStoreDataset(st, m, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	p, ok := ds.(interface{ Prefetch([]int64) })
	if !ok {
		t.Fatalf("%T has no Prefetch", ds)
	}
	p.Prefetch([]int64{4, 0, -1, 99, 2})
	// Each sample's image, then its .cls (read to check its label).
	if len(rec.hints) != 1 || len(rec.hints[0]) != 6 {
		t.Fatalf("hints %+v, want one of 6 ranges", rec.hints)
	}
	for j, i := range []int{4, 0, 2} {
		r, c, s := rec.hints[0][2*j], rec.hints[0][2*j+1], m.Sample(i)
		if r.Obj != m.Object(s.Object) || r.Off != s.Off-tarBlock || r.Len != s.Size+tarBlock {
			t.Errorf("hint %d: %+v, want sample %d's %+v in %+v", j, r, i, s, m.Object(s.Object))
		}
		if c.Obj != r.Obj || c.Off != s.ClsOff-tarBlock || c.Len != s.ClsSize+tarBlock || s.ClsSize == 0 {
			t.Errorf("hint %d's .cls: %+v, want sample %d's [%d, +%d)", j, c, i, s.ClsOff, s.ClsSize)
		}
		data, err := ds.Read(i, nil)
		if err != nil || int64(len(data)) != s.Size {
			t.Errorf("Read(%d): %d bytes, %v", i, len(data), err)
		}
	}
	ds.(interface{ SetMaxFileSize(int64) }).SetMaxFileSize(100)
	p.Prefetch([]int64{0, 2}) // 0 is over 100 bytes, 2 is 100
	if len(rec.hints) != 2 || len(rec.hints[1]) != 2 || rec.hints[1][0].Len != 100+tarBlock {
		t.Errorf("with a cap of 100 bytes: hints %+v", rec.hints[1:])
	}
}

// TestPrefetchShards: a job that reads shards whole (the block shuffle)
// hints every sample of the shards its batch touches, shard by shard in
// sample order, and a shard once while the hint holds.
func TestPrefetchShards(t *testing.T) {
	dir := wdsDir(t)
	m, err := IndexDir(context.Background(), dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := openDirStore(t, dir)
	rec := &recordRanges{Direct: source.Direct{Store: st}}
	ds, err := NewStoreDataset(st, m, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	sp, ok := ds.(ShardPrefetcher)
	if !ok {
		t.Fatalf("%T has no PrefetchShards", ds)
	}
	// Shards in name order: shard-a holds samples 0..2, shard-b 3..4.
	hinted := func(want ...int) {
		t.Helper()
		last := rec.hints[len(rec.hints)-1]
		if len(last) != 2*len(want) { // each image, then its .cls
			t.Fatalf("hinted %d ranges %+v, want samples %v", len(last), last, want)
		}
		for j, i := range want {
			s := m.Sample(i)
			if r := last[2*j]; r.Off != s.Off-tarBlock || r.Len != s.Size+tarBlock || r.Obj != m.Object(s.Object) {
				t.Errorf("range %d: %+v, want sample %d", 2*j, r, i)
			}
			if c := last[2*j+1]; c.Off != s.ClsOff-tarBlock || c.Len != s.ClsSize+tarBlock || c.Obj != m.Object(s.Object) {
				t.Errorf("range %d: %+v, want sample %d's .cls", 2*j+1, c, i)
			}
		}
	}
	sp.PrefetchShards([]int64{4})
	hinted(3, 4)
	n := len(rec.hints)
	sp.PrefetchShards([]int64{3, -1, 99})
	if len(rec.hints) != n {
		t.Fatalf("shard-b hinted again: %+v", rec.hints[n:])
	}
	sp.PrefetchShards([]int64{1, 4, 2})
	hinted(0, 1, 2)
}

// TestIndexEmptyClass: a class folder without an image is refused by
// both indexers, as Open refuses it, naming the folder.
func TestIndexEmptyClass(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string][]byte{"a/x.jpg": []byte("x"), "b/notes.txt": []byte("not an image")})
	_, want := Open(dir)
	_, errDir := IndexDir(context.Background(), dir, IndexOptions{})
	_, errStore := IndexStore(context.Background(), openDirStore(t, dir), IndexOptions{})
	for name, err := range map[string]error{"Open": want, "IndexDir": errDir, "IndexStore": errStore} {
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "class folder(s) b (") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// sameSample compares two manifest samples, fields included.
func sameSample(a, b ManifestSample) bool {
	return a.Object == b.Object && a.Off == b.Off && a.Size == b.Size && a.Label == b.Label && a.Member == b.Member &&
		a.NoImage == b.NoImage && slices.Equal(a.Fields, b.Fields)
}
