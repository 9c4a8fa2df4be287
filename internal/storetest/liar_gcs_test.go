package storetest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/stoker-dev/stoker/internal/storetest"
)

// gcsClient is Google's storage client for the GCS at endpoint, with no
// credentials and no retries.
func gcsClient(t *testing.T, endpoint string) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(ctx(t), option.WithEndpoint(endpoint+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	c.SetRetry(storage.WithPolicy(storage.RetryNever))
	t.Cleanup(func() { c.Close() })
	return c
}

// gcsSession is what Google's client makes of one store after the same
// puts, reads and writes: what TestLyingGCSHonest compares between
// fake-gcs-server and an honest LyingGCS.
type gcsSession struct {
	Pages    [][]string // names, page by page (pages of 2)
	Listed   []string   // "name size md5 crc32c" of each, all set
	Attrs    string     // one object's, all set
	Range    string     // bytes [2, 6) of it, at its generation
	RangeAt  string     // what the reader says: start, size, remain, generation
	Whole    string     // all of it (the client checks its CRC)
	Stale    string     // a read of a generation since replaced
	Missing  string     // a read of no object
	Written  string     // an object written through the client, read back
	Replaced bool       // the replacement got another generation
}

// gcsExercise puts objects with put, then lists, reads and writes them
// through c as stoker's GCS store does.
func gcsExercise(t *testing.T, c *storage.Client, bucket string, put func(name string, data []byte) storetest.GCSObject) gcsSession {
	t.Helper()
	var s gcsSession
	first := put("d/a.jpg", []byte("0123456789"))
	put("d/b.jpg", []byte("bee"))
	put("d/c/d.jpg", []byte("sea and dee"))
	put("e/x", []byte("not under d/"))
	b := c.Bucket(bucket)

	pager := iterator.NewPager(b.Objects(ctx(t), &storage.Query{Prefix: "d/"}), 2, "")
	for {
		var page []*storage.ObjectAttrs
		next, err := pager.NextPage(&page)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range page {
			names = append(names, a.Name)
			set := a.Generation > 0 && !a.Updated.IsZero() && a.Metageneration == 1
			s.Listed = append(s.Listed, fmt.Sprintf("%s %d %x %d %t", a.Name, a.Size, a.MD5, a.CRC32C, set))
		}
		s.Pages = append(s.Pages, names)
		if next == "" {
			break
		}
	}

	a, err := b.Object("d/a.jpg").Attrs(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Attrs = fmt.Sprintf("%s %d %x %t %t", a.Name, a.Size, a.MD5, a.Generation == first.Generation, !a.Updated.IsZero())

	o := b.Object("d/a.jpg").Generation(first.Generation)
	r, err := o.NewRangeReader(ctx(t), 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	s.RangeAt = fmt.Sprintf("start %d size %d remain %d generation %t", r.Attrs.StartOffset, r.Attrs.Size, r.Remain(),
		r.Attrs.Generation == first.Generation)
	data, err := io.ReadAll(r)
	r.Close()
	s.Range = fmt.Sprintf("%q %v", data, err)
	r, err = o.NewReader(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	data, err = io.ReadAll(r)
	r.Close()
	s.Whole = fmt.Sprintf("%q %v", data, err)

	again := put("d/a.jpg", []byte("9876543210"))
	s.Replaced = again.Generation != first.Generation
	_, err = o.NewRangeReader(ctx(t), 2, 4)
	s.Stale = fmt.Sprint(errors.Is(err, storage.ErrObjectNotExist))
	_, err = b.Object("d/none").NewRangeReader(ctx(t), 0, 1)
	s.Missing = fmt.Sprint(errors.Is(err, storage.ErrObjectNotExist))

	w := b.Object("d/w").NewWriter(ctx(t))
	io.WriteString(w, "written")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = b.Object("d/w").Generation(w.Attrs().Generation).NewRangeReader(ctx(t), 1, -1)
	if err != nil {
		t.Fatal(err)
	}
	data, err = io.ReadAll(r)
	r.Close()
	s.Written = fmt.Sprintf("%q %v", data, err)
	return s
}

// TestLyingGCSHonest: with no lies, Google's client lists (in pages),
// reads the metadata of, reads ranges of (at a generation), reads whole
// (its CRC checked) and writes objects of a LyingGCS as it does
// fake-gcs-server's, and a generation replaced is gone from both.
func TestLyingGCSHonest(t *testing.T) {
	g := storetest.StartGCS(t, t.TempDir())
	g.CreateBucket(t, "gb")
	want := gcsExercise(t, gcsClient(t, g.Endpoint), "gb", func(name string, data []byte) storetest.GCSObject {
		return g.Put(t, "gb", name, data)
	})
	l := storetest.StartLyingGCS(t, "gb")
	got := gcsExercise(t, gcsClient(t, l.Endpoint), "gb", l.Put)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the LyingGCS, honest:\n%+v\nfake-gcs-server:\n%+v", got, want)
	}
	t.Logf("%+v", got)
	if want.Range != `"2345" <nil>` || want.RangeAt != "start 2 size 10 remain 4 generation true" || want.Stale != "true" ||
		want.Written != `"ritten" <nil>` || !want.Replaced || len(want.Pages) != 2 {
		t.Errorf("fake-gcs-server: %+v", want)
	}
	if st := l.Stats(); st.Lists != 2 || st.Metas != 1 || st.Puts != 1 || st.GenerationGets != 4 {
		t.Errorf("stats %+v", st)
	}
}

// TestLyingGCSLies: each lie is told as its doc says.
func TestLyingGCSLies(t *testing.T) {
	l := storetest.StartLyingGCS(t, "gb")
	first := l.Put("a", []byte("0123456789"))
	l.Put("a", []byte("abcdefghij"))

	l.SetLies(storetest.GCSLies{IgnoreRange: true, IgnoreGeneration: true})
	resp, body := rawGet(t, l.Endpoint+fmt.Sprintf("/gb/a?generation=%d", first.Generation), "bytes=2-5")
	if resp.StatusCode != http.StatusOK || body != "abcdefghij" || resp.Header.Get("Content-Range") != "" ||
		resp.Header.Get("X-Goog-Generation") != fmt.Sprint(first.Generation+1) {
		t.Errorf("ignored range and generation: %s %q %v", resp.Status, body, resp.Header)
	}
	l.SetLies(storetest.GCSLies{NoGeneration: true})
	resp, body = rawGet(t, l.Endpoint+fmt.Sprintf("/gb/a?generation=%d", first.Generation), "bytes=2-5")
	if resp.StatusCode != http.StatusPartialContent || body != "cdef" || resp.Header.Get("X-Goog-Generation") != "" {
		t.Errorf("no generation: %s %q %v", resp.Status, body, resp.Header)
	}

	l.SetLies(storetest.GCSLies{NoGeneration: true, NoUpdated: true, LongNames: 2, LongNameBytes: 3000, Padding: 5000})
	_, body = rawGet(t, l.Endpoint+"/storage/v1/b/gb/o?alt=json", "")
	if strings.Count(body, `"name"`) != 3 || strings.Count(body, `"generation"`) != 2 || strings.Count(body, `"updated"`) != 2 ||
		len(body) < 11000 {
		t.Errorf("listing of %d bytes: %.300s", len(body), body)
	}
	_, body = rawGet(t, l.Endpoint+"/storage/v1/b/gb/o/a?alt=json", "")
	if !strings.Contains(body, `"name":"a"`) || strings.Contains(body, `"generation"`) || len(body) < 5000 {
		t.Errorf("metadata of %d bytes: %.300s", len(body), strings.TrimSpace(body))
	}

	l.SetLies(storetest.GCSLies{RedirectTo: "http://elsewhere.invalid"})
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, l.Endpoint+"/gb/a?generation=1", nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "http://elsewhere.invalid/gb/a?generation=1" {
		t.Errorf("redirect: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
}

// rawGet GETs url with rng as its Range (if any) and returns the answer
// and its body.
func rawGet(t *testing.T, url, rng string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, url, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}
