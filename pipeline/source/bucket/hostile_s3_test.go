package bucket

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// What a store that lies gets from a client (issue 38): a LyingS3 on
// loopback, honest until told otherwise, each lie refused with an error
// naming the store's fault (IsStoreFault), never a panic, never another
// object's bytes, never unbounded memory.

// liarEnv starts a LyingS3 holding objs under "data/" and points the AWS
// SDK's standard variables at it.
func liarEnv(t *testing.T, objs map[string][]byte) *storetest.LyingS3 {
	t.Helper()
	s := storetest.StartLyingS3(t, "bkt")
	for k, v := range objs {
		s.Put("data/"+k, v)
	}
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return s
}

func openLiar(t *testing.T) source.Store {
	t.Helper()
	st, err := source.Open(t.Context(), "s3://bkt/data", source.WithPolicy(fastPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// storeFault fails t unless err is the store's fault, wrapping
// ErrProtocol, and says what it must say.
func storeFault(t *testing.T, what string, err error, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if !errors.Is(err, source.ErrProtocol) || !source.IsStoreFault(err) {
		t.Errorf("%s: %v: want the store's fault (source.ErrProtocol)", what, err)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %v: want it to say %q", what, err, s)
		}
	}
	if len(err.Error()) > 2048 {
		t.Errorf("%s: a message of %d bytes", what, len(err.Error()))
	}
	t.Logf("%s: %v", what, err)
}

// allocated runs f and returns the bytes it allocated (every goroutine's:
// the SDK's too).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestLiarListingBodyBounded: a listing page with one key of 256 MiB (the
// issue's was 2 GB: 16 GiB of RSS, then a panic) is refused once its body
// passes the listing limit, before the SDK's XML parser sees any of it:
// at Open's probe and at a later listing alike. What it allocates is
// bounded by the limit (pieces of it, joined: about twice it), not by the
// body.
func TestLiarListingBodyBounded(t *testing.T) {
	s := liarEnv(t, map[string][]byte{"a/1.jpg": []byte("one")})
	st := openLiar(t)
	for _, lies := range []storetest.Lies{
		{LongKeys: 1, LongKeyBytes: 256 << 20},
		{ListPadding: 256 << 20},
	} {
		s.SetLies(lies)
		var err error
		n := allocated(func() { err = st.List(t.Context(), "", func(source.Object) error { return nil }) })
		storeFault(t, "List", err, "listing", "bytes")
		t.Logf("the listing allocated %d MiB", n>>20)
		if n > 4*maxListBody {
			t.Errorf("%+v: the listing allocated %d MiB", lies, n>>20)
		}
		n = allocated(func() { _, err = source.Open(t.Context(), "s3://bkt/data", source.WithPolicy(fastPolicy())) })
		storeFault(t, "Open", err, "listing")
		if n > 4*maxListBody {
			t.Errorf("%+v: source.Open allocated %d MiB", lies, n>>20)
		}
	}
}

// TestLiarListingKeyLimit: keys over S3's 1 KiB limit are refused at
// listing, counted (the issue: twenty 10 MB keys, then per-sample errors
// of 30 MB).
func TestLiarListingKeyLimit(t *testing.T) {
	s := liarEnv(t, map[string][]byte{"a/1.jpg": []byte("one")})
	st := openLiar(t)
	s.SetLies(storetest.Lies{LongKeys: 20, LongKeyBytes: 2048})
	var seen int
	err := st.List(t.Context(), "", func(o source.Object) error {
		seen++
		if len(o.Key) > source.MaxKeyBytes {
			t.Errorf("listed a key of %d bytes", len(o.Key))
		}
		return nil
	})
	storeFault(t, "List", err, "20 keys", "1024")
}

// TestLiarListingNoLastModified: an entry without <LastModified> made
// gocloud's s3blob dereference nil (a panic of index and serve); now it is
// an error naming the store's answer.
func TestLiarListingNoLastModified(t *testing.T) {
	s := liarEnv(t, map[string][]byte{"a/1.jpg": []byte("one")})
	st := openLiar(t)
	s.SetLies(storetest.Lies{NoLastModified: true})
	err := st.List(t.Context(), "", func(source.Object) error { return nil })
	storeFault(t, "List", err, "malformed")
	_, err = source.Open(t.Context(), "s3://bkt/data", source.WithPolicy(fastPolicy()))
	storeFault(t, "Open", err, "malformed")
}

// TestLiarRangeIgnored: a ranged GET answered 200 with the whole object
// was taken as the range (1,200/1,200 samples "corrupt", and cached); now
// it is the store's fault, nothing is cached, and once the store is
// honest again the same read gives the right bytes.
func TestLiarRangeIgnored(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	s := liarEnv(t, map[string][]byte{"s.tar": data})
	st := openLiar(t)
	obj := listAll(t, st)["s.tar"]
	c, err := source.NewCache(source.WithMemory(1<<20), source.WithDisk(t.TempDir(), 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	f := source.NewFetcher(st, source.WithCache(c))
	defer f.Close()
	r := source.Range{Obj: obj, Off: 10, Len: 5}

	s.SetLies(storetest.Lies{IgnoreRange: true})
	got, err := f.Read(t.Context(), r, nil)
	storeFault(t, "Read", err, "Content-Range")
	if err == nil {
		t.Errorf("read %q for bytes [10, 15) of %q", got, data)
	}
	p := make([]byte, 5)
	storeFault(t, "ReadRange", st.ReadRange(t.Context(), obj, 10, p))
	if rc, err := st.NewReader(t.Context(), obj, 4); err == nil {
		b := new(bytes.Buffer)
		_, err = b.ReadFrom(rc)
		rc.Close()
		if err == nil {
			t.Errorf("NewReader from 4: %q", b)
		}
	}
	if st := c.Stats(); st.MemoryRanges+st.DiskRanges != 0 {
		t.Errorf("cached %+v", st)
	}

	s.SetLies(storetest.Lies{})
	got, err = f.Read(t.Context(), r, nil)
	if err != nil || string(got) != "abcde" {
		t.Fatalf("honest again: %q, %v", got, err)
	}
	// The whole object asked for as a range may come whole: that is the
	// range.
	s.SetLies(storetest.Lies{IgnoreRange: true})
	whole := make([]byte, len(data))
	if err := st.ReadRange(t.Context(), obj, 0, whole); err != nil || !bytes.Equal(whole, data) {
		t.Errorf("the whole object as 200: %q, %v", whole, err)
	}
}

// TestLiarNoETag: a store that drops ETags and ignores If-Match slipped in
// the bytes of an object replaced since it was listed (152 wrong samples
// mid-run); a GET answer without a version is now refused.
func TestLiarNoETag(t *testing.T) {
	s := liarEnv(t, map[string][]byte{"a.jpg": []byte("old bytes")})
	st := openLiar(t)
	obj := listAll(t, st)["a.jpg"]
	s.Put("data/a.jpg", []byte("new bytes")) // the same size, another version

	p := make([]byte, obj.Size)
	s.SetLies(storetest.Lies{IgnoreIfMatch: true}) // with its ETag: held before
	if err := st.ReadRange(t.Context(), obj, 0, p); !errors.Is(err, source.ErrChanged) {
		t.Errorf("If-Match ignored: %q, %v: want ErrChanged", p, err)
	}
	s.SetLies(storetest.Lies{NoETag: true})
	err := st.ReadRange(t.Context(), obj, 0, p)
	storeFault(t, "ReadRange", err, "ETag")
	if err == nil {
		t.Errorf("read %q as %s's indexed version", p, obj.Key)
	}
	// A version listed, then none given: refused the same through the
	// stream reader.
	if rc, err := st.NewReader(t.Context(), obj, 0); err == nil {
		rc.Close()
		t.Error("NewReader of an answer without its version")
	} else {
		storeFault(t, "NewReader", err, "ETag")
	}
}

// TestLiarRedirect: a store's redirect to another host was followed
// (credentials stripped); now none is, and the other host hears nothing.
func TestLiarRedirect(t *testing.T) {
	var other atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	s := liarEnv(t, map[string][]byte{"a.jpg": []byte("bytes")})
	st := openLiar(t)
	obj := listAll(t, st)["a.jpg"]

	s.SetLies(storetest.Lies{RedirectTo: elsewhere.URL})
	storeFault(t, "ReadRange", st.ReadRange(t.Context(), obj, 0, make([]byte, obj.Size)), "redirect")
	_, err := st.Stat(t.Context(), "a.jpg")
	storeFault(t, "Stat", err, "redirect")
	_, err = source.Open(t.Context(), "s3://bkt/data", source.WithPolicy(fastPolicy()))
	storeFault(t, "Open", err, "redirect")
	if n := other.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}

// TestLiarMessagesNameTheCause (issue 47): a GET whose body never ends
// (no length declared, bytes for ever) was reported as the object changed
// ("the manifest is stale"), and a listing that is not XML was retried six
// times and reported as a store that cannot be reached. Each is the
// store's protocol broken, said as such, at once.
func TestLiarMessagesNameTheCause(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 4096)
	s := liarEnv(t, map[string][]byte{"a.bin": data})
	st := openLiar(t)
	obj, err := st.Stat(t.Context(), "a.bin")
	if err != nil {
		t.Fatal(err)
	}

	for _, r := range [][2]int64{{100, 1000}, {0, int64(len(data))}} { // a range, the whole object
		// With its Content-Range, and without (a 200 of the whole object).
		s.SetLies(storetest.Lies{EndlessGET: true, IgnoreRange: r[0] == 0})
		before := s.Stats().Gets
		err = st.ReadRange(t.Context(), obj, r[0], make([]byte, r[1]))
		storeFault(t, fmt.Sprintf("an endless GET body, bytes [%d, +%d)", r[0], r[1]), err, "declares no length")
		if errors.Is(err, source.ErrChanged) || strings.Contains(err.Error(), "changed") {
			t.Errorf("an endless GET body: %v: reported as the object changed", err)
		}
		if n := s.Stats().Gets - before; n != 1 {
			t.Errorf("an endless GET body: %d GETs, want 1 (the store's fault is not retried)", n)
		}
	}

	for body, says := range map[string]string{
		"<!DOCTYPE html>\n<html><body>Please log in to the network</body></html>\n": "whose XML is <html>, not <ListBucketResult>",
		"503 upstream connect error or disconnect/reset before headers\n":           "not XML",
		"": "", // (the zero Lies: honest)
	} {
		if body == "" {
			continue
		}
		s.SetLies(storetest.Lies{ListBody: body})
		before := s.Stats().Lists
		err = st.List(t.Context(), "", func(source.Object) error { return nil })
		storeFault(t, "a listing that is not XML", err, says, `it begins "`+body[:9])
		if errors.Is(err, source.ErrUnavailable) {
			t.Errorf("a listing that is not XML: %v: reported as a store that cannot be reached", err)
		}
		if n := s.Stats().Lists - before; n != 1 {
			t.Errorf("a listing that is not XML: %d listings, want 1 (not retried)", n)
		}
	}

	s.SetLies(storetest.Lies{})
	if err := st.ReadRange(t.Context(), obj, 100, make([]byte, 1000)); err != nil {
		t.Errorf("honest again: %v", err)
	}
}
