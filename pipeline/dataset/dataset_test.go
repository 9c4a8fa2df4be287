package dataset

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// imageFolderTree is a tree with everything ImageFolder must index, skip or
// order: classes and files out of creation order, upper-case extensions,
// hidden files and directories, non-images, nested directories and a file
// at the root.
func imageFolderTree(t *testing.T) (root string, files map[string][]byte) {
	root = t.TempDir()
	files = map[string][]byte{
		"dog/b.jpg":             []byte("dog b"),
		"dog/a.png":             []byte("dog a"),
		"dog/c.JPEG":            []byte("dog c"),
		"dog/ba/d.jpg":          []byte("dog ba d"),
		"dog/ba/zz/f.jpg":       []byte("dog ba zz f"),
		"dog/ba-x/e.jpg":        []byte("dog ba-x e"),
		"dog/notes.txt":         []byte("not an image"),
		"dog/.hidden.jpg":       []byte("hidden file"),
		"dog/.cache/x.jpg":      []byte("hidden directory"),
		"cat/z.jpg":             []byte("cat z"),
		"cat/y.bmp":             []byte("cat y"),
		".git/objects/q.jpg":    []byte("hidden class"),
		"README.jpg":            []byte("a file at the root is not a class"),
		"ant/readme.md":         []byte("not an image, beside one"),
		"ant/a.webp":            []byte("ant a"),
		"bee/deep/er/still.gif": []byte("bee"),
	}
	writeTree(t, root, files)
	return root, files
}

func TestImageFolderIndex(t *testing.T) {
	root, files := imageFolderTree(t)
	d, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Classes: every non-hidden directory, sorted (as torchvision's
	// find_classes; one without images is refused: TestImageFolderEmptyClass).
	if want := []string{"ant", "bee", "cat", "dog"}; !slices.Equal(d.Classes(), want) {
		t.Errorf("classes %v, want %v", d.Classes(), want)
	}
	// Files: by class, then in torchvision's sorted(os.walk()) order: by
	// directory path, then name, so a class's own files come before its
	// subdirectories' and "ba-x" sorts before "ba/zz" ('-' < '/'). A
	// depth-first walk would give a, b, ba/d, ba/zz/f, ba-x/e, c.
	want := []struct {
		name  string
		label int64
	}{
		{"ant/a.webp", 0},
		{"bee/deep/er/still.gif", 1},
		{"cat/y.bmp", 2},
		{"cat/z.jpg", 2},
		{"dog/a.png", 3},
		{"dog/b.jpg", 3},
		{"dog/c.JPEG", 3},
		{"dog/ba/d.jpg", 3},
		{"dog/ba-x/e.jpg", 3},
		{"dog/ba/zz/f.jpg", 3},
	}
	if d.Len() != len(want) {
		var got []string
		for i := range d.Len() {
			got = append(got, d.Name(i))
		}
		t.Fatalf("indexed %d files %v, want %d", d.Len(), got, len(want))
	}
	var buf []byte
	for i, w := range want {
		if d.Name(i) != w.name || d.Label(i) != w.label {
			t.Errorf("sample %d: %s label %d, want %s label %d", i, d.Name(i), d.Label(i), w.name, w.label)
		}
		data, err := d.Read(i, buf)
		if err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		if !bytes.Equal(data, files[w.name]) {
			t.Errorf("Read(%d) = %q, want %q", i, data, files[w.name])
		}
		buf = data
	}
	for _, i := range []int{-1, d.Len()} {
		if _, err := d.Read(i, nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Read(%d): %v, want ErrUnsupported", i, err)
		}
	}
}

func TestImageFolderReadReusesBuffer(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{"a/1.jpg": []byte("0123456789")})
	d, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	buf := make([]byte, 0, 64)
	data, err := d.Read(0, buf)
	if err != nil || string(data) != "0123456789" {
		t.Fatalf("Read = %q, %v", data, err)
	}
	if &data[:1][0] != &buf[:1][0] {
		t.Errorf("Read allocated although the buffer was large enough")
	}
}

func TestImageFolderEmpty(t *testing.T) {
	for name, files := range map[string]map[string][]byte{
		"no classes":       {"x.jpg": []byte("x")},
		"no images":        {"a/x.txt": []byte("x")},
		"only hidden":      {"a/.x.jpg": []byte("x"), ".b/y.jpg": []byte("y")},
		"empty class dirs": {"a/sub/readme": []byte("x")},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, files)
			if _, err := OpenImageFolder(root); !errors.Is(err, ErrUnsupported) {
				t.Errorf("OpenImageFolder: %v, want ErrUnsupported", err)
			}
		})
	}
	if _, err := OpenImageFolder(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("OpenImageFolder of a missing directory succeeded")
	}
}

// TestImageFolderEmptyClass: a class folder without an image (empty, or
// holding only other files, hidden images or empty subfolders) is refused
// as torchvision refuses it, with a message that names the folder and
// what to do; a folder that is hidden is no class at all.
func TestImageFolderEmptyClass(t *testing.T) {
	for name, c := range map[string]struct {
		files map[string][]byte
		dirs  []string
		want  string
	}{
		"empty":         {map[string][]byte{"a/x.jpg": []byte("x")}, []string{"b"}, "class folder(s) b ("},
		"no image in":   {map[string][]byte{"a/x.jpg": []byte("x"), "b/notes.txt": []byte("x"), "c/.y.jpg": []byte("y")}, nil, "class folder(s) b, c ("},
		"empty subdirs": {map[string][]byte{"b/x.jpg": []byte("x")}, []string{"a/sub/deeper"}, "class folder(s) a ("},
		"many": {map[string][]byte{"z/x.jpg": []byte("x")}, []string{"a", "b", "c", "d", "e", "f", "g"},
			"class folder(s) a, b, c, d, e and 2 more ("},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, c.files)
			for _, d := range c.dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, err := OpenImageFolder(root)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), "add images to them, or remove them") || !strings.Contains(err.Error(), root) {
				t.Fatalf("OpenImageFolder: %v; want ErrUnsupported naming %q and %s", err, c.want, root)
			}
			t.Log(err)
		})
	}
	// A hidden folder is not a class: skipped, not refused.
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{"a/x.jpg": []byte("x")})
	if err := os.Mkdir(filepath.Join(root, ".cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	if d, err := OpenImageFolder(root); err != nil {
		t.Errorf("a hidden empty folder: %v", err)
	} else {
		d.Close()
	}
}

// TestImageFolderSymlinks: a link to a file inside the root reads it; a
// link that leaves the root (absolute, or up through ..) is indexed but
// refused when read, through os.Root, without reading the outside file.
func TestImageFolderSymlinks(t *testing.T) {
	outside := t.TempDir()
	secret := []byte("outside the dataset root")
	writeTree(t, outside, map[string][]byte{"secret.jpg": secret})
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{"a/real.jpg": []byte("inside"), "b/other.jpg": []byte("other class")})
	links := map[string]string{
		"a/in.jpg":       "real.jpg",
		"a/in-other.jpg": "../b/other.jpg",
		"a/out-abs.jpg":  filepath.Join(outside, "secret.jpg"),
		"a/out-rel.jpg":  "../../" + filepath.Base(outside) + "/secret.jpg",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(name))); err != nil {
			t.Skipf("no symbolic links here: %v", err)
		}
	}
	// A symlinked class directory inside the root is not a class (os.Root
	// and WalkDir do not follow it), and a link out of the root is not
	// followed either.
	if err := os.Symlink(outside, filepath.Join(root, "c")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !slices.Equal(d.Classes(), []string{"a", "b"}) {
		t.Errorf("classes %v, want [a b]", d.Classes())
	}
	byName := map[string]int{}
	for i := range d.Len() {
		byName[d.Name(i)] = i
	}
	for _, tc := range []struct {
		name string
		want string // content, or "" for an error
	}{
		{"a/in.jpg", "inside"},
		{"a/in-other.jpg", "other class"},
		{"a/out-abs.jpg", ""},
		{"a/out-rel.jpg", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, ok := byName[tc.name]
			if !ok {
				t.Fatalf("%s not indexed (have %v)", tc.name, byName)
			}
			data, err := d.Read(i, nil)
			switch {
			case tc.want != "" && (err != nil || string(data) != tc.want):
				t.Errorf("Read = %q, %v; want %q", data, err, tc.want)
			case tc.want == "" && err == nil:
				t.Errorf("Read of a link out of the root succeeded: %q", data)
			case tc.want == "" && bytes.Contains(data, secret):
				t.Errorf("Read returned the outside file")
			case tc.want == "" && !strings.Contains(err.Error(), tc.name):
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestImageFolderFileCap(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{"a/small.jpg": make([]byte, 50), "a/big.jpg": make([]byte, 51)})
	d, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetMaxFileSize(50)
	for i := range d.Len() {
		_, err := d.Read(i, nil)
		switch d.Name(i) {
		case "a/big.jpg":
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "a/big.jpg") {
				t.Errorf("big file: %v, want ErrTooLarge naming it", err)
			}
		default:
			if err != nil {
				t.Errorf("small file: %v", err)
			}
		}
	}
}

// TestImageFolderFingerprint: the fingerprint is a function of the index:
// the same on a second open, different when a file's size or a class name
// changes, and never the root's absolute path.
func TestImageFolderFingerprint(t *testing.T) {
	fp := func(root string) string {
		t.Helper()
		d, err := OpenImageFolder(root)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		return d.Fingerprint()
	}
	tree := map[string][]byte{"cat/1.jpg": []byte("one"), "dog/2.jpg": []byte("two"), "dog/3.jpg": []byte("three")}
	root := t.TempDir()
	writeTree(t, root, tree)
	base := fp(root)
	if len(base) != 32 {
		t.Errorf("fingerprint %q, want 32 hex digits", base)
	}
	if again := fp(root); again != base {
		t.Errorf("second open: %s, first %s", again, base)
	}
	other := t.TempDir()
	writeTree(t, other, tree)
	if got := fp(other); got != base {
		t.Errorf("same tree elsewhere: %s, want %s", got, base)
	}
	if err := os.WriteFile(filepath.Join(root, "dog/3.jpg"), []byte("three!"), 0o644); err != nil {
		t.Fatal(err)
	}
	resized := fp(root)
	if resized == base {
		t.Errorf("fingerprint unchanged after a file changed size")
	}
	if err := os.Rename(filepath.Join(root, "cat"), filepath.Join(root, "kitten")); err != nil {
		t.Fatal(err)
	}
	if renamed := fp(root); renamed == resized {
		t.Errorf("fingerprint unchanged after a class was renamed")
	}
}

func TestOpenPicksFormat(t *testing.T) {
	folder := t.TempDir()
	writeTree(t, folder, map[string][]byte{"a/1.jpg": []byte("x")})
	shards := t.TempDir()
	writeShard(t, filepath.Join(shards, "s-0.tar"), []tarMember{{Name: "k.jpg", Data: []byte("x")}, {Name: "k.cls", Data: []byte("0")}})
	for _, tc := range []struct {
		name, path string
		want       string
	}{
		{"image folder", folder, "*dataset.ImageFolder"},
		{"shard directory", shards, "*dataset.WebDataset"},
		{"one shard", filepath.Join(shards, "s-0.tar"), "*dataset.WebDataset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Open(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if got := typeName(d); got != tc.want {
				t.Errorf("Open(%s) = %s, want %s", tc.path, got, tc.want)
			}
		})
	}
	notTar := filepath.Join(folder, "a", "1.jpg")
	if _, err := Open(notTar); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Open(a file that is not a .tar): %v, want ErrUnsupported", err)
	}
	if _, err := Open(filepath.Join(folder, "missing")); err == nil {
		t.Errorf("Open(missing) succeeded")
	}
}

func typeName(d Dataset) string {
	switch d.(type) {
	case *ImageFolder:
		return "*dataset.ImageFolder"
	case *WebDataset:
		return "*dataset.WebDataset"
	}
	return "other"
}
