package dataset

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
)

// headerSize is the tests' IndexOptions.ImageSize: the standard
// library's header parse (the server's is the codec's, pipeline.ImageSize).
func headerSize(head []byte) (int, int, error) {
	c, _, err := image.DecodeConfig(bytes.NewReader(head))
	return c.Width, c.Height, err
}

// TestIndexSizes: `stoker index --sizes` records each sample's image
// size from its header, in an ImageFolder (the committed photos among
// drawn images, a PNG and a file that is no image) and in WebDataset
// shards; a sample whose header does not parse is of unknown size. The
// manifest keeps its sizes through its file (version 7), its dataset
// fingerprint stays the one Open computes, and SizesFingerprint follows
// the sizes.
func TestIndexSizes(t *testing.T) {
	ctx := context.Background()
	photo, err := os.ReadFile(filepath.Join("..", "..", "testdata", "photos", "autumn", "000000.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	pw, ph, err := headerSize(photo)
	if err != nil {
		t.Fatal(err)
	}
	// A JPEG whose frame header is past the first read: an APP15 segment
	// of padding after its SOI, a few times over.
	var padded bytes.Buffer
	padded.Write(photo[:2])
	for range 6 {
		padded.Write([]byte{0xFF, 0xEF, 0xFF, 0xFF})
		padded.Write(make([]byte, 0xFFFD))
	}
	padded.Write(photo[2:])
	dir := t.TempDir()
	writeTree(t, dir, map[string][]byte{
		"a/photo.jpg":  photo,
		"a/padded.jpg": padded.Bytes(),
		"a/drawn.png":  encodePNG(testPicture(37, 21)),
		"b/bad.jpg":    []byte("not an image"),
		"b/drawn.jpg":  encodeJPEG(testPicture(64, 48), 90),
	})
	want := map[string][2]int{"a/photo.jpg": {pw, ph}, "a/padded.jpg": {pw, ph}, "a/drawn.png": {37, 21}, "b/bad.jpg": {0, 0}, "b/drawn.jpg": {64, 48}}
	plain, err := IndexDir(ctx, dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.HasImageSizes() {
		t.Fatal("an index without ImageSize records sizes")
	}
	m, err := IndexDir(ctx, dir, IndexOptions{ImageSize: headerSize, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Len() {
		name := m.Object(m.Sample(i).Object).Key
		w, h, ok := m.ImageSize(i)
		if [2]int{w, h} != want[name] || ok != (w > 0) {
			t.Errorf("%s: %dx%d (%v), want %v", name, w, h, ok, want[name])
		}
	}
	if m.Fingerprint() != plain.Fingerprint() {
		t.Errorf("the sizes changed the dataset's fingerprint")
	}
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(buf.Bytes()[8:]); v != manifestVersionSizes {
		t.Errorf("a manifest with sizes is of version %d", v)
	}
	back, err := DecodeManifest(bytes.NewReader(buf.Bytes()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if back.SizesFingerprint() != m.SizesFingerprint() || m.SizesFingerprint() == "" || back.Fingerprint() != m.Fingerprint() {
		t.Errorf("sizes %s back as %s", m.SizesFingerprint(), back.SizesFingerprint())
	}
	m.SetImageSize(0, 1, 1)
	if m.SizesFingerprint() == back.SizesFingerprint() {
		t.Errorf("SizesFingerprint does not follow the sizes")
	}

	shards := t.TempDir()
	writeShard(t, filepath.Join(shards, "s-0.tar"), []tarMember{
		{Name: "k1.jpg", Data: encodeJPEG(testPicture(80, 60), 90)}, {Name: "k1.cls", Data: []byte("0")},
		{Name: "k2.png", Data: encodePNG(testPicture(5, 9))}, {Name: "k2.cls", Data: []byte("1")},
	})
	wm, err := IndexDir(ctx, shards, IndexOptions{ImageSize: headerSize})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range [][2]int{{80, 60}, {5, 9}} {
		if gw, gh, _ := wm.ImageSize(i); [2]int{gw, gh} != w {
			t.Errorf("shard sample %d: %dx%d, want %v", i, gw, gh, w)
		}
	}
}

// TestManifestSizesRefused: a manifest's sizes are outside input: one a
// sample, both sides or neither; a file that says otherwise is refused.
func TestManifestSizesRefused(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string][]byte{"a/x.jpg": encodeJPEG(testPicture(8, 8), 90), "a/y.jpg": encodeJPEG(testPicture(8, 4), 90)})
	m, err := IndexDir(context.Background(), dir, IndexOptions{ImageSize: headerSize})
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]uint32{"one side": {8, 0, 8, 4}, "a size short": {8, 8}} {
		m.sizes = bad
		var buf bytes.Buffer
		if err := m.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeManifest(bytes.NewReader(buf.Bytes()), 0); !errors.Is(err, ErrManifest) {
			t.Errorf("%s: %v", name, err)
		}
	}
	m.sizes = nil
	m.SetImageSize(1, 8, 0)
	if err := m.check(); !errors.Is(err, ErrManifest) {
		t.Errorf("SetImageSize(1, 8, 0): %v", err)
	}
}

// annotSizedTree is annotTree with real images (b.jpg of another size
// than its annotations say: the sizes are the headers'), and what their
// headers say, by name.
func annotSizedTree(t *testing.T) (string, map[string][2]int) {
	root := annotTree(t)
	imgs := filepath.Join(root, "images", "train")
	writeTree(t, imgs, map[string][]byte{
		"a.jpg": encodeJPEG(testPicture(4, 3), 90), "b.jpg": encodeJPEG(testPicture(6, 5), 90), "sub/c.png": encodePNG(testPicture(4, 3)),
	})
	return root, map[string][2]int{"a.jpg": {4, 3}, "b.jpg": {6, 5}, "sub/c.png": {4, 3}}
}

// checkSized checks m's sizes against want, by object key, and that its
// file keeps them with the rest.
func checkSized(t *testing.T, m *Manifest, want map[string][2]int) *Manifest {
	t.Helper()
	for i := range m.Len() {
		key := m.Object(m.Sample(i).Object).Key
		if w, h, _ := m.ImageSize(i); [2]int{w, h} != want[key] {
			t.Errorf("%s: %dx%d, want %v", key, w, h, want[key])
		}
	}
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeManifest(bytes.NewReader(buf.Bytes()), 0)
	if err != nil || back.AnnotationsSHA256 != m.AnnotationsSHA256 || back.Fingerprint() != m.Fingerprint() || back.SizesFingerprint() != m.SizesFingerprint() {
		t.Fatalf("decoded again: %v", err)
	}
	return back
}

// TestIndexAnnotatedSizes: `stoker index --annotations FILE --sizes` of a
// COCO dataset records its images' sizes from their headers; the manifest
// (version 7) keeps its annotations' hash, and the dataset opened from it
// is the one opened from the files.
func TestIndexAnnotatedSizes(t *testing.T) {
	root, want := annotSizedTree(t)
	local, ann := filepath.Join(root, "images", "train"), filepath.Join(root, "annotations", "instances.json")
	m, err := IndexAnnotated(t.Context(), local, ann, WithIndexOptions(IndexOptions{ImageSize: headerSize}))
	if err != nil {
		t.Fatal(err)
	}
	back := checkSized(t, m, want)
	wantCOCO, err := OpenCOCO(local, ann)
	if err != nil {
		t.Fatal(err)
	}
	defer wantCOCO.Close()
	var buf bytes.Buffer
	back.Encode(&buf)
	named := filepath.Join(t.TempDir(), "manifest")
	os.WriteFile(named, buf.Bytes(), 0o644)
	got, err := OpenAnnotatedSource(t.Context(), local, ann, WithManifest(named))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	sameAnnotated(t, got, wantCOCO)
}

// TestIndexAnnotatedSizesS3: a YOLO dataset in a bucket (a real S3
// server) indexed with its sizes, read from the bucket.
func TestIndexAnnotatedSizesS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server (versitygw)")
	}
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "bkt")
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	root, want := annotSizedTree(t)
	s.PutTree(t, "bkt", "ds/", root)
	m, err := IndexAnnotated(t.Context(), s.URL("bkt", "ds/images/train"), s.URL("bkt", "ds/data.yaml"), WithIndexOptions(IndexOptions{ImageSize: headerSize}))
	if err != nil {
		t.Fatal(err)
	}
	if m.Layout != LayoutYOLO {
		t.Fatalf("layout %s", m.Layout)
	}
	checkSized(t, m, want)
}
