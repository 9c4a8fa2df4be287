package dataset

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWebDataset(t *testing.T) {
	jpg := encodeJPEG(testPicture(24, 16), 90)
	pngData := encodePNG(testPicture(16, 24))
	long := strings.Repeat("deep/", 30) + "k" // past tar's 100-byte name field
	dir := t.TempDir()
	// Written b first: shards are taken in name order, not creation order.
	writeShard(t, filepath.Join(dir, "shard-b.tar"), []tarMember{
		{Name: "x/100.jpeg", Data: append([]byte{}, jpg[:len(jpg)-1]...)},
		{Name: "x/100.cls", Data: []byte("2")},
		{Name: long + ".png", Data: pngData},
		{Name: long + ".cls", Data: []byte("1")},
	}, tar.FormatGNU) // GNU long-name headers
	writeShard(t, filepath.Join(dir, "shard-a.tar"), []tarMember{
		{Name: "000.jpg", Data: jpg},
		{Name: "000.cls", Data: []byte("3")},
		{Name: "001.cls", Data: []byte(" 1\n")}, // label first, whitespace around it
		{Name: "001.png", Data: pngData},
		{Name: "dir", Data: nil},
		{Name: "dir/sub.v2/002.jpg", Data: jpg[:100]},
		{Name: "dir/sub.v2/002.cls", Data: []byte("0")},
		{Name: "003.json", Data: []byte("{}")}, // no image: not a sample
		{Name: "004.seg.png", Data: pngData},   // key "004", extension "seg.png": not an image
		{Name: "004.cls", Data: []byte("0")},
		{Name: long + ".jpg", Data: jpg}, // PAX long name
		{Name: long + ".cls", Data: []byte("0")},
	})
	writeTree(t, dir, map[string][]byte{"README.txt": []byte("not a shard")})
	d, err := OpenWebDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := []struct {
		name  string
		label int64
		data  []byte
	}{
		{"shard-a.tar/000.jpg", 3, jpg},
		{"shard-a.tar/001.png", 1, pngData},
		{"shard-a.tar/dir/sub.v2/002.jpg", 0, jpg[:100]},
		{"shard-a.tar/" + long + ".jpg", 0, jpg},
		{"shard-b.tar/x/100.jpeg", 2, jpg[:len(jpg)-1]},
		{"shard-b.tar/" + long + ".png", 1, pngData},
	}
	if d.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", d.Len(), len(want))
	}
	for i, w := range want {
		data, err := d.Read(i, nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		if d.Name(i) != w.name || d.Label(i) != w.label || !bytes.Equal(data, w.data) {
			t.Errorf("sample %d: %s label %d, %d bytes; want %s label %d, %d bytes (equal: %v)",
				i, d.Name(i), d.Label(i), len(data), w.name, w.label, len(w.data), bytes.Equal(data, w.data))
		}
	}
	if want := []string{"0", "1", "2", "3"}; !slices.Equal(d.Classes(), want) {
		t.Errorf("classes %v, want %v", d.Classes(), want)
	}
	if _, err := d.Read(len(want), nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Read past the end: %v", err)
	}
	// One shard alone.
	one, err := OpenWebDataset(filepath.Join(dir, "shard-b.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if one.Len() != 2 || one.Name(0) != "shard-b.tar/x/100.jpeg" {
		t.Errorf("single shard: %d samples, first %s", one.Len(), one.Name(0))
	}
}

func TestWebDatasetFingerprint(t *testing.T) {
	fp := func(members []tarMember) string {
		t.Helper()
		dir := t.TempDir()
		writeShard(t, filepath.Join(dir, "s.tar"), members)
		d, err := OpenWebDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		return d.Fingerprint()
	}
	base := []tarMember{{Name: "a.jpg", Data: []byte("abc")}, {Name: "a.cls", Data: []byte("1")}}
	fp0 := fp(base)
	if again := fp(base); again != fp0 {
		t.Errorf("same shard, different fingerprints %s %s", fp0, again)
	}
	for name, m := range map[string][]tarMember{
		"label":  {{Name: "a.jpg", Data: []byte("abc")}, {Name: "a.cls", Data: []byte("2")}},
		"size":   {{Name: "a.jpg", Data: []byte("abcd")}, {Name: "a.cls", Data: []byte("1")}},
		"name":   {{Name: "b.jpg", Data: []byte("abc")}, {Name: "b.cls", Data: []byte("1")}},
		"sample": {{Name: "a.jpg", Data: []byte("abc")}, {Name: "a.cls", Data: []byte("1")}, {Name: "b.jpg", Data: []byte("abc")}, {Name: "b.cls", Data: []byte("1")}},
	} {
		if got := fp(m); got == fp0 {
			t.Errorf("fingerprint unchanged after the %s changed", name)
		}
	}
}

func TestWebDatasetRejects(t *testing.T) {
	good := []tarMember{{Name: "a.jpg", Data: []byte("x")}, {Name: "a.cls", Data: []byte("0")}}
	var truncated bytes.Buffer
	{
		tw := tar.NewWriter(&truncated)
		tw.WriteHeader(&tar.Header{Name: "a.jpg", Mode: 0o644, Size: 1000, Typeflag: tar.TypeReg})
		tw.Write(make([]byte, 1000))
		tw.Close()
	}
	for _, tc := range []struct {
		name    string
		members []tarMember
		raw     []byte // instead of members
		want    error
		msg     string
	}{
		{"no cls", []tarMember{{Name: "a.jpg", Data: []byte("x")}, {Name: "b.jpg", Data: []byte("y")}, {Name: "b.cls", Data: []byte("0")}}, nil, ErrUnsupported,
			"shard s.tar: sample a has an image (a.jpg) but no label: a WebDataset sample's label is a member a.cls beside it"},
		{"cls not a number", append(good, tarMember{Name: "b.png", Data: []byte("y")}, tarMember{Name: "b.cls", Data: []byte("dog")}), nil, ErrUnsupported,
			`b.cls: label "dog" is not a non-negative integer (a .cls member holds its sample's class index as decimal text`},
		{"cls negative", []tarMember{{Name: "a.jpg", Data: []byte("x")}, {Name: "a.cls", Data: []byte("-1")}}, nil, ErrUnsupported, "a.cls"},
		{"cls float", []tarMember{{Name: "a.jpg", Data: []byte("x")}, {Name: "a.cls", Data: []byte("1.0")}}, nil, ErrUnsupported, "a.cls"},
		{"cls over the class limit", []tarMember{{Name: "a.jpg", Data: []byte("x")}, {Name: "a.cls", Data: []byte("99999999999")}}, nil, ErrUnsupported, "over the limit of 1048576 classes"},
		{"cls too long", []tarMember{{Name: "a.jpg", Data: []byte("x")}, {Name: "a.cls", Data: bytes.Repeat([]byte("1"), 33)}}, nil, ErrUnsupported, "not a label"},
		{"no samples", []tarMember{{Name: "a.txt", Data: []byte("x")}}, nil, ErrUnsupported, "no samples"},
		{"truncated", nil, truncated.Bytes()[:700], ErrCorrupt, "s.tar"},
		{"not a tar", nil, bytes.Repeat([]byte("not a tar file "), 100), ErrCorrupt, "s.tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s.tar")
			if tc.raw != nil {
				if err := os.WriteFile(path, tc.raw, 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				writeShard(t, path, tc.members)
			}
			d, err := OpenWebDataset(dir)
			if err == nil {
				d.Close()
				t.Fatalf("opened; want %v", tc.want)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want %v mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
	if _, err := OpenWebDataset(t.TempDir()); !errors.Is(err, ErrUnsupported) {
		t.Errorf("empty directory: %v, want ErrUnsupported", err)
	}
}

// setTypeflag sets the typeflag of the tar header block at off and fixes
// its checksum, to make member kinds archive/tar's writer does not write.
func setTypeflag(b []byte, off int, typeflag byte) {
	h := b[off : off+512]
	h[156] = typeflag
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

// TestWebDatasetSparse: a member stored sparse (GNU tar --sparse, in the
// PAX 1.0 or the old GNU format) has a data section that is not its
// content; indexing it at its data section would serve the wrong bytes, so
// an image stored so refuses the shard.
func TestWebDatasetSparse(t *testing.T) {
	jpg := encodeJPEG(testPicture(24, 16), 90)
	k := 100 // a 512-byte hole after the first k bytes
	pax := func() []byte {
		var recs []byte
		for _, kv := range [][2]string{{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"}, {"GNU.sparse.name", "a.jpg"},
			{"GNU.sparse.realsize", fmt.Sprint(len(jpg) + 512)}} {
			rec := " " + kv[0] + "=" + kv[1] + "\n"
			n := len(rec) // a record's length counts its own digits
			for n != len(rec)+len(fmt.Sprint(n)) {
				n = len(rec) + len(fmt.Sprint(n))
			}
			recs = append(recs, fmt.Sprintf("%d%s", n, rec)...)
		}
		sparseMap := []byte(fmt.Sprintf("2\n0\n%d\n%d\n%d\n", k, k+512, len(jpg)-k))
		sparseMap = append(sparseMap, make([]byte, 512-len(sparseMap))...)
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, m := range []tarMember{{Name: "PaxHeaders/a.jpg", Data: recs}, {Name: "GNUSparseFile.0/a.jpg", Data: append(sparseMap, jpg...)}, {Name: "a.cls", Data: []byte("0")}} {
			tw.WriteHeader(&tar.Header{Name: m.Name, Mode: 0o644, Size: int64(len(m.Data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR})
			tw.Write(m.Data)
		}
		tw.Close()
		b := buf.Bytes()
		setTypeflag(b, 0, tar.TypeXHeader)
		return b
	}()
	gnu := func() []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, m := range []tarMember{{Name: "a.jpg", Data: jpg}, {Name: "a.cls", Data: []byte("0")}} {
			tw.WriteHeader(&tar.Header{Name: m.Name, Mode: 0o644, Size: int64(len(m.Data)), Typeflag: tar.TypeReg, Format: tar.FormatGNU})
			tw.Write(m.Data)
		}
		tw.Close()
		b := buf.Bytes()
		setTypeflag(b, 0, tar.TypeGNUSparse)
		return b
	}()
	for name, data := range map[string][]byte{"pax": pax, "old gnu": gnu} {
		t.Run(name, func(t *testing.T) {
			// archive/tar reads the member as a.jpg, with the hole.
			tr := tar.NewReader(bytes.NewReader(data))
			hd, err := tr.Next()
			if err != nil || hd.Name != "a.jpg" {
				t.Fatalf("crafted tar: %v, %+v", err, hd)
			}
			path := filepath.Join(t.TempDir(), "s.tar")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := OpenWebDataset(path)
			if err == nil {
				d.Close()
				t.Fatal("opened a shard with a sparse image")
			}
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "sparse") {
				t.Errorf("Open: %v, want ErrUnsupported about a sparse member", err)
			}
		})
	}
}

// TestWebDatasetShardStarts checks that each shard's samples are one run of
// indices starting where ShardStarts says, and that a shard with no samples
// has no run (the block shuffle counts shards by their starts).
func TestWebDatasetShardStarts(t *testing.T) {
	jpg := encodeJPEG(testPicture(8, 8), 90)
	dir := t.TempDir()
	sample := func(key, cls string) []tarMember {
		return []tarMember{{Name: key + ".jpg", Data: jpg}, {Name: key + ".cls", Data: []byte(cls)}}
	}
	writeShard(t, filepath.Join(dir, "a.tar"), slices.Concat(sample("0", "0"), sample("1", "1")))
	writeShard(t, filepath.Join(dir, "b.tar"), []tarMember{{Name: "notes.txt", Data: []byte("no samples")}})
	writeShard(t, filepath.Join(dir, "c.tar"), slices.Concat(sample("2", "0"), sample("3", "1"), sample("4", "0")))
	d, err := OpenWebDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var ds Dataset = d
	sh, ok := ds.(Sharded)
	if !ok {
		t.Fatal("WebDataset is not Sharded")
	}
	starts := sh.ShardStarts()
	if want := []int{0, 2}; !slices.Equal(starts, want) {
		t.Fatalf("ShardStarts() = %v, want %v", starts, want)
	}
	for i := range d.Len() {
		shard := "a.tar/"
		if i >= starts[1] {
			shard = "c.tar/"
		}
		if !strings.HasPrefix(d.Name(i), shard) {
			t.Errorf("sample %d is %s, want one of %s", i, d.Name(i), shard)
		}
	}
	if _, ok := any(&ImageFolder{}).(Sharded); ok {
		t.Error("ImageFolder is Sharded: each of its samples is a file of its own")
	}
}
