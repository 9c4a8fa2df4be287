package dataset

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What a crafted manifest can make a server serve (issue 38, row 5): its
// SHA-256 is unkeyed, so anyone who can write it can rewrite it. What can
// be checked against the data at little cost is: an ImageFolder's labels
// against the class folders of their keys, and a shard member's own tar
// header (read with its range) against the name and size the manifest
// gives.

// rewrite returns a copy of m with each sample changed by f.
func rewrite(m *Manifest, classes []string, f func(i int, s *ManifestSample)) *Manifest {
	out := &Manifest{Root: m.Root, Layout: m.Layout, Classes: classes}
	for i := range m.NumObjects() {
		out.AddObject(m.Object(i))
	}
	for i := range m.Len() {
		s := m.Sample(i)
		f(i, &s)
		out.AddSample(s)
	}
	return out
}

func putManifest(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(ManifestName))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, encodeManifest(t, m), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestManifestLabelsAgainstFolders: an ImageFolder manifest whose labels
// are not the class folders of their keys (50/50 wrong labels, silently,
// before) is refused at open, naming the sample; so are classes that are
// not the folders, sorted, each with an image (labels shifted with them).
func TestManifestLabelsAgainstFolders(t *testing.T) {
	dir := numberedFolder(t, 20)
	m, err := IndexDir(t.Context(), dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, lie := range map[string]*Manifest{
		"labels +1":        rewrite(m, m.Classes, func(_ int, s *ManifestSample) { s.Label = (s.Label + 1) % 2 }),
		"a class in front": rewrite(m, []string{"a", "c0", "c1"}, func(_ int, s *ManifestSample) { s.Label++ }),
		"classes swapped":  rewrite(m, []string{"c1", "c0"}, func(_ int, s *ManifestSample) { s.Label = 1 - s.Label }),
	} {
		putManifest(t, dir, lie)
		ds, err := openSource(t, dir)
		if err == nil {
			wrong := 0
			for i := range ds.Len() {
				if want := int64(ds.Name(i)[1] - '0'); ds.Label(i) != want {
					wrong++
				}
			}
			t.Errorf("%s: opened, %d of %d labels wrong", name, wrong, ds.Len())
			continue
		}
		if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), "class") {
			t.Errorf("%s: %v: want ErrManifest naming the class", name, err)
		}
	}
	putManifest(t, dir, m)
	if _, err := openSource(t, dir); err != nil {
		t.Errorf("the honest manifest: %v", err)
	}
}

// TestManifestTarHeaders: a WebDataset manifest whose ranges point at
// other members of the shard (50/50 other images, silently, before) gives
// a per-sample error for each, never another member's bytes; the honest
// one reads every sample, long names (a GNU or PAX header before the
// member's) included.
func TestManifestTarHeaders(t *testing.T) {
	dir := t.TempDir()
	var members []tarMember
	for i := range 8 {
		members = append(members,
			tarMember{Name: fmt.Sprintf("s%02d.jpg", i), Data: bytes.Repeat([]byte{byte('a' + i)}, 600)},
			tarMember{Name: fmt.Sprintf("s%02d.cls", i), Data: []byte("0")})
	}
	long := strings.Repeat("a-long-directory/", 8) + "x"
	members = append(members, tarMember{Name: long + ".jpg", Data: bytes.Repeat([]byte("L"), 600)}, tarMember{Name: long + ".cls", Data: []byte("1")})
	writeShard(t, filepath.Join(dir, "a.tar"), members, tar.FormatPAX)
	writeShard(t, filepath.Join(dir, "b.tar"), members[:4], tar.FormatGNU)
	m, err := IndexDir(t.Context(), dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	putManifest(t, dir, m)
	honest, err := openSource(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range honest.Len() {
		if _, err := honest.Read(i, nil); err != nil {
			t.Errorf("honest sample %d (%s): %v", i, honest.Name(i), err)
		}
	}

	n := 8 // the shard's short-named samples: each points at the next
	lie := rewrite(m, nil, func(i int, s *ManifestSample) {
		if i < n {
			next := m.Sample((i + 1) % n)
			s.Off, s.Size = next.Off, next.Size
		}
	})
	putManifest(t, dir, lie)
	ds, err := openSource(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		got, err := ds.Read(i, nil)
		if err == nil {
			t.Errorf("sample %d (%s): read %d bytes of %q", i, ds.Name(i), len(got), got[:1])
			continue
		}
		if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), ds.Name(i)[len("a.tar/"):]) {
			t.Errorf("sample %d: %v: want ErrCorrupt and ErrManifest naming the member", i, err)
		}
	}
	if got, err := ds.Read(n, nil); err != nil || got[0] != 'L' {
		t.Errorf("the long-named sample: %.1q, %v", got, err)
	}
}

// TestManifestWebDatasetLabels (issue 47): a WebDataset manifest whose
// labels are shifted (50/50 wrong labels, silently, before) gets no wrong
// label to a trainer: each sample's .cls member is read beside its image
// and the label checked against it, and a sample whose label the shard
// does not say is a per-sample error naming both. A manifest that points
// a sample's .cls at another key's .cls, or at its image, fails the same
// way (the tar header before it must name the key's .cls); the honest one
// reads every sample.
func TestManifestWebDatasetLabels(t *testing.T) {
	dir := t.TempDir()
	var members []tarMember
	const n = 50
	for i := range n {
		members = append(members,
			tarMember{Name: fmt.Sprintf("s%02d.cls", i), Data: []byte(fmt.Sprint(i % 5))},
			tarMember{Name: fmt.Sprintf("s%02d.jpg", i), Data: bytes.Repeat([]byte{byte('a' + i%26)}, 600)})
	}
	writeShard(t, filepath.Join(dir, "a.tar"), members, tar.FormatPAX)
	m, err := IndexDir(t.Context(), dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	truth := func(ds Dataset, i int) int64 {
		var k int
		fmt.Sscanf(ds.Name(i), "a.tar/s%02d.jpg", &k)
		return int64(k % 5)
	}
	putManifest(t, dir, m)
	honest, err := openSource(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range honest.Len() {
		if _, err := honest.Read(i, nil); err != nil || honest.Label(i) != truth(honest, i) {
			t.Errorf("honest sample %d (%s): label %d, %v", i, honest.Name(i), honest.Label(i), err)
		}
	}
	for name, tc := range map[string]struct {
		f    func(i int, s *ManifestSample)
		says string
	}{
		"labels shifted":     {func(_ int, s *ManifestSample) { s.Label = (s.Label + 1) % 5 }, "the manifest labels it"},
		"cls of another key": {func(i int, s *ManifestSample) { s.ClsOff = m.Sample((i + 1) % n).ClsOff; s.Label = (s.Label + 1) % 5 }, `names "s`},
		"cls at the image":   {func(_ int, s *ManifestSample) { s.ClsOff, s.ClsSize = s.Off, 1 }, "the manifest gives its label bytes"},
	} {
		putManifest(t, dir, rewrite(m, nil, tc.f))
		ds, err := openSource(t, dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wrong, refused := 0, 0
		for i := range ds.Len() {
			_, err := ds.Read(i, nil)
			switch {
			case err == nil && ds.Label(i) != truth(ds, i):
				wrong++
			case err != nil:
				refused++
				if !errors.Is(err, ErrManifest) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), ds.Name(i)) {
					t.Errorf("%s: sample %d: %v: want ErrManifest naming the sample and saying %q", name, i, err, tc.says)
				}
			}
		}
		if wrong != 0 || refused != n {
			t.Errorf("%s: %d wrong labels delivered, %d of %d samples refused; want 0 wrong, all refused", name, wrong, refused, n)
		}
	}
}
