package dataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/stoker-dev/stoker/pipeline/annot"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// encodeManifest is m in the file format.
func encodeManifest(t testing.TB, m *Manifest) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// smallManifest is a WebDataset manifest of two shards.
func smallManifest() *Manifest {
	m := &Manifest{Root: "s3://bucket/prefix/", Layout: LayoutWebDataset}
	a := m.AddObject(source.Object{Key: "a.tar", Size: 4096, Version: `"etag-a"`})
	b := m.AddObject(source.Object{Key: "b.tar", Size: 2048, ModTime: time.Unix(1700000000, 123)})
	m.AddSample(ManifestSample{Object: a, Off: 512, Size: 100, Label: 1, Member: "x/1.jpg", ClsOff: 1024, ClsSize: 1})
	m.AddSample(ManifestSample{Object: a, Off: 1536, Size: 100, Label: 0, Member: "x/2.jpg", ClsOff: 2560, ClsSize: 2})
	m.AddSample(ManifestSample{Object: b, Off: 512, Size: 1024, Label: 3, Member: "3.png", Hash: bytes.Repeat([]byte{7}, 32), ClsOff: 2047, ClsSize: 1})
	return m
}

// yoloManifestOf is a YOLO manifest of three images: one with a label
// file, one without, one whose label file is over annot.MaxLabelFile.
func yoloManifestOf() *Manifest {
	m := &Manifest{Root: "s3://bucket/images/", Layout: LayoutYOLO, Classes: []string{"cat", "dog"}, AnnotationsSHA256: strings.Repeat("ab", 32)}
	for i, k := range []string{"a.jpg", "b.jpg", "c.jpg"} {
		m.AddSample(ManifestSample{Object: m.AddObject(source.Object{Key: k, Size: int64(10 + i), Version: `"e"`}), Size: int64(10 + i), Label: -1})
	}
	lab := []byte("0 0.5 0.5 0.2 0.4\n")
	m.labels = []yoloLabel{{has: true, obj: source.Object{Size: int64(len(lab)), Version: `"l"`}, data: lab}, {},
		{has: true, obj: source.Object{Size: annot.MaxLabelFile + 1, Version: `"big"`}}}
	return m
}

// reframe is a manifest file of body (uncompressed), with a valid header:
// a file `stoker index` could not have written, whose checksum holds.
func reframe(body []byte, ulen uint64) []byte { return reframeV(manifestVersion, body, ulen) }

// reframeV is reframe with the format version given.
func reframeV(version uint32, body []byte, ulen uint64) []byte {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(body)
	zw.Close()
	hdr := make([]byte, manifestHeader)
	copy(hdr, manifestMagic)
	binary.LittleEndian.PutUint32(hdr[8:], version)
	binary.LittleEndian.PutUint64(hdr[12:], uint64(z.Len()))
	binary.LittleEndian.PutUint64(hdr[20:], ulen)
	sum := sha256.Sum256(z.Bytes())
	copy(hdr[28:], sum[:])
	return append(hdr, z.Bytes()...)
}

func uvarints(vs ...any) []byte {
	var b []byte
	for _, v := range vs {
		switch v := v.(type) {
		case int:
			b = binary.AppendUvarint(b, uint64(v))
		case uint64:
			b = binary.AppendUvarint(b, v)
		case string:
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

func TestManifestRoundTrip(t *testing.T) {
	m := smallManifest()
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeManifest(bytes.NewReader(encodeManifest(t, m)), 0)
	if err != nil {
		t.Fatal(err)
	}
	sameManifest(t, back, m)
	if want := []string{"0", "1", "2", "3"}; fmt.Sprint(back.Classes) != fmt.Sprint(want) {
		t.Errorf("classes %v, want %v", back.Classes, want)
	}
	if back.name(2) != "b.tar/3.png" {
		t.Errorf("name %q", back.name(2))
	}
}

// TestManifestCorrupt: every damaged or hostile file is refused with an
// error wrapping ErrManifest, and none makes Decode allocate by what it
// claims rather than by what it holds.
func TestManifestCorrupt(t *testing.T) {
	good := encodeManifest(t, smallManifest())
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	hdrWith := func(off int, v uint64) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint64(b[off:], v)
		return b
	}
	v1Body := uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 1, 0, 0, 10, 0, "m")
	v2Body := append(bytes.Clone(v1Body), 0) // no hashes
	// Version 3: labels written plus one, and after the hashes (none) the
	// fields section: no extensions, no fields for the one sample.
	v3Body := uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 1, 0, 0, 10, 1, "m", 0, 0, 0)
	// Version 4: then each sample's .cls member (its offset from the
	// sample's, zigzag; its size).
	okBody := uvarints("r", "webdataset", 0, 1, "a.tar", 2048, "", 0, 1, 0, 512, 10, 1, "m", 0, 0, 0, 1, zigzagOf(1024), 1)
	cases := map[string][]byte{
		"empty":              nil,
		"header cut short":   good[:manifestHeader-1],
		"magic":              flip(0),
		"version":            flip(8),
		"checksum":           flip(40),
		"body bit":           flip(len(good) - 10),
		"truncated":          good[:len(good)-1],
		"trailing bytes":     append(bytes.Clone(good), 0),
		"huge body length":   hdrWith(12, 1<<62),
		"body length longer": hdrWith(12, uint64(len(good)-manifestHeader+1)),
		"bomb ratio":         hdrWith(20, 1<<40),
		"uncompressed short": hdrWith(20, 10),
		"not gzip":           append(bytes.Clone(good[:manifestHeader]), bytes.Repeat([]byte{1}, 20)...),
		// Bodies with a valid checksum that lie.
		"valid":               nil, // replaced below: the control
		"count over body":     reframe(uvarints("r", "webdataset", 0, uint64(1)<<40), 0),
		"string over body":    reframe(uvarints("r", "imagefolder", 1, uint64(1)<<20), 0),
		"string over limit":   reframe(uvarints("r", "imagefolder", 1, uint64(1)<<30), 0),
		"sample past object":  reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 1, 0, 5, 6, 1, "m", 0, 0, 0), 0),
		"object out of range": reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 1, 1, 0, 10, 1, "m", 0, 0, 0), 0),
		"label over classes":  reframe(uvarints("r", "imagefolder", 1, "c", 1, "a", 10, "", 0, 1, 0, 0, 10, 2, "", 0, 0, 0), 0),
		"label over limit":    reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 1, 0, 0, 10, maxClasses+1, "m", 0, 0, 0), 0),
		"classes in wds":      reframe(uvarints("r", "webdataset", 1, "c", 1, "a.tar", 10, "", 0, 1, 0, 0, 10, 1, "m", 0, 0, 0), 0),
		"layout":              reframe(uvarints("r", "tarball", 0, 1, "a.tar", 10, "", 0, 1, 0, 0, 10, 1, "m", 0, 0, 0), 0),
		"objects out of order": reframe(uvarints("r", "webdataset", 0, 2, "a.tar", 10, "", 0, "b.tar", 10, "", 0,
			2, 1, 0, 10, 1, "m", 0, 0, 10, 1, "m", 0, 0, 0, 0), 0),
		"no label in a folder": reframe(uvarints("r", "imagefolder", 1, "c", 1, "c/a", 10, "", 0, 1, 0, 0, 10, 0, "", 0, 0, 0), 0),
		"labels of some":       reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 2, 0, 0, 4, 1, "m.jpg", 0, 4, 4, 0, "n.jpg", 0, 0, 0, 0), 0),
		"field past object": reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 1, 0, 0, 4, 0, "m.jpg",
			0, 1, "txt", 2, 0, zigzagOf(4), 7), 0),
		"field of no extension": reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 1, 0, 0, 4, 0, "m.jpg",
			0, 0, 2, 0, zigzagOf(4), 2), 0),
		"extension named twice": reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 10, "", 0, 1, 0, 0, 4, 0, "m.jpg",
			0, 2, "txt", "txt", 0), 0),
		"body left over":  reframe(append(okBody, 7), 0),
		"hashes, too few": reframe(append(append(bytes.Clone(v1Body), 2), make([]byte, 64)...), 0),
		"hashes cut":      reframe(append(append(bytes.Clone(v1Body), 1), make([]byte, 31)...), 0),
	}
	cases["valid"] = reframe(okBody, 0)
	// A labelled WebDataset's manifest of an earlier version gives no
	// .cls members: its labels could not be checked, and it is refused.
	cases["labels unchecked, version 1"] = reframeV(1, v1Body, 0)
	cases["labels unchecked, version 2"] = reframeV(2, v2Body, 0)
	cases["labels unchecked, version 3"] = reframeV(3, v3Body, 0)
	cases["labels unchecked, a hash"] = reframeV(2, append(append(bytes.Clone(v1Body), 1), bytes.Repeat([]byte{9}, 32)...), 0)
	cases["no .cls in version 4"] = reframe(append(bytes.Clone(v3Body), 0), 0)
	cases["cls in the header"] = reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 2048, "", 0, 1, 0, 512, 10, 1, "m", 0, 0, 0, 1, zigzagOf(-500), 1), 0)
	cases["cls too long"] = reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 2048, "", 0, 1, 0, 512, 10, 1, "m", 0, 0, 0, 1, zigzagOf(1024), 33), 0)
	cases["cls of some"] = reframe(uvarints("r", "webdataset", 0, 1, "a.tar", 2048, "", 0, 1, 0, 512, 10, 1, "m", 0, 0, 0, 2, zigzagOf(1024), 1, 0, 1), 0)
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			// A reframe'd body declares its real length.
			if bytes.HasPrefix(b, []byte(manifestMagic)) && len(b) >= manifestHeader && binary.LittleEndian.Uint64(b[20:]) == 0 {
				b = fixUlen(t, b)
			}
			m, err := DecodeManifest(bytes.NewReader(b), 0)
			if strings.HasPrefix(name, "valid") {
				if err != nil {
					t.Fatalf("the control case fails: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrManifest) {
				t.Fatalf("Decode = %v, %v; want an error wrapping ErrManifest", m, err)
			}
			t.Log(err)
		})
	}
}

// fixUlen sets a reframe'd file's uncompressed length to its body's.
func fixUlen(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b[manifestHeader:]))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(zr)
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint64(b[20:], uint64(body.Len()))
	return b
}

// TestManifestSizeLimit: a file over the limit is refused by its header,
// before its body is read.
func TestManifestSizeLimit(t *testing.T) {
	good := encodeManifest(t, smallManifest())
	if _, err := DecodeManifest(bytes.NewReader(good), int64(len(good)-1)); !errors.Is(err, ErrManifest) {
		t.Errorf("a file one byte over the limit: %v", err)
	}
	if _, err := DecodeManifest(bytes.NewReader(good), int64(len(good))); err != nil {
		t.Errorf("a file at the limit: %v", err)
	}
}

// FuzzManifest: no input makes DecodeManifest panic or hang; what it
// accepts encodes to a file that decodes to the same manifest, and makes
// a dataset.
func FuzzManifest(f *testing.F) {
	f.Add(encodeManifest(f, smallManifest()))
	f.Add(reframe(uvarints("r", "imagefolder", 1, "c", 1, "c/a.jpg", 10, "", 0, 1, 0, 0, 10, 1, "", 0, 0, 0), 44))
	f.Add(encodeManifest(f, fieldsManifest()))
	f.Add([]byte(manifestMagic))
	f.Add(encodeManifest(f, yoloManifestOf()))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The checksum would turn away nearly every mutation: fuzz the
		// body's parser too, reframed with a valid checksum (and as a
		// YOLO manifest's version, with its label files).
		for _, in := range [][]byte{b, reframe(b, uint64(len(b))), reframeV(manifestVersionYOLO, b, uint64(len(b)))} {
			m, err := DecodeManifest(bytes.NewReader(in), 1<<20)
			if err != nil {
				if !errors.Is(err, ErrManifest) {
					t.Fatalf("error not wrapping ErrManifest: %v", err)
				}
				continue
			}
			back, err := DecodeManifest(bytes.NewReader(encodeManifest(t, m)), 1<<20)
			if err != nil {
				t.Fatalf("re-encoded: %v", err)
			}
			if back.Fingerprint() != m.Fingerprint() || back.Len() != m.Len() {
				t.Fatalf("round trip changed the manifest")
			}
			if m.Len() > 0 {
				ds, err := NewStoreDataset(nopStore{}, m, nil)
				if err != nil {
					t.Fatalf("a valid manifest makes no dataset: %v", err)
				}
				for i := range ds.Len() {
					ds.Name(i)
					ds.Label(i)
				}
				ds.Close()
			}
		}
	})
}

// nopStore is a store with nothing in it, for datasets never read.
type nopStore struct{ source.Store }

func (nopStore) String() string { return "nop" }
func (nopStore) Close() error   { return nil }
func (nopStore) ReadRange(context.Context, source.Object, int64, []byte) error {
	return source.ErrNotExist
}

func zigzagOf(v int64) uint64 { return zigzag(v) }

// fieldsManifest is an unlabelled WebDataset manifest whose samples have
// fields, one without an image.
func fieldsManifest() *Manifest {
	m := &Manifest{Root: "s3://bucket/clip/", Layout: LayoutWebDataset}
	a := m.AddObject(source.Object{Key: "a.tar", Size: 8192, Version: `"etag-a"`})
	m.AddSample(ManifestSample{Object: a, Off: 512, Size: 1000, Label: -1, Member: "k/1.jpg",
		Fields: []ManifestField{{"txt", 2048, 40}, {"json", 3072, 300}}})
	m.AddSample(ManifestSample{Object: a, Off: 4096, Size: 1000, Label: -1, Member: "k/2.webp",
		Fields: []ManifestField{{"json", 5632, 10}}})
	m.AddSample(ManifestSample{Object: a, Label: -1, Member: "k/3", NoImage: true,
		Fields: []ManifestField{{"txt", 6144, 5}}})
	return m
}

// TestManifestFieldsRoundTrip: an unlabelled manifest with fields, and a
// sample without an image, encodes and decodes to itself; its dataset
// answers the fields from its table.
func TestManifestFieldsRoundTrip(t *testing.T) {
	m := fieldsManifest()
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeManifest(bytes.NewReader(encodeManifest(t, m)), 0)
	if err != nil {
		t.Fatal(err)
	}
	sameManifest(t, back, m)
	if len(back.Classes) != 0 {
		t.Errorf("classes %v of an unlabelled dataset", back.Classes)
	}
	ds, err := NewStoreDataset(nopStore{}, back, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	fd := ds.(Fielded)
	for _, c := range []struct {
		name string
		i    int
		size int64
	}{{"txt", 0, 40}, {"json", 0, 300}, {"json", 1, 10}, {"txt", 1, -1}, {"txt", 2, 5}, {"jpg", 0, 1000}, {"jpg", 1, -1},
		{"webp", 1, 1000}, {FieldKey, 0, 3}, {FieldKey, 2, 3}} {
		id, ok := fd.FieldID(c.name)
		if !ok {
			t.Fatalf("no field %q", c.name)
		}
		if got := fd.FieldSize(c.i, id); got != c.size {
			t.Errorf("sample %d's %s: %d bytes, want %d", c.i, c.name, got, c.size)
		}
	}
	if _, ok := fd.FieldID("cls"); ok {
		t.Errorf("an unlabelled dataset has a cls field")
	}
	if _, err := ds.Read(2, nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("reading a sample without an image: %v", err)
	}
}
