package dataset

import (
	"context"
	"encoding/json"
	"errors"
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
// through OpenAnnotatedSource: a sample a record of one image, its image
// read from the directory, its record the field "json" byte for byte (read
// from the file when asked); records of no image or of several left out
// and counted.
func TestConversations(t *testing.T) {
	recs := []string{
		`{"id": "1", "image": "img/a.jpg", "conversations": [{"from": "human", "value": "<image>\nWhat is it?"}, {"from": "gpt", "value": "A photo."}]}`,
		`{"id": "2", "conversations": [{"from": "human", "value": "Text alone."}]}`,
		`{"messages": [{"role": "user", "content": "<image>Describe."}], "images": ["img/b.jpg"]}`,
		`{"id": 4, "image": ["img/a.jpg", "img/c.jpg"], "conversations": []}`,
		`{"id": "5", "image": ["img/c.jpg"], "conversations": [{"from": "human", "value": "<image>"}]}`,
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
	if d.Len() != 3 || d.TextOnly != 1 || d.MultiImage != 1 {
		t.Fatalf("%d samples, %d text alone, %d of several images; want 3, 1, 1", d.Len(), d.TextOnly, d.MultiImage)
	}
	id, ok := d.FieldID(FieldJSON)
	if !ok {
		t.Fatal("no json field")
	}
	for i, k := range []int{0, 2, 4} {
		want := []string{"img/a.jpg", "img/b.jpg", "img/c.jpg"}[i]
		if d.Name(i) != want || d.Label(i) != -1 {
			t.Errorf("sample %d: %s, label %d; want %s, -1", i, d.Name(i), d.Label(i), want)
		}
		got, err := d.ReadField(i, id, nil)
		if err != nil || string(got) != recs[k] || d.FieldSize(i, id) != int64(len(recs[k])) {
			t.Errorf("sample %d's json: %q, %v; want record %d", i, got, err, k)
		}
		if !json.Valid(got) {
			t.Errorf("sample %d's json is not JSON", i)
		}
		img, err := d.Read(i, nil)
		disk, _ := os.ReadFile(filepath.Join(dir, want))
		if err != nil || string(img) != string(disk) {
			t.Errorf("sample %d's image: %d bytes, %v; want %s's %d", i, len(img), err, want, len(disk))
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
		{`[1, 2]`, "record 0 is 1: want an object"},
		{`[{"image": "img/a.jpg"}]`, "not a COCO annotations file"},
		{`[{"image": "img/a.jpg", "conversations": []}, {"image": "img/b.jpg"}]`, "record 1 (id none) has neither \"conversations\""},
		{`[{"image": 7, "conversations": []}]`, "want a file name or a list"},
		{`[{"conversations": []}]`, "no record with one image"},
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
