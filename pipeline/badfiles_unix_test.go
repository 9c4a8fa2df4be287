//go:build unix

package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
)

// The file-system half of the bad-input corpus: what a server meets in a
// dataset directory besides bad image bytes (those are testdata/bad, run by
// TestBadInput). Each kind has the outcome of doc.go's table: at Open it is
// listed, skipped, or refuses the dataset; a listed one that cannot be made
// is a per-sample error, never a crash or a hang.

func mkSymlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatalf("symlink: %v", err)
	}
}

func mkFIFO(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
}

// unprivileged runs f with file modes enforced, as for any user: directly
// when not root; as root, on a thread without the capabilities that let
// root read any file (asUnprivileged). It reports false when root's access
// cannot be dropped here: f has then run with root's rights, and the caller
// checks root's documented outcome instead (the file is read like any
// other), so the case is tested either way, never skipped.
func unprivileged(f func()) bool {
	if asUnprivileged(f) {
		return true
	}
	f()
	return os.Geteuid() != 0
}

// readOutcome is what reading one listed file must give.
type readOutcome struct {
	want error  // nil: success; else a sentinel, or fs.ErrNotExist/fs.ErrPermission for I/O errors
	msg  string // a substring of the error message
	data []byte // on success, the bytes Read returns
	// unnamed: the message need not name the file (a decoder's error, in a
	// SampleError whose Name does).
	unnamed bool
}

// checkRead checks one Read (or per-sample) error against its outcome: the
// right sentinel or os error, IsBadInput only for sentinels, the file's
// name in the message and no absolute path of the test's directories.
func checkRead(t *testing.T, name string, data []byte, err error, o readOutcome, dirs ...string) {
	t.Helper()
	if o.want == nil {
		if err != nil || !bytes.Equal(data, o.data) {
			t.Errorf("%s: got %d bytes, %v; want its %d bytes", name, len(data), err, len(o.data))
		}
		return
	}
	sentinel := o.want == errs.Corrupt || o.want == errs.TooLarge || o.want == errs.Unsupported
	switch {
	case err == nil:
		t.Errorf("%s: read %d bytes; want an error wrapping %v", name, len(data), o.want)
		return
	case !errors.Is(err, o.want):
		t.Errorf("%s: %v; want an error wrapping %v", name, err, o.want)
	case IsBadInput(err) != sentinel:
		t.Errorf("%s: %v: IsBadInput %v, want %v", name, err, IsBadInput(err), sentinel)
	case !o.unnamed && !strings.Contains(err.Error(), name), !strings.Contains(err.Error(), o.msg):
		t.Errorf("%s: error %q does not name the file and mention %q", name, err, o.msg)
	}
	for _, d := range dirs {
		if strings.Contains(err.Error(), d) {
			t.Errorf("%s: error %q holds the absolute path %s", name, err, d)
		}
	}
}

// TestImageFolderBadFiles: every kind of odd entry in an ImageFolder tree,
// at Open and at Read, including changes made after Open.
func TestImageFolderBadFiles(t *testing.T) {
	outside := t.TempDir()
	secret := []byte("outside the dataset root")
	writeTree(t, outside, map[string][]byte{"secret.jpg": secret})
	root := t.TempDir()
	good := encodeJPEG(testPicture(24, 16), 90)
	writeTree(t, root, map[string][]byte{
		"a/good.jpg":          good,
		"a/dir.jpg/inner.jpg": good,
		"a/unreadable.jpg":    good,
		"a/grows.jpg":         good,
		"a/shrinks.jpg":       good,
		"a/removed.jpg":       good,
		"a/becomes-fifo.jpg":  good,
		"a/becomes-dir.jpg":   good,
		"a/big.jpg":           make([]byte, 5000),
	})
	at := func(name string) string { return filepath.Join(root, filepath.FromSlash(name)) }
	mkSymlink(t, "good.jpg", at("a/link-in.jpg"))
	mkSymlink(t, filepath.Join(outside, "secret.jpg"), at("a/link-out-abs.jpg"))
	mkSymlink(t, "../../"+filepath.Base(outside)+"/secret.jpg", at("a/link-out-rel.jpg"))
	mkSymlink(t, "missing.jpg", at("a/link-dangling.jpg"))
	mkSymlink(t, "link-loop.jpg", at("a/link-loop.jpg"))
	mkFIFO(t, at("a/fifo.jpg"))
	mkFIFO(t, at("a/.fifo"))
	mkSymlink(t, ".fifo", at("a/link-fifo.jpg"))
	mkSymlink(t, "dir.jpg", at("a/link-dir.jpg"))
	sock, err := net.Listen("unix", at("a/socket.jpg"))
	if err != nil {
		t.Fatalf("unix socket: %v", err)
	}
	defer sock.Close()
	if err := os.Chmod(at("a/unreadable.jpg"), 0); err != nil {
		t.Fatal(err)
	}

	d, err := dataset.OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetMaxFileSize(4096)
	var names []string
	byName := map[string]int{}
	for i := range d.Len() {
		names = append(names, d.Name(i))
		byName[d.Name(i)] = i
	}
	// Listed: regular files and links whatever they resolve to, except
	// links that resolve (inside the root) to something not a file.
	wantNames := []string{
		"a/becomes-dir.jpg", "a/becomes-fifo.jpg", "a/big.jpg", "a/good.jpg", "a/grows.jpg",
		"a/link-dangling.jpg", "a/link-in.jpg", "a/link-loop.jpg", "a/link-out-abs.jpg",
		"a/link-out-rel.jpg", "a/removed.jpg", "a/shrinks.jpg", "a/unreadable.jpg",
		"a/dir.jpg/inner.jpg", // a directory named like an image is a subdirectory
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("indexed %q\nwant    %q", names, wantNames)
	}

	// Changes after Open.
	f, err := os.OpenFile(at("a/grows.jpg"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("more"))
	f.Close()
	if err := os.Truncate(at("a/shrinks.jpg"), int64(len(good)/2)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a/removed.jpg", "a/becomes-fifo.jpg", "a/becomes-dir.jpg"} {
		if err := os.Remove(at(name)); err != nil {
			t.Fatal(err)
		}
	}
	mkFIFO(t, at("a/becomes-fifo.jpg"))
	if err := os.Mkdir(at("a/becomes-dir.jpg"), 0o755); err != nil {
		t.Fatal(err)
	}

	outcomes := map[string]readOutcome{
		"a/good.jpg":          {data: good},
		"a/dir.jpg/inner.jpg": {data: good},
		"a/link-in.jpg":       {data: good},
		"a/big.jpg":           {want: errs.TooLarge, msg: "file cap"},
		"a/link-out-abs.jpg":  {want: errs.Unsupported, msg: "does not resolve inside the dataset root"},
		"a/link-out-rel.jpg":  {want: errs.Unsupported, msg: "does not resolve inside the dataset root"},
		"a/link-loop.jpg":     {want: errs.Unsupported, msg: "does not resolve inside the dataset root"},
		"a/link-dangling.jpg": {want: fs.ErrNotExist},
		"a/removed.jpg":       {want: fs.ErrNotExist},
		"a/grows.jpg":         {want: errs.Corrupt, msg: "changed since the dataset was indexed"},
		"a/shrinks.jpg":       {want: errs.Corrupt, msg: "changed since the dataset was indexed"},
		"a/becomes-fifo.jpg":  {want: errs.Unsupported, msg: "not a regular file"},
		"a/becomes-dir.jpg":   {want: errs.Unsupported, msg: "not a regular file"},
	}
	for _, name := range wantNames {
		if name == "a/unreadable.jpg" {
			continue
		}
		o, ok := outcomes[name]
		if !ok {
			t.Fatalf("no outcome for %s", name)
		}
		i, ok := byName[name]
		if !ok {
			continue // reported above
		}
		var data []byte
		err := withTimeout(t, func() error {
			var err error
			data, err = d.Read(i, nil)
			return err
		})
		checkRead(t, name, data, err, o, root, outside)
		if bytes.Contains(data, secret) {
			t.Errorf("%s: read the file outside the root", name)
		}
	}

	t.Run("unreadable file", func(t *testing.T) {
		var data []byte
		var err error
		if unprivileged(func() { data, err = d.Read(byName["a/unreadable.jpg"], nil) }) {
			checkRead(t, "a/unreadable.jpg", data, err, readOutcome{want: fs.ErrPermission, msg: "permission denied"}, root)
		} else {
			t.Logf("root with its capabilities: a mode-000 file is readable, and is read")
			checkRead(t, "a/unreadable.jpg", data, err, readOutcome{data: good})
		}
	})

	t.Run("unreadable subdirectory", func(t *testing.T) {
		root := t.TempDir()
		writeTree(t, root, map[string][]byte{"a/ok.jpg": good, "a/locked/x.jpg": good})
		if err := os.Chmod(filepath.Join(root, "a", "locked"), 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(filepath.Join(root, "a", "locked"), 0o755) // so TempDir's cleanup can remove it
		var d *dataset.ImageFolder
		var err error
		if unprivileged(func() { d, err = dataset.OpenImageFolder(root) }) {
			if err == nil {
				d.Close()
				t.Fatalf("opened a tree with an unreadable subdirectory; want it refused")
			}
			if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "a/locked") || strings.Contains(err.Error(), root) {
				t.Errorf("Open: %v; want fs.ErrPermission naming a/locked, without the root's path", err)
			}
		} else {
			t.Logf("root with its capabilities: an unreadable subdirectory is read")
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Len() != 2 {
				t.Errorf("%d samples, want 2", d.Len())
			}
		}
	})
}

// TestWebDatasetBadShards: odd entries among shards refuse the dataset at
// Open; a shard changed after Open changes nothing but the members it cut.
func TestWebDatasetBadShards(t *testing.T) {
	jpg := encodeJPEG(testPicture(24, 16), 90)
	shard := func(t *testing.T, path string, keys ...string) {
		t.Helper()
		var ms []tarMember
		for i, k := range keys {
			ms = append(ms, tarMember{Name: k + ".jpg", Data: jpg[:len(jpg)-i]}, tarMember{Name: k + ".cls", Data: []byte("1")})
		}
		writeShard(t, path, ms)
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir, outside string)
		want  error // nil: opens
		msg   string
		n     int // samples when it opens
	}{
		{"symlink out of the directory", func(t *testing.T, dir, outside string) {
			shard(t, filepath.Join(outside, "real.tar"), "x")
			mkSymlink(t, filepath.Join(outside, "real.tar"), filepath.Join(dir, "b.tar"))
		}, errs.Unsupported, "b.tar is a symbolic link that does not resolve inside the dataset directory", 0},
		{"relative symlink out of the directory", func(t *testing.T, dir, outside string) {
			shard(t, filepath.Join(outside, "real.tar"), "x")
			mkSymlink(t, "../"+filepath.Base(outside)+"/real.tar", filepath.Join(dir, "b.tar"))
		}, errs.Unsupported, "does not resolve inside", 0},
		{"symlink inside the directory", func(t *testing.T, dir, outside string) {
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			shard(t, filepath.Join(dir, "sub", "real.tar"), "x", "y")
			mkSymlink(t, "sub/real.tar", filepath.Join(dir, "b.tar"))
		}, nil, "", 3},
		{"directory named like a shard", func(t *testing.T, dir, outside string) {
			os.Mkdir(filepath.Join(dir, "b.tar"), 0o755)
		}, errs.Unsupported, "b.tar is not a regular file", 0},
		{"FIFO named like a shard", func(t *testing.T, dir, outside string) {
			mkFIFO(t, filepath.Join(dir, "b.tar"))
		}, errs.Unsupported, "b.tar is not a regular file", 0},
		{"dot file", func(t *testing.T, dir, outside string) {
			os.WriteFile(filepath.Join(dir, "._a.tar"), []byte("AppleDouble junk"), 0o644)
		}, nil, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			shard(t, filepath.Join(dir, "a.tar"), "k")
			tc.setup(t, dir, outside)
			var d *dataset.WebDataset
			err := withTimeout(t, func() error {
				var err error
				d, err = dataset.OpenWebDataset(dir)
				return err
			})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				if d.Len() != tc.n {
					t.Errorf("%d samples, want %d", d.Len(), tc.n)
				}
				return
			}
			if err == nil {
				d.Close()
				t.Fatalf("opened; want %v", tc.want)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), dir) {
				t.Errorf("Open: %v; want %v mentioning %q, without the directory's path", err, tc.want, tc.msg)
			}
		})
	}

	t.Run("glob characters in the directory's name", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "shards[1]*")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		shard(t, filepath.Join(dir, "a.tar"), "k", "l")
		d, err := dataset.OpenWebDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if d.Len() != 2 {
			t.Errorf("%d samples, want 2", d.Len())
		}
	})

	t.Run("unreadable shard", func(t *testing.T) {
		dir := t.TempDir()
		shard(t, filepath.Join(dir, "a.tar"), "k")
		if err := os.Chmod(filepath.Join(dir, "a.tar"), 0); err != nil {
			t.Fatal(err)
		}
		var d *dataset.WebDataset
		var err error
		if unprivileged(func() { d, err = dataset.OpenWebDataset(dir) }) {
			if err == nil {
				d.Close()
				t.Fatal("opened an unreadable shard")
			}
			if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "a.tar") || strings.Contains(err.Error(), dir) {
				t.Errorf("Open: %v; want fs.ErrPermission naming a.tar, without the directory's path", err)
			}
		} else {
			t.Logf("root with its capabilities: a mode-000 shard is readable, and is read")
			if err != nil {
				t.Fatal(err)
			}
			d.Close()
		}
	})

	t.Run("changed after Open", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.tar")
		shard(t, path, "k0", "k1", "k2")
		d, err := dataset.OpenWebDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		var before [][]byte
		for i := range d.Len() {
			b, err := d.Read(i, nil)
			if err != nil {
				t.Fatal(err)
			}
			before = append(before, b)
		}
		readAll := func(step string, cut int) {
			t.Helper()
			for i := range d.Len() {
				o := readOutcome{data: before[i]}
				if i >= cut {
					o = readOutcome{want: errs.Corrupt, msg: "shorter than its size"}
				}
				var data []byte
				err := withTimeout(t, func() error {
					var err error
					data, err = d.Read(i, nil)
					return err
				})
				checkRead(t, d.Name(i), data, err, o, dir)
				if t.Failed() {
					t.Fatalf("after %s", step)
				}
			}
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(bytes.Repeat([]byte("appended "), 300))
		f.Close()
		readAll("appending", d.Len())
		// Cut inside the last image: tar puts k2.jpg after k1.cls.
		// (k2.jpg is the shard's last image: its bytes are the last place
		// they are found, the other images holding them too.)
		shardBytes, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(bytes.LastIndex(shardBytes, before[2]))
		if off < 0 {
			t.Fatal("k2.jpg's bytes are not in its shard")
		}
		if err := os.Truncate(path, off+int64(len(before[2]))/2); err != nil {
			t.Fatal(err)
		}
		readAll("truncating", 2)
		other := filepath.Join(dir, "other")
		shard(t, other, "z0", "z1", "z2")
		if err := os.Rename(other, path); err != nil {
			t.Fatal(err)
		}
		readAll("renaming another shard over it", 2)
		d.Close()
		_, err = d.Read(0, nil)
		if err == nil || strings.Contains(err.Error(), dir) {
			t.Errorf("Read after Close: %v; want an error without the shard's absolute path", err)
		}
	})
}

// TestFillEpochBadFiles: an epoch over an ImageFolder with about 1% bad
// files of every kind, in shuffled batches through Executor.Fill: every
// good sample comes out exactly once (Drop) or at least once (PadFromBatch,
// where pads repeat good samples of the same batch), and every bad one is
// reported exactly once in Batch.Errors with its documented error.
func TestFillEpochBadFiles(t *testing.T) {
	const nGood, batch = 600, 64
	root, outside := t.TempDir(), t.TempDir()
	files := map[string][]byte{}
	for i := range nGood {
		files[fmt.Sprintf("c%d/%04d.jpg", i%5, i)] = encodeJPEG(testPicture(24+i%13, 16+i%7), 80)
	}
	good := files["c0/0000.jpg"]
	writeTree(t, outside, map[string][]byte{"secret.jpg": good})
	bad := map[string]error{
		"c0/bad-corrupt-scan.jpg": errs.Corrupt,
		"c1/bad-huge.jpg":         errs.TooLarge,
		"c2/bad-link-out.jpg":     errs.Unsupported,
		"c3/bad-fifo.jpg":         errs.Unsupported,
		"c4/bad-dir.jpg":          errs.Unsupported,
		"c0/bad-shrunk.jpg":       errs.Corrupt,
		"c1/bad-grown.jpg":        errs.Corrupt,
		"c2/bad-removed.jpg":      fs.ErrNotExist,
		"c3/unreadable.jpg":       fs.ErrPermission, // unless read as root
	}
	files["c0/bad-corrupt-scan.jpg"] = readCorpus(t, "bad/corrupt-scan.jpg")
	files["c1/bad-huge.jpg"] = readCorpus(t, "bad/huge-60000x60000.jpg")
	for _, name := range []string{"c3/bad-fifo.jpg", "c4/bad-dir.jpg", "c0/bad-shrunk.jpg", "c1/bad-grown.jpg", "c2/bad-removed.jpg", "c3/unreadable.jpg"} {
		files[name] = good
	}
	writeTree(t, root, files)
	at := func(name string) string { return filepath.Join(root, filepath.FromSlash(name)) }
	mkSymlink(t, filepath.Join(outside, "secret.jpg"), at("c2/bad-link-out.jpg"))
	if err := os.Chmod(at("c3/unreadable.jpg"), 0); err != nil {
		t.Fatal(err)
	}
	// The Executor's workers read on any thread, with the process's rights:
	// as root (with its capabilities) the mode-000 file is a good sample.
	if f, err := os.Open(at("c3/unreadable.jpg")); err == nil {
		f.Close()
		delete(bad, "c3/unreadable.jpg")
		t.Logf("running as root: c3/unreadable.jpg is readable and is a good sample")
	}

	ds, err := dataset.OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != nGood+9 {
		t.Fatalf("%d samples indexed, want %d", ds.Len(), nGood+9)
	}
	// Changes after Open.
	for _, name := range []string{"c3/bad-fifo.jpg", "c4/bad-dir.jpg", "c2/bad-removed.jpg"} {
		if err := os.Remove(at(name)); err != nil {
			t.Fatal(err)
		}
	}
	mkFIFO(t, at("c3/bad-fifo.jpg"))
	if err := os.Mkdir(at("c4/bad-dir.jpg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(at("c0/bad-shrunk.jpg"), int64(len(good)-100)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(at("c1/bad-grown.jpg"), append(bytes.Clone(good), good...), 0o644); err != nil {
		t.Fatal(err)
	}

	badIdx := map[int64]error{}
	for i := range ds.Len() {
		if want, ok := bad[ds.Name(i)]; ok {
			badIdx[int64(i)] = want
		}
	}
	if len(badIdx) != len(bad) {
		t.Fatalf("bad files %v indexed as %v", bad, badIdx)
	}
	order := rand.New(rand.NewPCG(3, 4)).Perm(ds.Len())
	tr := smallTrain(t)
	size := tr.SampleBytes()
	e := NewExecutor(3)
	defer e.Close()
	const seed, epoch = 11, 2

	dropped := map[int64][]byte{} // Drop's sample bytes by index
	for _, policy := range []FailPolicy{Drop, PadFromBatch} {
		own := map[int64]int{}  // good samples in their own slot
		errs := map[int64]int{} // bad samples in Batch.Errors
		var b Batch
		for start := 0; start < len(order); start += batch {
			var indices []int64
			for _, i := range order[start:min(start+batch, len(order))] {
				indices = append(indices, int64(i))
			}
			err := withTimeout(t, func() error { return e.Fill(context.Background(), ds, tr, seed, epoch, indices, policy, &b) })
			if err != nil {
				t.Fatalf("Fill: %v", err)
			}
			nBad := 0
			for _, i := range indices {
				if badIdx[i] != nil {
					nBad++
				}
			}
			if len(b.Errors) != nBad {
				t.Errorf("batch at %d: %d errors, want %d", start, len(b.Errors), nBad)
			}
			for _, se := range b.Errors {
				errs[se.Index]++
				want := badIdx[se.Index]
				if want == nil {
					t.Errorf("good sample %d (%s) reported: %v", se.Index, se.Name, se.Err)
					continue
				}
				if se.Name != ds.Name(int(se.Index)) || se.Reason != se.Err.Error() {
					t.Errorf("error for %d: name %q, reason %q", se.Index, se.Name, se.Reason)
				}
				checkRead(t, se.Name, nil, se.Err, readOutcome{want: want, unnamed: true}, root, outside)
			}
			wantN := len(indices) - nBad
			if policy == PadFromBatch && nBad < len(indices) {
				wantN = len(indices)
			}
			if b.N != wantN || len(b.Indices) != wantN || len(b.Labels) != wantN || len(b.Data) != wantN*size {
				t.Fatalf("batch at %d (%v): N %d, %d indices, %d labels, %d bytes; want %d samples", start, policy, b.N, len(b.Indices), len(b.Labels), len(b.Data), wantN)
			}
			if policy == Drop {
				var kept []int64
				for _, i := range indices {
					if badIdx[i] == nil {
						kept = append(kept, i)
					}
				}
				if !slices.Equal(b.Indices, kept) {
					t.Errorf("batch at %d: Drop kept %v, want the good samples in order %v", start, b.Indices, kept)
				}
			}
			for slot := range b.N {
				idx, data := b.Indices[slot], b.Data[slot*size:(slot+1)*size]
				if badIdx[idx] != nil {
					t.Errorf("bad sample %d in slot %d", idx, slot)
					continue
				}
				if b.Labels[slot] != ds.Label(int(idx)) {
					t.Errorf("slot %d: label %d, sample %d has %d", slot, b.Labels[slot], idx, ds.Label(int(idx)))
				}
				switch {
				case policy == Drop:
					own[idx]++
					dropped[idx] = bytes.Clone(data)
				case idx == indices[slot]:
					own[idx]++
					if !bytes.Equal(data, dropped[idx]) {
						t.Errorf("sample %d: PadFromBatch and Drop batches differ", idx)
					}
				default: // a pad: a copy of a good sample of this batch
					if badIdx[indices[slot]] == nil {
						t.Errorf("slot %d holds %d, but its sample %d is good", slot, idx, indices[slot])
					}
					if !slices.Contains(indices, idx) || !bytes.Equal(data, dropped[idx]) {
						t.Errorf("slot %d: pad %d is not a copy of a good sample of the batch", slot, idx)
					}
				}
			}
		}
		for i := range int64(ds.Len()) {
			if badIdx[i] != nil {
				if errs[i] != 1 {
					t.Errorf("%v: bad sample %d (%s) reported %d times", policy, i, ds.Name(int(i)), errs[i])
				}
			} else if own[i] != 1 {
				t.Errorf("%v: good sample %d (%s) came out %d times", policy, i, ds.Name(int(i)), own[i])
			}
		}
	}
	// The batches hold what a lone Decoder makes of each sample.
	for i := range int64(ds.Len()) {
		if badIdx[i] == nil && i%50 == 0 && !bytes.Equal(dropped[i], sampleOf(t, ds, tr, seed, epoch, i)) {
			t.Errorf("sample %d: batch bytes differ from a lone decode", i)
		}
	}
}

// withTimeout runs f and fails the test if it does not return in time: the
// failure these tests look for is a read that blocks forever.
func withTimeout(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("blocked: still waiting after a minute")
		return nil
	}
}
