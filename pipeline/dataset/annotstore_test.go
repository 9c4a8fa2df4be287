package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// annotTree writes a small COCO and YOLO dataset under a new directory:
// images/train/{a.jpg, b.jpg, sub/c.png}, annotations/instances.json
// (COCO: image b's box malformed), labels/train/{a.txt, b.txt} (b's class
// out of range; sub/c.png has none) and data.yaml.
func annotTree(t *testing.T) string {
	root := t.TempDir()
	files := map[string]string{
		"images/train/a.jpg":     "aaaa",
		"images/train/b.jpg":     "bbbbbb",
		"images/train/sub/c.png": "cc",
		"labels/train/a.txt":     "1 0.5 0.5 0.2 0.4\n0 0.25 0.5 0.5 0.5\n",
		"labels/train/b.txt":     "7 0.5 0.5 0.2 0.2\n",
		"data.yaml":              "names: [x, y]\n",
		"annotations/instances.json": `{"images": [{"id": 2, "file_name": "b.jpg", "width": 4, "height": 3},
 {"id": 1, "file_name": "a.jpg", "width": 4, "height": 3}, {"id": 3, "file_name": "sub/c.png", "width": 4, "height": 3}],
 "categories": [{"id": 5, "name": "x"}, {"id": 9, "name": "y"}],
 "annotations": [{"id": 1, "image_id": 1, "category_id": 9, "bbox": [0.5, 0, 1.25, 2]},
                 {"id": 2, "image_id": 2, "category_id": 5, "bbox": [0, 0, 1]},
                 {"id": 3, "image_id": 3, "category_id": 5, "bbox": [1, 1, 2, 1], "iscrowd": 1}]}`,
	}
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// sameAnnotated checks that got has want's samples, fingerprint, fields
// (their bytes, or the same error) and targets.
func sameAnnotated(t *testing.T, got, want Dataset) {
	t.Helper()
	sameDataset(t, got, want)
	gf, wf := got.(Fielded), want.(Fielded)
	if !reflect.DeepEqual(gf.FieldNames(), wf.FieldNames()) {
		t.Fatalf("fields %v, want %v", gf.FieldNames(), wf.FieldNames())
	}
	for _, name := range wf.FieldNames() {
		id, ok := wf.FieldID(name)
		if !ok || name == FieldSource {
			continue
		}
		for i := range want.Len() {
			a, errA := gf.ReadField(i, id, nil)
			b, errB := wf.ReadField(i, id, nil)
			if !bytes.Equal(a, b) || (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
				t.Errorf("sample %d field %s: %q (%v), want %q (%v)", i, name, a, errA, b, errB)
			}
		}
	}
	for i := range want.Len() {
		var a, b Instances
		errA := got.(Targeted).SourceTargets(i, 4, 3, &a)
		errB := want.(Targeted).SourceTargets(i, 4, 3, &b)
		if !reflect.DeepEqual(a, b) || (errA == nil) != (errB == nil) || (errA != nil && !errors.Is(errA, ErrCorrupt)) {
			t.Errorf("sample %d targets: %+v (%v), want %+v (%v)", i, a, errA, b, errB)
		}
	}
}

// annotatedInStore: the COCO and YOLO datasets of annotTree put into a
// store under ds/ open from their URLs (images and annotations in the
// bucket, or the annotations local) with the samples, fields, targets
// and fingerprint of the same files opened from the disk; a sample whose
// image is replaced after the open is its error, never the new bytes; an
// annotations file naming an image the prefix lacks is refused, naming
// it.
func annotatedInStore(t *testing.T, putTree func(prefix, dir string), put func(key string, data []byte), url func(prefix string) string) {
	root := annotTree(t)
	putTree("ds/", root)
	ctx := t.Context()
	local := filepath.Join(root, "images", "train")
	wantCOCO, err := OpenCOCO(local, filepath.Join(root, "annotations", "instances.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer wantCOCO.Close()
	wantYOLO, err := OpenYOLO(local, filepath.Join(root, "data.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer wantYOLO.Close()
	for _, c := range []struct {
		name      string
		dir, ann  string
		want      Dataset
		wantError string // of sample 1 (b.jpg)'s annotations field
	}{
		{"coco", url("ds/images/train"), url("ds/annotations/instances.json"), wantCOCO, "instances.json: annotation 2"},
		{"coco-local-annotations", url("ds/images/train"), filepath.Join(root, "annotations", "instances.json"), wantCOCO, "instances.json: annotation 2"},
		{"coco-local-images", local, url("ds/annotations/instances.json"), wantCOCO, "instances.json: annotation 2"},
		{"yolo", url("ds/images/train"), url("ds/data.yaml"), wantYOLO, "labels/train/b.txt: line 1: field class"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := OpenAnnotatedSource(ctx, c.dir, c.ann)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			sameAnnotated(t, got, c.want)
			f := got.(Fielded)
			id, _ := f.FieldID(map[bool]string{true: FieldYOLO, false: FieldCOCO}[strings.HasPrefix(c.name, "yolo")])
			_, err = f.ReadField(1, id, nil)
			var se *annot.SampleError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &se) || !strings.Contains(err.Error(), c.wantError) {
				t.Errorf("b.jpg's malformed annotation: %v, want ErrCorrupt naming %s", err, c.wantError)
			}
		})
	}

	// Indexed (stoker index --annotations): the manifest's fingerprint is
	// the dataset's; opened from it, named or beside the images, the
	// dataset is the same, not listed; with other annotations it is
	// refused.
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for _, c := range []struct{ name, dir, ann string }{
		{"store", url("ds/images/train"), url("ds/annotations/instances.json")},
		{"disk", local, filepath.Join(root, "annotations", "instances.json")},
	} {
		t.Run("manifest-"+c.name, func(t *testing.T) {
			m, err := IndexAnnotated(ctx, c.dir, c.ann)
			if err != nil {
				t.Fatal(err)
			}
			if m.Layout != LayoutCOCO || m.Fingerprint() != wantCOCO.Fingerprint() || m.Len() != 3 {
				t.Fatalf("manifest %s of %d samples, fingerprint %s; want the dataset's %s", m.Layout, m.Len(), m.Fingerprint(), wantCOCO.Fingerprint())
			}
			var buf bytes.Buffer
			if err := m.Encode(&buf); err != nil {
				t.Fatal(err)
			}
			if back, err := DecodeManifest(bytes.NewReader(buf.Bytes()), 0); err != nil || back.AnnotationsSHA256 != m.AnnotationsSHA256 || back.Fingerprint() != m.Fingerprint() {
				t.Fatalf("decoded again: %v", err)
			}
			named := filepath.Join(t.TempDir(), "manifest")
			os.WriteFile(named, buf.Bytes(), 0o644)
			logs.Reset()
			got, err := OpenAnnotatedSource(ctx, c.dir, c.ann, WithManifest(named), WithLog(log))
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			sameAnnotated(t, got, wantCOCO)
			if !strings.Contains(logs.String(), "from their manifest") {
				t.Errorf("the named manifest was not used:\n%s", logs.String())
			}
			// Beside the images.
			if c.name == "store" {
				put("ds/images/train/"+ManifestName, buf.Bytes())
			} else {
				os.MkdirAll(filepath.Join(local, ".stoker"), 0o755)
				os.WriteFile(filepath.Join(local, filepath.FromSlash(ManifestName)), buf.Bytes(), 0o644)
				defer os.RemoveAll(filepath.Join(local, ".stoker"))
			}
			logs.Reset()
			beside, err := OpenAnnotatedSource(ctx, c.dir, c.ann, WithLog(log))
			if err != nil {
				t.Fatal(err)
			}
			defer beside.Close()
			sameAnnotated(t, beside, wantCOCO)
			if !strings.Contains(logs.String(), "from their manifest") {
				t.Errorf("the manifest beside the images was not used:\n%s", logs.String())
			}
			// Other annotations: one byte more.
			doc, _ := os.ReadFile(filepath.Join(root, "annotations", "instances.json"))
			other := filepath.Join(t.TempDir(), "instances.json")
			os.WriteFile(other, append(doc, ' '), 0o644)
			if _, err := OpenAnnotatedSource(ctx, c.dir, other, WithManifest(named)); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "made with other annotations") {
				t.Errorf("a manifest of other annotations: %v", err)
			}
			logs.Reset()
			if d, err := OpenAnnotatedSource(ctx, c.dir, other, WithLog(log)); err != nil || d.Fingerprint() == wantCOCO.Fingerprint() || !strings.Contains(logs.String(), "other annotations") {
				t.Errorf("other annotations, the manifest beside the images of these: %v (it is passed over, and the images listed)\n%s", err, logs.String())
			} else {
				d.Close()
			}
		})
	}
	if _, err := IndexAnnotated(ctx, local, filepath.Join(root, "data.yaml")); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "YOLO dataset on a disk") {
		t.Errorf("a YOLO dataset on a disk indexed: %v", err)
	}
	if _, err := OpenAnnotatedSource(ctx, local, filepath.Join(root, "data.yaml"), WithManifest("/m")); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "YOLO dataset on a disk") {
		t.Errorf("a YOLO dataset on a disk with a manifest: %v", err)
	}

	// An image replaced after the open: its sample fails, the others read.
	d, err := OpenAnnotatedSource(ctx, url("ds/images/train"), url("ds/data.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	put("ds/images/train/a.jpg", []byte("AAAA"))
	if b, err := d.Read(0, nil); !errors.Is(err, ErrCorrupt) || !errors.Is(err, source.ErrChanged) {
		t.Errorf("a.jpg replaced after the open: %q, %v; want ErrCorrupt and source.ErrChanged", b, err)
	}
	if b, err := d.Read(1, nil); err != nil || string(b) != "bbbbbb" {
		t.Errorf("b.jpg: %q, %v", b, err)
	}

	// A changed label file: another fingerprint.
	put("ds/labels/train/a.txt", []byte("0 0.5 0.5 0.2 0.4\n"))
	d2, err := OpenAnnotatedSource(ctx, url("ds/images/train"), url("ds/data.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
	if d2.Fingerprint() == d.Fingerprint() {
		t.Error("the fingerprint does not cover the label files in the store")
	}

	// Annotations naming an image the prefix has not.
	doc, _ := os.ReadFile(filepath.Join(root, "annotations", "instances.json"))
	put("ds/annotations/other.json", bytes.Replace(doc, []byte("sub/c.png"), []byte("sub/z.png"), 1))
	if _, err := OpenAnnotatedSource(ctx, url("ds/images/train"), url("ds/annotations/other.json")); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "sub/z.png") {
		t.Errorf("annotations naming a missing image: %v", err)
	}
	if _, err := OpenAnnotatedSource(ctx, url("ds/images/train"), url("ds/annotations/gone.json")); !errors.Is(err, source.ErrNotExist) || !strings.Contains(err.Error(), "gone.json") {
		t.Errorf("annotations that are not there: %v", err)
	}
	yoloManifest(t, put, url, root, log, &logs)
	convInStore(t, put, url, log, &logs)
}

// yoloManifest: a YOLO dataset in the store at ds/ indexed: its manifest's
// fingerprint is the dataset's; opened from it, named or beside the
// images, the dataset is the one listed (samples, fields, targets, a
// malformed label file's error), its label files not read; a manifest of
// another YAML, or with a label file changed since, is refused.
func yoloManifest(t *testing.T, put func(key string, data []byte), url func(prefix string) string, root string, log *slog.Logger, logs *bytes.Buffer) {
	ctx := t.Context()
	dir, yaml := url("ds/images/train"), url("ds/data.yaml")
	listed, err := OpenAnnotatedSource(ctx, dir, yaml)
	if err != nil {
		t.Fatal(err)
	}
	defer listed.Close()
	m, err := IndexAnnotated(ctx, dir, yaml)
	if err != nil {
		t.Fatal(err)
	}
	if m.Layout != LayoutYOLO || m.Fingerprint() != listed.Fingerprint() || m.Len() != listed.Len() {
		t.Fatalf("manifest %s of %d samples, fingerprint %s; want the dataset's %s of %d", m.Layout, m.Len(), m.Fingerprint(), listed.Fingerprint(), listed.Len())
	}
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeManifest(bytes.NewReader(buf.Bytes()), 0)
	kept := func(ls []yoloLabel) (out []string) { // what a manifest keeps of them
		for _, l := range ls {
			out = append(out, fmt.Sprint(l.has, l.obj.Size, l.obj.Version, l.data))
		}
		return out
	}
	if err != nil || back.Fingerprint() != m.Fingerprint() || !slices.Equal(kept(back.labels), kept(m.labels)) || len(m.labels) != 3 {
		t.Fatalf("decoded again: %v, labels %q, want %q", err, kept(back.labels), kept(m.labels))
	}
	// The label files' bytes are outside input too: cut one short.
	bad := *back
	bad.labels = slices.Clone(back.labels)
	bad.labels[0].data = bad.labels[0].data[:1]
	if err := bad.check(); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "label file of") {
		t.Errorf("a label file shorter than its size: %v", err)
	}
	named := filepath.Join(t.TempDir(), "manifest")
	os.WriteFile(named, buf.Bytes(), 0o644)
	logs.Reset()
	got, err := OpenAnnotatedSource(ctx, dir, yaml, WithManifest(named), WithLog(log))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	sameAnnotated(t, got, listed)
	if !strings.Contains(logs.String(), "opened from their manifest") {
		t.Errorf("the named manifest was not used:\n%s", logs.String())
	}
	put("ds/images/train/"+ManifestName, buf.Bytes())
	logs.Reset()
	beside, err := OpenAnnotatedSource(ctx, dir, yaml, WithLog(log))
	if err != nil {
		t.Fatal(err)
	}
	defer beside.Close()
	sameAnnotated(t, beside, listed)
	if !strings.Contains(logs.String(), "opened from their manifest") {
		t.Errorf("the manifest beside the images was not used:\n%s", logs.String())
	}
	// Another YAML (one byte more): named, refused; beside, passed over.
	doc, _ := os.ReadFile(filepath.Join(root, "data.yaml"))
	other := filepath.Join(t.TempDir(), "data.yaml")
	os.WriteFile(other, append(doc, ' '), 0o644)
	if _, err := OpenAnnotatedSource(ctx, dir, other, WithManifest(named)); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "another dataset YAML") {
		t.Errorf("a manifest of another YAML: %v", err)
	}
	if d, err := OpenAnnotatedSource(ctx, dir, other); err != nil {
		t.Errorf("another YAML, the manifest beside the images of this one: %v (it is passed over, and the images listed)", err)
	} else {
		d.Close()
	}
	// A label file changed since: its bytes in the manifest are not
	// served.
	put("ds/labels/train/a.txt", []byte("1 0.5 0.5 0.25 0.5\n"))
	if _, err := OpenAnnotatedSource(ctx, dir, yaml); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "changed since it was indexed") {
		t.Errorf("a label file changed since the index: %v", err)
	}
}

// TestAnnotatedS3 is annotatedInStore on S3 (versitygw).
func TestAnnotatedS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server (versitygw)")
	}
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "bkt")
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	annotatedInStore(t, func(prefix, dir string) { s.PutTree(t, "bkt", prefix, dir) },
		func(key string, data []byte) { s.Put(t, "bkt", key, data) },
		func(prefix string) string { return s.URL("bkt", prefix) })
}

// TestAnnotatedGCS is annotatedInStore on GCS (fake-gcs-server).
func TestAnnotatedGCS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a GCS emulator (fake-gcs-server)")
	}
	g := storetest.StartGCS(t, t.TempDir())
	g.CreateBucket(t, "bkt")
	for _, kv := range g.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	annotatedInStore(t, func(prefix, dir string) { g.PutTree(t, "bkt", prefix, dir) },
		func(key string, data []byte) { g.Put(t, "bkt", key, data) },
		func(prefix string) string { return g.URL("bkt", prefix) })
}

// TestAnnotatedAzure is annotatedInStore on Azure (Azurite).
func TestAnnotatedAzure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an Azure emulator (Azurite)")
	}
	a := storetest.StartAzure(t, t.TempDir())
	a.CreateContainer(t, "ctr")
	for _, kv := range a.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	annotatedInStore(t, func(prefix, dir string) { a.PutTree(t, "ctr", prefix, dir) },
		func(key string, data []byte) { a.Put(t, "ctr", key, data) },
		func(prefix string) string { return a.URL("ctr", prefix) })
}

// TestMemberTargetsRefused: --annotations NAME=.EXT names a member of
// WebDataset samples; a dataset of another layout, or shards whose
// samples have no such member, are refused saying so.
func TestMemberTargetsRefused(t *testing.T) {
	for ann, want := range map[string]bool{".json": true, ".seg.json": true, ".": false, "x.json": false, "./x.json": false, ".a/b": false} {
		if _, ok := MemberAnnotations(ann); ok != want {
			t.Errorf("MemberAnnotations(%q): %v", ann, ok)
		}
	}
	folder, err := Open(photosDir)
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	if _, err := WithMemberTargets(folder, "json"); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "not one") {
		t.Errorf("an ImageFolder: %v", err)
	}
	shards := t.TempDir()
	storetest.WriteShards(t, photosDir, shards, 7)
	wds, err := Open(shards)
	if err != nil {
		t.Fatal(err)
	}
	defer wds.Close()
	if _, err := WithMemberTargets(wds, "json"); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no sample has one") {
		t.Errorf("shards without key.json: %v", err)
	}
	if d, err := WithMemberTargets(wds, "jpg"); err != nil || d.Fingerprint() == wds.Fingerprint() {
		t.Errorf("shards with the member: %v", err)
	}
}

// hintRanges records the ranges hinted to it, and reads directly.
type hintRanges struct {
	source.Direct
	hinted *[]source.Range
}

func (h hintRanges) Prefetch(rs []source.Range) { *h.hinted = append(*h.hinted, rs...) }

// TestMemberTargetsHinted: shards in a bucket with a key.json member
// each: a job with targets has each sample's member hinted to the
// read-ahead with its image (a job without them, the image alone), and
// reads its instances from it.
func TestMemberTargetsHinted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server (versitygw)")
	}
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "bkt")
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	js := `{"annotations": [{"bbox": [1, 2, 3, 4], "category_id": 7}]}`
	writeShard(t, filepath.Join(dir, "s-0.tar"), []tarMember{{Name: "a.jpg", Data: []byte("jpeg")}, {Name: "a.json", Data: []byte(js)},
		{Name: "b.jpg", Data: []byte("jpeg2")}, {Name: "b.json", Data: []byte(`{"annotations": []}`)}})
	s.PutTree(t, "bkt", "wds/", dir)
	var hinted []source.Range
	ds, err := OpenSource(t.Context(), s.URL("bkt", "wds/"), WithRanges(func(st source.Store) source.Ranges {
		return hintRanges{Direct: source.Direct{Store: st}, hinted: &hinted}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	d, err := WithMemberTargets(ds, "json")
	if err != nil {
		t.Fatal(err)
	}
	with, err := NewFieldSet(d, []string{FieldKey, FieldTargets}, 1<<10, "x")
	if err != nil {
		t.Fatal(err)
	}
	without, err := NewFieldSet(d, []string{FieldKey}, 1<<10, "x")
	if err != nil {
		t.Fatal(err)
	}
	d.(FieldPrefetcher).PrefetchFields([]int64{0}, without)
	if len(hinted) != 1 {
		t.Errorf("a job without targets hinted %d ranges, want the image's alone", len(hinted))
	}
	hinted = nil
	d.(FieldPrefetcher).PrefetchFields([]int64{0}, with)
	if len(hinted) != 2 || hinted[1].Len != int64(len(js))+tarBlock {
		t.Errorf("a job with targets hinted %v, want the image's and its member's (with its tar header)", hinted)
	}
	hinted = nil
	d.(ShardFieldPrefetcher).PrefetchShardFields([]int64{0}, with)
	if len(hinted) != 4 {
		t.Errorf("a shard hinted whole with targets: %d ranges, want 2 images and their members", len(hinted))
	}
	var in Instances
	if err := d.(Targeted).SourceTargets(0, 8, 6, &in); err != nil || len(in.Boxes) != 1 || in.Boxes[0] != [4]float32{1, 2, 4, 6} || in.Labels[0] != 7 || in.ImageID != 0 {
		t.Errorf("sample 0's instances %+v, %v", in, err)
	}
}
