package dataset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// recordPhotos are n of the committed test photos' bytes, each its own.
func recordPhotos(t *testing.T, n int) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(photosDir, "*", "*.jpg"))
	if err != nil || len(files) < 2 {
		t.Fatalf("the committed photos are missing: %v", err)
	}
	var out [][]byte
	for i := range n {
		b, err := os.ReadFile(files[i%len(files)])
		if err != nil {
			t.Fatal(err)
		}
		// A byte after the JPEG's end: each image its own bytes.
		out = append(out, append(b, byte(i)))
	}
	return out
}

// recordShards writes two shards of records of several images into a new
// directory: "a" of r0 (2 images), r1 (12, written out of order: 10 and
// 11 after 9, not after 1), p (one plain image); "b" of r2 (one numbered
// image) and r3 (2, written last first). Each record has a json, r1 a
// txt; with labels, a cls. It returns the directory and each record's
// images' bytes, names and json, in order.
func recordShards(t *testing.T, labels bool) (dir string, recs []wantRecord) {
	t.Helper()
	ph := recordPhotos(t, 18)
	next := 0
	take := func() []byte { next++; return ph[next-1] }
	dir = t.TempDir()
	var a, b []tarMember
	// add writes record key's images in the tar order order (nil: one
	// plain image), then its other members.
	add := func(members *[]tarMember, shard, key string, order []int, ext string, label int) {
		r := wantRecord{key: key, json: fmt.Sprintf(`{"id": %q, "conversations": []}`, key), label: -1}
		if order == nil {
			r.images = [][]byte{take()}
			r.names = []string{shard + "/" + key + "." + ext}
			*members = append(*members, tarMember{Name: key + "." + ext, Data: r.images[0]})
		} else {
			r.images = make([][]byte, len(order))
			for k := range order {
				r.images[k] = take()
				r.names = append(r.names, fmt.Sprintf("%s/%s.%d.%s", shard, key, k, ext))
			}
			for _, k := range order {
				*members = append(*members, tarMember{Name: fmt.Sprintf("%s.%d.%s", key, k, ext), Data: r.images[k]})
			}
		}
		*members = append(*members, tarMember{Name: key + ".json", Data: []byte(r.json)})
		if key == "r1" {
			*members = append(*members, tarMember{Name: key + ".txt", Data: []byte("twelve")})
		}
		if labels {
			r.label = int64(label)
			*members = append(*members, tarMember{Name: key + ".cls", Data: []byte(fmt.Sprint(label))})
		}
		recs = append(recs, r)
	}
	add(&a, "a.tar", "r0", []int{0, 1}, "jpg", 3)
	add(&a, "a.tar", "r1", []int{0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9}, "jpg", 0)
	add(&a, "a.tar", "p", nil, "jpg", 1)
	add(&b, "b.tar", "r2", []int{0}, "png", 2)
	add(&b, "b.tar", "r3", []int{1, 0}, "JPG", 1)
	writeShard(t, filepath.Join(dir, "a.tar"), a)
	writeShard(t, filepath.Join(dir, "b.tar"), b)
	return dir, recs
}

type wantRecord struct {
	key, json string
	label     int64
	names     []string
	images    [][]byte
}

// checkRecords holds ds (a WebDataset's, local or in a store) to recs:
// its records and their order, each image's name, bytes, label and
// fields (the record's json and key; r1's txt, the others none).
func checkRecords(t *testing.T, ds Dataset, recs []wantRecord) {
	t.Helper()
	g, ok := ds.(Grouped)
	if !ok {
		t.Fatalf("%T is not Grouped", ds)
	}
	if g.Records() != len(recs) || g.MostImages() != 12 || ds.Len() != 18 {
		t.Fatalf("%d records of up to %d images, %d samples; want %d records of up to 12, 18 samples", g.Records(), g.MostImages(), ds.Len(), len(recs))
	}
	fd := ds.(Fielded)
	ids := map[string]int{}
	for _, f := range []string{"json", "txt", FieldKey} {
		id, ok := fd.FieldID(f)
		if !ok {
			t.Fatalf("no field %q; the dataset's are %v", f, fd.FieldNames())
		}
		ids[f] = id
	}
	i := 0
	for r, w := range recs {
		first, n := g.Record(r)
		if first != i || n != len(w.names) {
			t.Fatalf("record %d (%s): images [%d, +%d); want [%d, +%d)", r, w.key, first, n, i, len(w.names))
		}
		for k := range n {
			if g.RecordOf(i) != r || ds.Name(i) != w.names[k] || ds.Label(i) != w.label {
				t.Errorf("sample %d: record %d, %s, label %d; want record %d, %s, label %d", i, g.RecordOf(i), ds.Name(i), ds.Label(i), r, w.names[k], w.label)
			}
			data, err := ds.Read(i, nil)
			if err != nil || !bytes.Equal(data, w.images[k]) {
				t.Errorf("sample %d (%s): %d bytes, %v; want image %d of record %s, %d bytes", i, ds.Name(i), len(data), err, k, w.key, len(w.images[k]))
			}
			for f, want := range map[string]string{"json": w.json, FieldKey: w.key, "txt": map[bool]string{true: "twelve"}[w.key == "r1"]} {
				got, err := fd.ReadField(i, ids[f], nil)
				if size := fd.FieldSize(i, ids[f]); want == "" {
					if size >= 0 {
						t.Errorf("sample %d (%s) has a field %q of %d bytes; want none", i, ds.Name(i), f, size)
					}
				} else if err != nil || string(got) != want || size != int64(len(want)) {
					t.Errorf("sample %d (%s): field %q %q (%d bytes), %v; want the record's %q", i, ds.Name(i), f, got, size, err, want)
				}
			}
			i++
		}
	}
}

// TestWebDatasetRecords: a sample of numbered images (KEY.0.jpg,
// KEY.1.jpg, ...) is a record of them, in numeric order whatever the
// tar's, each image a sample with the record's fields and label, named
// shard/member; a plain image and a single numbered one are records of
// one; the dataset is Grouped, unlabelled or labelled, and a record's
// member is not taken for one image's targets. A dataset of one
// image a sample is not grouped, its samples, names and fingerprint as
// they always were.
func TestWebDatasetRecords(t *testing.T) {
	for _, labels := range []bool{false, true} {
		dir, recs := recordShards(t, labels)
		d, err := OpenWebDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, d, recs)
		if _, err := WithMemberTargets(d, "json"); !errors.Is(err, ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "targets of records of several images are not served") {
			t.Errorf("targets of the records' json: %v; want refused", err)
		}
		if want := []string{"0", "1", "2", "3"}; labels && !slices.Equal(d.Classes(), want) {
			t.Errorf("classes %v; want %v", d.Classes(), want)
		}
		if want := []int{0, 15}; !slices.Equal(d.ShardStarts(), want) {
			t.Errorf("shard starts %v; want %v", d.ShardStarts(), want)
		}
		d.Close()
	}

	// One image a sample: no records of several, as ever.
	jpg := encodeJPEG(testPicture(24, 16), 90)
	dir := t.TempDir()
	writeShard(t, filepath.Join(dir, "s.tar"), []tarMember{
		{Name: "a.jpg", Data: jpg}, {Name: "a.json", Data: []byte("{}")},
		{Name: "b.png", Data: encodePNG(testPicture(8, 8))}, {Name: "b.0.json", Data: []byte("{}")},
		{Name: "c.0.jpg", Data: jpg}, // a record of one numbered image
	})
	d, err := OpenWebDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := newIndexHash("webdataset", nil)
	for _, s := range []struct {
		name string
		size int
	}{{"s.tar/a.jpg", len(jpg)}, {"s.tar/b.png", len(encodePNG(testPicture(8, 8)))}, {"s.tar/c.0.jpg", len(jpg)}} {
		h.add(s.name, int64(s.size), -1)
	}
	if d.Records() != d.Len() || d.MostImages() != 1 || d.Len() != 3 || d.Name(2) != "s.tar/c.0.jpg" || d.Fingerprint() != h.sum() {
		t.Errorf("one image a sample: %d records of %d samples, most %d, sample 2 %s, fingerprint %s; want 3 of 3, 1, s.tar/c.0.jpg, %s",
			d.Records(), d.Len(), d.MostImages(), d.Name(2), d.Fingerprint(), h.sum())
	}
	if id, ok := d.FieldID("0.json"); !ok || d.FieldSize(1, id) != 2 {
		t.Errorf("b.0.json is not b's field \"0.json\" (ok %v)", ok)
	}
}

// TestWebDatasetRecordsRefused: a sample with both a plain image and
// numbered ones, more than MaxRecordImages, a gap in its numbers, or a
// number given twice refuses the dataset at open, naming the shard, the
// key and why.
func TestWebDatasetRecordsRefused(t *testing.T) {
	jpg := encodeJPEG(testPicture(8, 8), 90)
	many := func(n int) []tarMember {
		var ms []tarMember
		for k := range n {
			ms = append(ms, tarMember{Name: fmt.Sprintf("big.%d.jpg", k), Data: jpg})
		}
		return ms
	}
	for _, c := range []struct {
		name    string
		members []tarMember
		want    string
	}{
		{"plain and numbered", []tarMember{{Name: "k.jpg", Data: jpg}, {Name: "k.0.jpg", Data: jpg}, {Name: "k.1.jpg", Data: jpg}},
			"shard s.tar: sample k has both an image k.jpg and numbered images (k.0.jpg, ...)"},
		{"too many", many(MaxRecordImages + 1), fmt.Sprintf("shard s.tar: sample big has %d numbered images: the limit is %d", MaxRecordImages+1, MaxRecordImages)},
		{"gap", []tarMember{{Name: "g.0.jpg", Data: jpg}, {Name: "g.2.jpg", Data: jpg}},
			"shard s.tar: sample g has no image numbered 1 (its images are numbered 0, 2)"},
		{"no image 0", []tarMember{{Name: "g.1.jpg", Data: jpg}, {Name: "g.2.jpg", Data: jpg}},
			"shard s.tar: sample g has no image numbered 0 (its images are numbered 1, 2)"},
		{"twice", []tarMember{{Name: "d.0.jpg", Data: jpg}, {Name: "d.1.jpg", Data: jpg}, {Name: "d.1.png", Data: jpg}},
			"shard s.tar: sample d has two images numbered 1 (d.1.jpg and d.1.png)"},
	} {
		dir := t.TempDir()
		ms := append([]tarMember{{Name: "ok.jpg", Data: jpg}}, c.members...)
		writeShard(t, filepath.Join(dir, "s.tar"), ms)
		d, err := OpenWebDataset(dir)
		if err == nil {
			d.Close()
		}
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s: %v; want ErrUnsupported saying %q", c.name, err, c.want)
		}
		if _, err := IndexDir(t.Context(), dir, IndexOptions{}); !errors.Is(err, ErrUnsupported) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s: stoker index: %v; want ErrUnsupported saying %q", c.name, err, c.want)
		}
	}
}

// TestWebDatasetRecordsManifest: records of several images opened from a
// manifest of their local shards (stoker index), and from the shards in a
// real S3 server (versitygw), listed and scanned and from a manifest
// beside them: the same records, names, bytes, fields and fingerprint as
// the shards opened locally. Such a manifest is of version 8, which an
// older stoker refuses; one in which an older stoker took the images for
// fields of a key without an image, or whose images are out of their
// places, is refused saying so.
func TestWebDatasetRecordsManifest(t *testing.T) {
	ctx := t.Context()
	dir, recs := recordShards(t, true)
	local, err := OpenWebDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	m := writeManifest(t, dir, "")
	if b := encodeManifest(t, m); binary.LittleEndian.Uint32(b[8:]) != manifestVersionRecords {
		t.Errorf("a manifest of records of several images is of version %d; want %d", binary.LittleEndian.Uint32(b[8:]), manifestVersionRecords)
	}
	fromM, err := openSource(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fromM.(*ShardedStoreDataset); !ok || fromM.Fingerprint() != local.Fingerprint() {
		t.Errorf("from the manifest: %T, fingerprint %s; want a *ShardedStoreDataset of %s", fromM, fromM.Fingerprint(), local.Fingerprint())
	}
	checkRecords(t, fromM, recs)

	// Outside input: an older stoker's manifest, images out of place.
	old := &Manifest{Root: dir, Layout: LayoutWebDataset}
	sh := old.AddObject(source.Object{Key: "a.tar", Size: 1 << 20})
	old.AddSample(ManifestSample{Object: sh, Label: -1, Member: "r0", NoImage: true, Fields: []ManifestField{{Ext: "0.jpg", Off: 512, Size: 10}, {Ext: "json", Off: 1024, Size: 2}}})
	if err := old.check(); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "numbered images (r0.0.jpg) as fields") {
		t.Errorf("an older stoker's manifest of a record: %v", err)
	}
	moved := &Manifest{Root: dir, Layout: LayoutWebDataset}
	sh = moved.AddObject(source.Object{Key: "a.tar", Size: 1 << 20})
	for _, mem := range []string{"r0.0.jpg", "p.jpg", "r0.1.jpg"} {
		moved.AddSample(ManifestSample{Object: sh, Off: 512, Size: 10, Label: -1, Member: mem})
	}
	if err := moved.check(); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "r0.1.jpg, is image 1 of a record whose image 0 is not the sample before it") {
		t.Errorf("a record's image out of its place: %v", err)
	}

	if testing.Short() {
		t.Skip("starts an S3 server (versitygw)")
	}
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "bkt")
	if err := os.RemoveAll(filepath.Join(dir, ".stoker")); err != nil {
		t.Fatal(err)
	}
	s.PutTree(t, "bkt", "vlm/", dir)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	url := s.URL("bkt", "vlm/")
	listed, err := openSource(t, url)
	if err != nil {
		t.Fatal(err)
	}
	if listed.Fingerprint() != local.Fingerprint() {
		t.Errorf("listed from the bucket: fingerprint %s; want %s", listed.Fingerprint(), local.Fingerprint())
	}
	checkRecords(t, listed, recs)
	st, err := source.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(ctx, ManifestName, encodeManifest(t, storeDatasetOf(listed).Manifest())); err != nil {
		t.Fatal(err)
	}
	beside, err := openSource(t, url)
	if err != nil {
		t.Fatal(err)
	}
	if beside.Fingerprint() != local.Fingerprint() {
		t.Errorf("from the manifest in the bucket: fingerprint %s; want %s", beside.Fingerprint(), local.Fingerprint())
	}
	checkRecords(t, beside, recs)
}
