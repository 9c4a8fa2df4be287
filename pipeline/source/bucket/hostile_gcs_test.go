package bucket

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"
	"google.golang.org/api/option"

	"github.com/stoker-dev/stoker/internal/storetest"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// What a GCS that lies gets from a client, as hostile_s3_test.go's S3: a
// LyingGCS on loopback, honest until told otherwise, each lie refused
// with an error naming the store's fault (or, for another generation's
// bytes, ErrChanged), never a panic, never another object's bytes, never
// unbounded memory.

// gcsLiarEnv starts a LyingGCS holding objs under "data/" and points
// Google's client at it (STORAGE_EMULATOR_HOST).
func gcsLiarEnv(t *testing.T, objs map[string][]byte) *storetest.LyingGCS {
	t.Helper()
	s := storetest.StartLyingGCS(t, "gb")
	for k, v := range objs {
		s.Put("data/"+k, v)
	}
	setEnv(t, s.Env())
	return s
}

func openGCSLiar(t *testing.T) source.Store {
	t.Helper()
	st, err := source.Open(t.Context(), "gs://gb/data", source.WithPolicy(fastPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestGCSLiarBodiesBounded: a listing page with one name of 256 MiB, or
// padded to 256 MiB, and an object's metadata padded the same, are
// refused once their body passes the bound, before the JSON decoder sees
// any of it: at Open's probe, at a later listing and at a Stat alike.
// What each allocates is bounded by the bound, not by the body.
func TestGCSLiarBodiesBounded(t *testing.T) {
	s := gcsLiarEnv(t, map[string][]byte{"a/1.jpg": []byte("one")})
	st := openGCSLiar(t)
	for _, lies := range []storetest.GCSLies{
		{LongNames: 1, LongNameBytes: 256 << 20},
		{Padding: 256 << 20},
	} {
		s.SetLies(lies)
		var err error
		n := allocated(func() { err = st.List(t.Context(), "", func(source.Object) error { return nil }) })
		storeFault(t, "List", err, "listing", "bytes")
		if n > 4*maxListBody {
			t.Errorf("%+v: the listing allocated %d MiB", lies, n>>20)
		}
		n = allocated(func() { _, err = source.Open(t.Context(), "gs://gb/data", source.WithPolicy(fastPolicy())) })
		storeFault(t, "Open", err, "listing")
		if n > 4*maxListBody {
			t.Errorf("%+v: source.Open allocated %d MiB", lies, n>>20)
		}
	}
	s.SetLies(storetest.GCSLies{Padding: 256 << 20})
	var err error
	n := allocated(func() { _, err = st.Stat(t.Context(), "a/1.jpg") })
	storeFault(t, "Stat", err, "bytes")
	if n > 4*maxListBody {
		t.Errorf("Stat allocated %d MiB", n>>20)
	}
}

// TestGCSLiarNameLimit: names over GCS's 1 KiB limit are refused at
// listing, counted, as S3's keys are.
func TestGCSLiarNameLimit(t *testing.T) {
	s := gcsLiarEnv(t, map[string][]byte{"a/1.jpg": []byte("one")})
	st := openGCSLiar(t)
	s.SetLies(storetest.GCSLies{LongNames: 20, LongNameBytes: 2048})
	err := st.List(t.Context(), "", func(o source.Object) error {
		if len(o.Key) > source.MaxKeyBytes {
			t.Errorf("listed a name of %d bytes", len(o.Key))
		}
		return nil
	})
	storeFault(t, "List", err, "20 keys", "1024")
}

// TestGCSLiarListingEntries: an entry without its generation (what a read
// asks for) or its updated time is malformed, refused at Open and at
// listing; before, it was listed as version "0" (or at the zero time).
func TestGCSLiarListingEntries(t *testing.T) {
	s := gcsLiarEnv(t, map[string][]byte{"a/1.jpg": []byte("one")})
	st := openGCSLiar(t)
	for _, tc := range []struct {
		lies storetest.GCSLies
		says string
	}{
		{storetest.GCSLies{NoGeneration: true}, "no generation"},
		{storetest.GCSLies{NoUpdated: true}, "no updated time"},
	} {
		s.SetLies(tc.lies)
		err := st.List(t.Context(), "", func(o source.Object) error {
			t.Errorf("%+v: listed %+v", tc.lies, o)
			return nil
		})
		storeFault(t, "List", err, tc.says)
		_, err = source.Open(t.Context(), "gs://gb/data", source.WithPolicy(fastPolicy()))
		storeFault(t, "Open", err, tc.says)
		_, err = st.Stat(t.Context(), "a/1.jpg")
		storeFault(t, "Stat", err, tc.says)
	}
}

// TestGCSLiarRangeIgnored: a ranged read answered 200 with the whole
// object is the store's fault (before, the Google client's own "partial
// request not satisfied", which named no one, or from byte 0 the whole
// object's bytes for the range's), nothing is cached, and once the store
// is honest again the same read gives the right bytes.
func TestGCSLiarRangeIgnored(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	s := gcsLiarEnv(t, map[string][]byte{"s.tar": data})
	st := openGCSLiar(t)
	obj := listAll(t, st)["s.tar"]
	c, err := source.NewCache(source.WithMemory(1<<20), source.WithDisk(t.TempDir(), 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	f := source.NewFetcher(st, source.WithCache(c))
	defer f.Close()
	r := source.Range{Obj: obj, Off: 10, Len: 5}

	s.SetLies(storetest.GCSLies{IgnoreRange: true})
	got, err := f.Read(t.Context(), r, nil)
	storeFault(t, "Read", err, "whole object")
	if err == nil {
		t.Errorf("read %q for bytes [10, 15) of %q", got, data)
	}
	p := make([]byte, 5)
	storeFault(t, "ReadRange from 0", st.ReadRange(t.Context(), obj, 0, p), "whole object")
	if rc, err := st.NewReader(t.Context(), obj, 4); err == nil {
		b := new(bytes.Buffer)
		_, err = b.ReadFrom(rc)
		rc.Close()
		t.Errorf("NewReader from 4: %q, %v", b, err)
	} else {
		storeFault(t, "NewReader", err, "whole object")
	}
	if st := c.Stats(); st.MemoryRanges+st.DiskRanges != 0 {
		t.Errorf("cached %+v", st)
	}

	s.SetLies(storetest.GCSLies{})
	got, err = f.Read(t.Context(), r, nil)
	if err != nil || string(got) != "abcde" {
		t.Fatalf("honest again: %q, %v", got, err)
	}
	// The whole object asked for as a range may come whole: that is the
	// range.
	s.SetLies(storetest.GCSLies{IgnoreRange: true})
	whole := make([]byte, len(data))
	if err := st.ReadRange(t.Context(), obj, 0, whole); err != nil || !bytes.Equal(whole, data) {
		t.Errorf("the whole object as 200: %q, %v", whole, err)
	}
}

// TestGCSLiarGeneration: a read asks for the generation the object was
// listed with (before, the generation was never sent: the client's
// precondition hook was given the wrong type), and an answer is held to
// it: another generation served for it (a store that ignores the
// generation asked for) is ErrChanged, an answer without one is the
// store's fault (before: ErrChanged, "version -1").
func TestGCSLiarGeneration(t *testing.T) {
	s := gcsLiarEnv(t, map[string][]byte{"a.jpg": []byte("old bytes")})
	st := openGCSLiar(t)
	obj := listAll(t, st)["a.jpg"]
	p := make([]byte, obj.Size)
	if err := st.ReadRange(t.Context(), obj, 0, p); err != nil || string(p) != "old bytes" {
		t.Fatalf("honest: %q, %v", p, err)
	}
	if n := s.Stats().GenerationGets; n != 1 {
		t.Errorf("%d reads asked for a generation, want 1", n)
	}

	s.Put("data/a.jpg", []byte("new bytes")) // the same size, another generation
	if err := st.ReadRange(t.Context(), obj, 0, p); !errors.Is(err, source.ErrChanged) {
		t.Errorf("honest, replaced: %q, %v: want ErrChanged", p, err)
	}
	s.SetLies(storetest.GCSLies{IgnoreGeneration: true})
	err := st.ReadRange(t.Context(), obj, 0, p)
	if !errors.Is(err, source.ErrChanged) {
		t.Errorf("generation ignored: %q, %v: want ErrChanged", p, err)
	}
	t.Logf("generation ignored: %v", err)

	s.SetLies(storetest.GCSLies{NoGeneration: true})
	err = st.ReadRange(t.Context(), obj, 0, p)
	storeFault(t, "ReadRange", err, "generation")
	if rc, err := st.NewReader(t.Context(), obj, 0); err == nil {
		rc.Close()
		t.Error("NewReader of an answer without its generation")
	} else {
		storeFault(t, "NewReader", err, "generation")
	}
}

// TestGCSLiarRedirect: a redirect to another host was followed (by Go's
// default client, and with credentials by the token's transport, which
// signs whatever it sends); now none is, and the other host hears
// nothing.
func TestGCSLiarRedirect(t *testing.T) {
	var other atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	s := gcsLiarEnv(t, map[string][]byte{"a.jpg": []byte("bytes")})
	st := openGCSLiar(t)
	obj := listAll(t, st)["a.jpg"]

	s.SetLies(storetest.GCSLies{RedirectTo: elsewhere.URL})
	storeFault(t, "ReadRange", st.ReadRange(t.Context(), obj, 0, make([]byte, obj.Size)), "redirect")
	_, err := st.Stat(t.Context(), "a.jpg")
	storeFault(t, "Stat", err, "redirect")
	storeFault(t, "List", st.List(t.Context(), "", func(source.Object) error { return nil }), "redirect")
	_, err = source.Open(t.Context(), "gs://gb/data", source.WithPolicy(fastPolicy()))
	storeFault(t, "Open", err, "redirect")
	if n := other.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}

// TestGCSRedirectKeepsToken: with credentials, the token's transport
// signs every request it sends, a redirected one included (Go's client
// strips the Authorization header it copies, not the one the transport
// adds): a store that redirects to another host would have had the
// token. The guarded client sends it to the store and never elsewhere.
func TestGCSRedirectKeepsToken(t *testing.T) {
	var other, signed atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		if r.Header.Get("Authorization") != "" {
			signed.Add(1)
		}
	}))
	defer elsewhere.Close()
	s := storetest.StartLyingGCS(t, "gb")
	s.Put("a.jpg", []byte("bytes"))
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	c, err := gcsClient(t.Context(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "s3cr3t"}),
		option.WithEndpoint(s.Endpoint+"/storage/v1/"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.Bucket("gb").Object("a.jpg")
	if _, err := o.Attrs(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Authorized; n != 1 {
		t.Fatalf("the store got %d signed requests, want 1", n)
	}

	s.SetLies(storetest.GCSLies{RedirectTo: elsewhere.URL})
	_, err = o.Attrs(t.Context())
	storeFault(t, "Attrs", err, "redirect")
	_, err = o.NewRangeReader(t.Context(), 0, 2)
	storeFault(t, "NewRangeReader", err, "redirect")
	if n, m := other.Load(), signed.Load(); n != 0 || m != 0 {
		t.Errorf("the other host got %d requests, %d with the token", n, m)
	}
}

// TestGCSNoCredentials: without an emulator, credentials that cannot be
// read fail Open at once, saying which setting and what to set, and as
// ErrDenied (before, gocloud printed a warning to stdout and went on with
// none).
func TestGCSNoCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
	_, err := source.Open(t.Context(), "gs://gb/data", source.WithPolicy(fastPolicy()))
	if !errors.Is(err, source.ErrDenied) || !strings.Contains(err.Error(), "GOOGLE_APPLICATION_CREDENTIALS") {
		t.Errorf("Open: %v, want source.ErrDenied naming GOOGLE_APPLICATION_CREDENTIALS", err)
	}
	t.Log(err)
}
