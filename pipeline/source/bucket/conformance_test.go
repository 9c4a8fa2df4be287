package bucket

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stoker-dev/stoker/internal/storetest"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// One conformance suite, run against every kind of Store, as gocloud.dev's
// drivertest is against every driver: a local directory, S3 (versitygw),
// GCS (fake-gcs-server, and a LyingGCS telling no lie) and Azure
// (Azurite), each on loopback (internal/storetest). It checks what Store promises (source.go):
// listing, missing objects, objects changed after they were listed
// (version pinning), ranges, streams and Put. Each subtest has a root of
// its own, holding only what it put there. What one kind does of its own
// (a directory's links and FIFOs, a provider's retries, throttling and
// faults) is in that kind's own tests.

// storeRoot is a fresh, empty root of one kind of store: the URL Open
// takes, and how another writer puts and deletes objects there behind the
// store's back (the file system, or the provider's own API, so that each
// object has the version a real store gives it).
type storeRoot struct {
	url string
	put func(t *testing.T, key string, data []byte)
	del func(t *testing.T, key string)
}

// storeKind is one kind of Store under the suite.
type storeKind struct {
	name string
	// start starts the kind's server, if it has one, for t and what runs
	// under it, and returns how to make a fresh root of it by name.
	start func(t *testing.T) func(name string) storeRoot
	// versioned: its objects carry a Version (an ETag, a generation); a
	// directory's are pinned by size and modification time instead.
	versioned bool
}

var storeKinds = []storeKind{
	{name: "dir", start: startDirKind},
	{name: "s3", versioned: true, start: func(t *testing.T) func(string) storeRoot {
		s := storetest.StartS3(t, t.TempDir())
		s.CreateBucket(t, "bkt")
		setEnv(t, s.Env())
		return func(name string) storeRoot {
			return storeRoot{url: "s3://bkt/" + name,
				put: func(t *testing.T, key string, data []byte) { s.Put(t, "bkt", name+"/"+key, data) },
				del: func(t *testing.T, key string) { s.Delete(t, "bkt", name+"/"+key) }}
		}
	}},
	{name: "gcs", versioned: true, start: func(t *testing.T) func(string) storeRoot {
		g := storetest.StartGCS(t, t.TempDir())
		g.CreateBucket(t, "gb")
		setEnv(t, g.Env())
		return func(name string) storeRoot {
			return storeRoot{url: "gs://gb/" + name,
				put: func(t *testing.T, key string, data []byte) { g.Put(t, "gb", name+"/"+key, data) },
				del: func(t *testing.T, key string) { g.Delete(t, "gb", name+"/"+key) }}
		}
	}},
	// The LyingGCS, honest: what its lies are told against
	// (hostile_gcs_test.go) keeps every promise a Store makes of GCS.
	{name: "gcs-liar", versioned: true, start: func(t *testing.T) func(string) storeRoot {
		l := storetest.StartLyingGCS(t, "gb")
		setEnv(t, l.Env())
		return func(name string) storeRoot {
			return storeRoot{url: "gs://gb/" + name,
				put: func(t *testing.T, key string, data []byte) { l.Put(name+"/"+key, data) },
				del: func(t *testing.T, key string) { l.Delete(name + "/" + key) }}
		}
	}},
	{name: "azure", versioned: true, start: func(t *testing.T) func(string) storeRoot {
		a := storetest.StartAzure(t, t.TempDir())
		a.CreateContainer(t, "ctr")
		setEnv(t, a.Env())
		return func(name string) storeRoot {
			return storeRoot{url: "azblob://ctr/" + name,
				put: func(t *testing.T, key string, data []byte) { a.Put(t, "ctr", name+"/"+key, data) },
				del: func(t *testing.T, key string) { a.Delete(t, "ctr", name+"/"+key) }}
		}
	}},
}

// startDirKind: roots are folders of one temporary folder. Another
// writer's file gets a modification time of its own, later than any
// before (a clock tick apart, whatever the file system's granularity), so
// that a file rewritten at the same size is another file to the store.
func startDirKind(t *testing.T) func(string) storeRoot {
	base := t.TempDir()
	var mu sync.Mutex
	stamp := time.Now().Add(-time.Hour).Truncate(time.Second)
	return func(name string) storeRoot {
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return storeRoot{url: dir,
			put: func(t *testing.T, key string, data []byte) {
				t.Helper()
				p := filepath.Join(dir, key)
				if err := errors.Join(os.MkdirAll(filepath.Dir(p), 0o755), os.WriteFile(p, data, 0o644)); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				stamp = stamp.Add(time.Second)
				at := stamp
				mu.Unlock()
				if err := os.Chtimes(filepath.Join(dir, key), at, at); err != nil {
					t.Fatal(err)
				}
			},
			del: func(t *testing.T, key string) {
				t.Helper()
				if err := os.Remove(filepath.Join(dir, key)); err != nil {
					t.Fatal(err)
				}
			}}
	}
}

// setEnv sets each KEY=VALUE of env for the rest of t.
func setEnv(t *testing.T, env []string) {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// TestStoreConformance runs the suite against every kind of Store.
func TestStoreConformance(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			root := kind.start(t)
			for _, c := range []struct {
				name string
				test func(t *testing.T, kind storeKind, r storeRoot)
			}{
				{"listing", testListing},
				{"not-exist", testNotExist},
				{"changed", testChanged},
				{"ranges", testRanges},
				{"streaming", testStreaming},
				{"put", testPut},
			} {
				t.Run(c.name, func(t *testing.T) { c.test(t, kind, root(c.name)) })
			}
		})
	}
}

// openRoot opens the store at r, closed when the test ends.
func openRoot(t *testing.T, r storeRoot) source.Store {
	t.Helper()
	st, err := source.Open(t.Context(), r.url, source.WithPolicy(fastPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// putAll puts objs at r.
func putAll(t *testing.T, r storeRoot, objs map[string]string) {
	t.Helper()
	for k, v := range objs {
		r.put(t, k, []byte(v))
	}
}

// listKeys is what List(prefix) gives, in its order.
func listKeys(t *testing.T, st source.Store, prefix string) ([]string, map[string]source.Object) {
	t.Helper()
	var keys []string
	objs := map[string]source.Object{}
	if err := st.List(t.Context(), prefix, func(o source.Object) error {
		keys = append(keys, o.Key)
		objs[o.Key] = o
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys, objs
}

// stat is st.Stat(key), which must succeed.
func stat(t *testing.T, st source.Store, key string) source.Object {
	t.Helper()
	o, err := st.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("Stat(%q): %v", key, err)
	}
	return o
}

// testListing: keys in lexical order, relative to the root; keys with a
// component starting with a dot left out of listings but found by Stat;
// any prefix, not only a folder's; each object with its size and what
// pins it (a version, or a modification time), as Stat says too; an
// error from fn ends the listing and is returned.
func testListing(t *testing.T, kind storeKind, r storeRoot) {
	objs := map[string]string{"a.jpg": "a", "a/y.jpg": "ay", "b/x.jpg": "bx", "b.c/3.jpg": "b.c3",
		".stoker/manifest": "m", "a/._1.jpg": "x", "a/.cache/2.jpg": "2", "._top.tar": "t"}
	putAll(t, r, objs)
	st := openRoot(t, r)
	if s := st.String(); !strings.Contains(s, "listing") {
		t.Errorf("String() = %q, which does not name the root", s)
	}
	keys, listed := listKeys(t, st, "")
	// Lexical: "a.jpg" < "a/y.jpg" as '.' < '/'.
	if want := []string{"a.jpg", "a/y.jpg", "b.c/3.jpg", "b/x.jpg"}; !slices.Equal(keys, want) {
		t.Fatalf("List = %q, want %q", keys, want)
	}
	for _, k := range keys {
		o := listed[k]
		if o.Size != int64(len(objs[k])) {
			t.Errorf("%s listed at %d bytes, want %d", k, o.Size, len(objs[k]))
		}
		if kind.versioned && o.Version == "" || !kind.versioned && o.ModTime.IsZero() {
			t.Errorf("%s listed as %+v: nothing pins its version", k, o)
		}
		s := stat(t, st, k)
		if s.Key != o.Key || s.Size != o.Size || s.Version != o.Version || !kind.versioned && !s.ModTime.Equal(o.ModTime) {
			t.Errorf("Stat(%q) = %+v, listed %+v", k, s, o)
		}
	}
	for prefix, want := range map[string][]string{"a/": {"a/y.jpg"}, "b": {"b.c/3.jpg", "b/x.jpg"}, "nope/": nil, "a/.cache/": nil} {
		if got, _ := listKeys(t, st, prefix); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	if o := stat(t, st, ".stoker/manifest"); o.Size != 1 {
		t.Errorf("Stat(.stoker/manifest) = %+v", o)
	}
	errStop := errors.New("enough")
	calls := 0
	err := st.List(t.Context(), "", func(source.Object) error { calls++; return errStop })
	if !errors.Is(err, errStop) || calls != 1 {
		t.Errorf("List whose fn fails at once: %v after %d calls; want fn's error after 1", err, calls)
	}
}

// testNotExist: Stat of a missing key wraps ErrNotExist and names the
// key; a read or stream of an object that is not there (never was, or
// removed) wraps ErrChanged, and never presents bytes.
func testNotExist(t *testing.T, _ storeKind, r storeRoot) {
	putAll(t, r, map[string]string{"a/y.jpg": "ay", "gone.jpg": "abc"})
	st := openRoot(t, r)
	for _, key := range []string{"nope.jpg", "a/nope.jpg", "nope/a.jpg"} {
		_, err := st.Stat(t.Context(), key)
		if !errors.Is(err, source.ErrNotExist) || !strings.Contains(err.Error(), key) {
			t.Errorf("Stat(%q): %v; want source.ErrNotExist naming it", key, err)
		}
	}
	_, listed := listKeys(t, st, "")
	r.del(t, "gone.jpg")
	for _, obj := range []source.Object{listed["gone.jpg"], {Key: "never.jpg", Size: 3}} {
		checkChanged(t, st, obj)
	}
}

// checkChanged checks that obj, no longer what the store has, is refused
// by ReadRange and NewReader (or its first Read) with an error wrapping
// ErrChanged that names it.
func checkChanged(t *testing.T, st source.Store, obj source.Object) {
	t.Helper()
	err := st.ReadRange(t.Context(), obj, 0, make([]byte, obj.Size))
	if !errors.Is(err, source.ErrChanged) || !strings.Contains(err.Error(), obj.Key) {
		t.Errorf("ReadRange of %s, no longer as listed: %v; want source.ErrChanged naming it", obj.Key, err)
	}
	rd, err := st.NewReader(t.Context(), obj, 0)
	if err == nil {
		var got []byte
		got, err = io.ReadAll(rd)
		rd.Close()
		if err == nil {
			t.Errorf("NewReader of %s, no longer as listed: read %q", obj.Key, got)
			return
		}
	}
	if !errors.Is(err, source.ErrChanged) {
		t.Errorf("NewReader of %s, no longer as listed: %v; want ErrChanged", obj.Key, err)
	}
}

// testChanged: an object replaced after it was listed (at the same size:
// its version, or its modification time, tells), or at another size, is
// refused when read as listed; read as it is now (Stat again), the new
// bytes come back.
func testChanged(t *testing.T, _ storeKind, r storeRoot) {
	putAll(t, r, map[string]string{"same.jpg": "abc", "size.jpg": "abc"})
	st := openRoot(t, r)
	_, listed := listKeys(t, st, "")
	r.put(t, "same.jpg", []byte("xyz"))
	r.put(t, "size.jpg", []byte("abcd"))
	for _, k := range []string{"same.jpg", "size.jpg"} {
		checkChanged(t, st, listed[k])
	}
	now := stat(t, st, "same.jpg")
	got := make([]byte, 3)
	if err := st.ReadRange(t.Context(), now, 0, got); err != nil || string(got) != "xyz" {
		t.Errorf("same.jpg read as it is now: %q, %v; want xyz", got, err)
	}
}

// testRanges: any range inside an object reads its bytes, from many
// goroutines at once; an empty one reads nothing, even at the end; one
// reaching outside the object is an error.
func testRanges(t *testing.T, _ storeKind, r storeRoot) {
	big := randomBytes(1<<20+7, 1)
	r.put(t, "big.bin", big)
	st := openRoot(t, r)
	obj := stat(t, st, "big.bin")
	size := int64(len(big))
	ranges := [][2]int64{{0, 1}, {0, size}, {size - 1, 1}, {12345, 100000}, {size / 2, size/2 - 1}, {size, 0}, {0, 0}}
	rng := rand.New(rand.NewPCG(2, 3))
	for range 24 {
		off := rng.Int64N(size)
		ranges = append(ranges, [2]int64{off, rng.Int64N(size - off + 1)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ranges))
	for _, rg := range ranges {
		wg.Go(func() {
			p := make([]byte, rg[1])
			if err := st.ReadRange(t.Context(), obj, rg[0], p); err != nil {
				errs <- fmt.Errorf("[%d, +%d): %w", rg[0], rg[1], err)
			} else if !bytes.Equal(p, big[rg[0]:rg[0]+rg[1]]) {
				errs <- fmt.Errorf("[%d, +%d): wrong bytes", rg[0], rg[1])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, rg := range [][2]int64{{size - 1, 2}, {size, 1}, {-1, 1}, {size + 10, 1}} {
		if err := st.ReadRange(t.Context(), obj, rg[0], make([]byte, rg[1])); err == nil {
			t.Errorf("[%d, +%d) of a %d-byte object was read", rg[0], rg[1], size)
		}
	}
}

// testStreaming: a stream reads the object from its offset to its end,
// whatever the sizes of the reads (iotest.TestReader).
func testStreaming(t *testing.T, _ storeKind, r storeRoot) {
	big, small := randomBytes(1<<20+7, 4), randomBytes(5000, 5)
	r.put(t, "big.tar", big)
	r.put(t, "small.tar", small)
	st := openRoot(t, r)
	for _, c := range []struct {
		key  string
		data []byte
		off  int64
	}{{"big.tar", big, 0}, {"big.tar", big, 777}, {"small.tar", small, 0}, {"small.tar", small, 4999}} {
		rd, err := st.NewReader(t.Context(), stat(t, st, c.key), c.off)
		if err != nil {
			t.Fatalf("NewReader(%s, %d): %v", c.key, c.off, err)
		}
		if c.key == "small.tar" {
			err = iotest.TestReader(rd, c.data[c.off:])
		} else if got, rerr := io.ReadAll(rd); rerr != nil || !bytes.Equal(got, c.data[c.off:]) {
			err = fmt.Errorf("read %d bytes, %v; want the %d from the offset", len(got), rerr, len(c.data)-int(c.off))
		}
		if cerr := rd.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			t.Errorf("stream of %s from %d: %v", c.key, c.off, err)
		}
	}
}

// testPut: what Put writes, Stat finds and a read gives back, and a
// listing lists unless hidden; a second Put replaces it, and the object
// as it was is refused from then on.
func testPut(t *testing.T, _ storeKind, r storeRoot) {
	st := openRoot(t, r)
	first, second := randomBytes(3000, 6), randomBytes(2000, 7)
	if err := st.Put(t.Context(), "p/new.bin", first); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), ".stoker/m2", []byte("m")); err != nil {
		t.Fatal(err)
	}
	obj := stat(t, st, "p/new.bin")
	got := make([]byte, obj.Size)
	if err := st.ReadRange(t.Context(), obj, 0, got); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("Put %d bytes, Stat says %d, read back %v (equal: %v)", len(first), obj.Size, err, bytes.Equal(got, first))
	}
	if keys, _ := listKeys(t, st, ""); !slices.Equal(keys, []string{"p/new.bin"}) {
		t.Errorf("listed after Put: %q, want [p/new.bin]", keys)
	}
	if o := stat(t, st, ".stoker/m2"); o.Size != 1 {
		t.Errorf("Stat(.stoker/m2) after Put = %+v", o)
	}
	if err := st.Put(t.Context(), "p/new.bin", second); err != nil {
		t.Fatal(err)
	}
	checkChanged(t, st, obj)
	now := stat(t, st, "p/new.bin")
	got = make([]byte, now.Size)
	if err := st.ReadRange(t.Context(), now, 0, got); err != nil || !bytes.Equal(got, second) {
		t.Errorf("replaced by Put: %d bytes, %v; want the second Put's %d", now.Size, err, len(second))
	}
}

// randomBytes is n bytes of a fixed random stream, by seed.
func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
