package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// convDir is a directory of three committed photos under img/ and a
// conversation file there, holding text.
func convDir(t *testing.T, text string) (dir, ann string) {
	t.Helper()
	dir = t.TempDir()
	photos, err := filepath.Glob("../../testdata/photos/*/*.jpg")
	if err != nil || len(photos) < 3 {
		t.Fatalf("the committed photos are missing: %v %v", photos, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, p := range photos[:3] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "img", string(rune('a'+i))+".jpg"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ann = filepath.Join(t.TempDir(), "sft.json")
	if err := os.WriteFile(ann, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ann
}

// TestConversations: LLaVA's and ShareGPT's records in one file, served
// through OpenAnnotatedSource: a sample an image of a record, read from
// the directory, its record the field "json" byte for byte (read from the
// file when asked); a record of several images is as many samples,
// consecutive (Grouped); records of no image or of more than
// MaxRecordImages left out and counted.
func TestConversations(t *testing.T) {
	many := strings.Repeat(`"img/a.jpg", `, MaxRecordImages) + `"img/b.jpg"`
	recs := []string{
		`{"id": "1", "image": "img/a.jpg", "conversations": [{"from": "human", "value": "<image>\nWhat is it?"}, {"from": "gpt", "value": "A photo."}]}`,
		`{"id": "2", "conversations": [{"from": "human", "value": "Text alone."}]}`,
		`{"messages": [{"role": "user", "content": "<image>Describe."}], "images": ["img/b.jpg"]}`,
		`{"id": 4, "image": ["img/a.jpg", "img/c.jpg"], "conversations": []}`,
		`{"id": "5", "image": ["img/c.jpg"], "conversations": [{"from": "human", "value": "<image>"}]}`,
		`{"id": "6", "images": [` + many + `], "messages": []}`,
	}
	dir, ann := convDir(t, "\n [\n"+strings.Join(recs, ",\n  ")+"\n]\n")
	ds, err := OpenAnnotatedSource(context.Background(), dir, ann)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	d, ok := ds.(*ConvDataset)
	if !ok {
		t.Fatalf("opened a %T", ds)
	}
	if d.Len() != 5 || d.Records() != 4 || d.MostImages() != 2 || d.TextOnly != 1 || d.MultiImage != 1 {
		t.Fatalf("%d samples in %d records (at most %d images), %d text alone, %d of too many images; want 5 in 4 (2), 1, 1",
			d.Len(), d.Records(), d.MostImages(), d.TextOnly, d.MultiImage)
	}
	id, ok := d.FieldID(FieldJSON)
	if !ok {
		t.Fatal("no json field")
	}
	for i, c := range []struct {
		name      string
		rec, line int
	}{{"img/a.jpg", 0, 0}, {"img/b.jpg", 1, 2}, {"img/a.jpg", 2, 3}, {"img/c.jpg", 2, 3}, {"img/c.jpg", 3, 4}} {
		if d.Name(i) != c.name || d.Label(i) != -1 || d.RecordOf(i) != c.rec {
			t.Errorf("sample %d: %s, label %d, record %d; want %s, -1, %d", i, d.Name(i), d.Label(i), d.RecordOf(i), c.name, c.rec)
		}
		got, err := d.ReadField(i, id, nil)
		if err != nil || string(got) != recs[c.line] || d.FieldSize(i, id) != int64(len(recs[c.line])) {
			t.Errorf("sample %d's json: %q, %v; want record %d", i, got, err, c.line)
		}
		if !json.Valid(got) {
			t.Errorf("sample %d's json is not JSON", i)
		}
		img, err := d.Read(i, nil)
		disk, _ := os.ReadFile(filepath.Join(dir, c.name))
		if err != nil || string(img) != string(disk) {
			t.Errorf("sample %d's image: %d bytes, %v; want %s's %d", i, len(img), err, c.name, len(disk))
		}
	}
	for r, want := range [][2]int{{0, 1}, {1, 1}, {2, 2}, {4, 1}} {
		if first, n := d.Record(r); first != want[0] || n != want[1] {
			t.Errorf("record %d: images %d (+%d); want %d (+%d)", r, first, n, want[0], want[1])
		}
	}
	if d.Fingerprint() == "" {
		t.Error("no fingerprint")
	}
}

// TestConversationsRefused: a file the server cannot take as it is is
// refused whole, naming the record and why: an image outside the
// directory, a missing one, a record that is not an object or holds no
// conversation, a file of no record with one image.
func TestConversationsRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`[{"image": "../img/a.jpg", "conversations": []}]`, "not a path under the dataset's directory"},
		{`[{"image": "/etc/passwd", "conversations": []}]`, "not a path under the dataset's directory"},
		{`[{"image": "img/zz.jpg", "conversations": []}]`, "img/zz.jpg"},
		{`[{"images": ["img/a.jpg", "../b.jpg"], "messages": []}]`, "not a path under the dataset's directory"},
		{`[1, 2]`, "record 0 is 1: want an object"},
		{`[{"image": "img/a.jpg"}]`, "not a COCO annotations file"},
		{`[{"image": "img/a.jpg", "conversations": []}, {"image": "img/b.jpg"}]`, "record 1 (id none) has neither \"conversations\""},
		{`[{"image": 7, "conversations": []}]`, "want a file name or a list"},
		{`[{"conversations": []}]`, "no record with an image"},
		{`[{"image": "img/a.jpg", "conversations": []}`, "does not end"},
	} {
		dir, ann := convDir(t, c.text)
		ds, err := OpenAnnotatedSource(context.Background(), dir, ann)
		if err == nil {
			ds.Close()
			t.Errorf("%s: opened", c.text)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.text, err, c.want)
		}
		if !errors.Is(err, ErrUnsupported) && !strings.Contains(c.want, "zz") {
			t.Errorf("%s: %v is not ErrUnsupported", c.text, err)
		}
	}
}

// TestConversationsManifest: `stoker index DIR --annotations FILE
// --sizes` of a conversation file lists each image once with its size,
// the file's SHA-256 in it; opened beside the images (or named), the
// dataset takes its images' sizes from it, its fingerprint unchanged, and
// knows its images' widths and heights; a manifest of another file is
// passed over beside the images and refused when named.
func TestConversationsManifest(t *testing.T) {
	recs := `[{"id": 1, "image": "img/a.jpg", "conversations": [{"from": "human", "value": "<image>"}]},
	          {"id": 2, "images": ["img/b.jpg", "img/a.jpg", "img/c.jpg"], "messages": [{"role": "user", "content": "x"}]}]`
	dir, ann := convDir(t, recs)
	ctx := context.Background()
	plain, err := OpenAnnotatedSource(ctx, dir, ann)
	if err != nil {
		t.Fatal(err)
	}
	fp := plain.Fingerprint()
	plain.Close()
	m, err := IndexAnnotated(ctx, dir, ann, WithIndexOptions(IndexOptions{ImageSize: headerSize}))
	if err != nil {
		t.Fatal(err)
	}
	if m.Layout != LayoutConversations || m.NumObjects() != 3 || m.Len() != 3 || !m.HasImageSizes() {
		t.Fatalf("manifest: layout %s, %d objects, %d samples, sizes %v; want conversations, 3, 3, true", m.Layout, m.NumObjects(), m.Len(), m.HasImageSizes())
	}
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeManifest(bytes.NewReader(buf.Bytes()), 1<<20); err != nil {
		t.Fatalf("the manifest does not read back: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".stoker"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(ManifestName)), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenAnnotatedSource(ctx, dir, ann)
	if err != nil {
		t.Fatal(err)
	}
	d := ds.(*ConvDataset)
	if !d.KnowsImageSizes() || d.Fingerprint() != fp || d.Len() != 4 {
		t.Fatalf("opened with its manifest: sizes %v, fingerprint %s (want %s), %d samples", d.KnowsImageSizes(), d.Fingerprint(), fp, d.Len())
	}
	for i := range d.Len() {
		img, err := d.Read(i, nil)
		if err != nil {
			t.Fatal(err)
		}
		w, h, ok := d.ImageSize(i)
		hw, hh, err := headerSize(img)
		if !ok || err != nil || w != hw || h != hh {
			t.Errorf("sample %d (%s): size %dx%d %v; its header says %dx%d", i, d.Name(i), w, h, ok, hw, hh)
		}
	}
	d.Close()
	// Another file's manifest: passed over beside the images, refused when named.
	other := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(other, []byte(`[{"image": "img/c.jpg", "conversations": []}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err = OpenAnnotatedSource(ctx, dir, other)
	if err != nil || ds.(*ConvDataset).KnowsImageSizes() {
		t.Fatalf("another file beside a manifest: %v (sizes known: want the manifest passed over)", err)
	}
	ds.Close()
	named := filepath.Join(dir, filepath.FromSlash(ManifestName))
	if _, err := OpenAnnotatedSource(ctx, dir, other, WithManifest(named)); err == nil || !strings.Contains(err.Error(), "another conversation file") {
		t.Fatalf("another file with the manifest named: %v; want refused", err)
	}
}

// convInStore: a conversation file (a record of one image, one of two) in
// the store at conv/annotations/, over images in conv/images (or either of
// them on the disk): the samples, records, fields and
// fingerprint of the same files opened from the disk, each record's JSON
// read back from the object; indexed and the manifest put beside the
// images, opened from it (not listed) with its images' sizes; a record
// naming an image the prefix lacks refuses the file, naming it.
func convInStore(t *testing.T, put func(key string, data []byte), url func(prefix string) string, log *slog.Logger, logs *bytes.Buffer) {
	ctx := t.Context()
	conv := []byte(`[{"id": 1, "image": "a.jpg", "conversations": [{"from": "human", "value": "<image>"}]},
 {"images": ["b.jpg", "sub/c.png"], "messages": [{"role": "user", "content": "<image><image>"}]}]`)
	// Its own prefix, conv/: annotatedInStore changed ds/'s a.jpg since.
	local := t.TempDir()
	for name, data := range map[string]string{"a.jpg": "aaaa", "b.jpg": "bbbbbb", "sub/c.png": "cc"} {
		p := filepath.Join(local, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		put("conv/images/"+name, []byte(data))
	}
	put("conv/annotations/sft.json", conv)
	file := filepath.Join(t.TempDir(), "sft.json")
	if err := os.WriteFile(file, conv, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := OpenAnnotatedSource(ctx, local, file)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	same := func(t *testing.T, got Dataset) {
		t.Helper()
		sameDataset(t, got, want)
		g, w := got.(*ConvDataset), want.(*ConvDataset)
		for i := range w.Len() {
			a, errA := g.ReadField(i, fieldIDJSON, nil)
			b, _ := w.ReadField(i, fieldIDJSON, nil)
			if errA != nil || !bytes.Equal(a, b) || g.RecordOf(i) != w.RecordOf(i) {
				t.Errorf("sample %d: record %d, json %q (%v); want %d, %q", i, g.RecordOf(i), a, errA, w.RecordOf(i), b)
			}
		}
	}
	for _, c := range []struct{ name, dir, ann string }{
		{"conv", url("conv/images"), url("conv/annotations/sft.json")},
		{"conv-local-file", url("conv/images"), file},
		{"conv-local-images", local, url("conv/annotations/sft.json")},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := OpenAnnotatedSource(ctx, c.dir, c.ann)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if g := got.(*ConvDataset); g.Records() != 2 || g.Len() != 3 {
				t.Fatalf("%d records of %d images; want 2 of 3", g.Records(), g.Len())
			}
			same(t, got)
		})
	}
	t.Run("conv-manifest", func(t *testing.T) {
		m, err := IndexAnnotated(ctx, url("conv/images"), url("conv/annotations/sft.json"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Layout != LayoutConversations || m.NumObjects() != 3 {
			t.Fatalf("manifest %s of %d objects; want conversations of 3", m.Layout, m.NumObjects())
		}
		var buf bytes.Buffer
		if err := m.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		put("conv/images/"+ManifestName, buf.Bytes())
		logs.Reset()
		got, err := OpenAnnotatedSource(ctx, url("conv/images"), url("conv/annotations/sft.json"), WithLog(log))
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		if !strings.Contains(logs.String(), "conversation images opened from their manifest") || strings.Contains(logs.String(), "conversation images listed") {
			t.Errorf("the manifest beside the images was not used:\n%s", logs.String())
		}
		same(t, got)
	})
	bad := bytes.Replace(conv, []byte("sub/c.png"), []byte("sub/z.png"), 1)
	put("conv/annotations/other.json", bad)
	if _, err := OpenAnnotatedSource(ctx, url("conv/images"), url("conv/annotations/other.json")); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "sub/z.png") {
		t.Errorf("a record naming a missing image: %v", err)
	}
}
