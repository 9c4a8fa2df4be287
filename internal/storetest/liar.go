package storetest

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LyingS3 is an S3-compatible server of this process on a loopback port
// that speaks just enough S3 to lie: ListObjectsV2, HeadObject, GetObject
// (ranges, If-Match) and PutObject of one bucket's objects, kept in
// memory, path-style, any credentials accepted. Its Lies say how it lies;
// the zero Lies answer as S3 does, so a test can start honest, lie, and
// be honest again (SetLies).
//
// It is what a hostile or broken store can do to a client, not a model of
// S3: TestLyingS3Honest checks that the AWS SDK reads its honest answers
// as S3's.
type LyingS3 struct {
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint string
	// Bucket is the one bucket it serves.
	Bucket string

	srv *http.Server

	mu   sync.Mutex
	objs map[string]lyingObject
	lies Lies

	lists, heads, gets, puts, redirects atomic.Int64
}

// Lies are what a LyingS3 does wrong. Each applies from the next request.
type Lies struct {
	// LongKeys adds this many entries to the first page of every listing,
	// each with a key of LongKeyBytes bytes ("k..."), written as the body
	// goes and never held: a listing body of any size.
	LongKeys     int
	LongKeyBytes int64
	// ManyKeys lists this many made-up objects instead of the bucket's,
	// 1,000 a page as S3 pages them (continuation tokens and all), each
	// key ManyKeyBytes bytes long (at least 16): a listing of any length,
	// written as it goes and never held. The objects cannot be read.
	ManyKeys     int
	ManyKeyBytes int
	// ListBody, if set, is every listing's whole answer (200, text/html):
	// a page that is not a listing (a proxy's or a captive portal's HTML,
	// plain text).
	ListBody string
	// EndlessGET answers every GET with its status and Content-Range (if
	// ranged) but no Content-Length, and a body that never ends: the
	// object's bytes, then more, until the client hangs up.
	EndlessGET bool
	// ListPadding pads every listing body with this many bytes of
	// whitespace between its elements (valid XML, of any size).
	ListPadding int64
	// NoLastModified lists entries without <LastModified>.
	NoLastModified bool
	// NoETag sends no ETag (listings, HEAD, GET) and ignores If-Match.
	NoETag bool
	// IgnoreIfMatch serves the object as it is now whatever If-Match asks.
	IgnoreIfMatch bool
	// IgnoreRange answers a ranged GET with 200 and the whole object, as
	// HTTP allows a server that does not do ranges.
	IgnoreRange bool
	// RedirectTo answers every request with 307 to this URL (scheme and
	// host, no path) with the request's path and query.
	RedirectTo string
}

type lyingObject struct {
	data    []byte
	etag    string // quoted
	modTime time.Time
}

// LyingStats counts the requests a LyingS3 answered, by operation.
type LyingStats struct {
	Lists, Heads, Gets, Puts, Redirects int64
}

// StartLyingS3 starts a LyingS3 serving bucket on a free loopback port; it
// stops when the test ends.
func StartLyingS3(t T, bucket string) *LyingS3 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &LyingS3{Endpoint: "http://" + ln.Addr().String(), Bucket: bucket, objs: map[string]lyingObject{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: time.Minute}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// SetLies sets how the store lies from the next request on.
func (s *LyingS3) SetLies(l Lies) {
	s.mu.Lock()
	s.lies = l
	s.mu.Unlock()
}

// Put stores data as key and returns its ETag (quoted, the MD5 of data).
// Putting a key again replaces the object: another ETag when the bytes
// differ.
func (s *LyingS3) Put(key string, data []byte) string {
	sum := md5.Sum(data)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	s.mu.Lock()
	s.objs[key] = lyingObject{data: slices.Clone(data), etag: etag, modTime: time.Now().UTC().Truncate(time.Second)}
	s.mu.Unlock()
	return etag
}

// PutTree puts every regular file under dir as prefix + its
// slash-separated path in dir (prefix "" or ending in "/").
func (s *LyingS3) PutTree(t T, prefix, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s.Put(prefix+filepath.ToSlash(rel), data)
		return nil
	})
	if err != nil {
		t.Fatalf("PutTree %s: %v", dir, err)
	}
}

// Get returns key's bytes, as stored.
func (s *LyingS3) Get(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[key]
	return o.data, ok
}

// Stats counts the requests answered so far.
func (s *LyingS3) Stats() LyingStats {
	return LyingStats{Lists: s.lists.Load(), Heads: s.heads.Load(), Gets: s.gets.Load(), Puts: s.puts.Load(), Redirects: s.redirects.Load()}
}

// URL is the s3:// URL of prefix in the bucket.
func (s *LyingS3) URL(prefix string) string {
	return "s3://" + s.Bucket + "/" + strings.TrimPrefix(prefix, "/")
}

// Env is the environment that points an AWS SDK's standard chain at this
// store (see S3.Env), with made-up keys: it checks no signature.
func (s *LyingS3) Env() []string {
	e := (&S3{AccessKey: "LIAR", SecretKey: "liarliarliar", Region: "us-east-1", Dir: os.TempDir()}).EnvFor(s.Endpoint)
	return e
}

func (s *LyingS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	lies := s.lies
	s.mu.Unlock()
	if lies.RedirectTo != "" {
		s.redirects.Add(1)
		w.Header().Set("Location", lies.RedirectTo+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucket != s.Bucket {
		s3Fail(w, r, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
		return
	}
	switch {
	case key == "" && r.Method == http.MethodGet:
		s.lists.Add(1)
		s.list(w, r, lies)
	case key == "":
		s3Fail(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed", "not on a bucket")
	case r.Method == http.MethodPut:
		s.puts.Add(1)
		data, err := io.ReadAll(io.LimitReader(r.Body, 1<<30))
		if err != nil {
			s3Fail(w, r, http.StatusBadRequest, "IncompleteBody", err.Error())
			return
		}
		w.Header().Set("ETag", s.Put(key, data))
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		if r.Method == http.MethodGet {
			s.gets.Add(1)
		} else {
			s.heads.Add(1)
		}
		s.get(w, r, key, lies)
	default:
		s3Fail(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method)
	}
}

// get answers a GetObject or HeadObject.
func (s *LyingS3) get(w http.ResponseWriter, r *http.Request, key string, lies Lies) {
	s.mu.Lock()
	o, ok := s.objs[key]
	s.mu.Unlock()
	if !ok {
		s3Fail(w, r, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	if m := r.Header.Get("If-Match"); m != "" && m != o.etag && !lies.NoETag && !lies.IgnoreIfMatch {
		s3Fail(w, r, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		return
	}
	h := w.Header()
	h.Set("Last-Modified", o.modTime.Format(http.TimeFormat))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Accept-Ranges", "bytes")
	if !lies.NoETag {
		h.Set("ETag", o.etag)
	}
	size := int64(len(o.data))
	start, end, ranged, err := parseRange(r.Header.Get("Range"), size)
	if err != nil {
		h.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		s3Fail(w, r, http.StatusRequestedRangeNotSatisfiable, "InvalidRange", err.Error())
		return
	}
	status := http.StatusOK
	if ranged && !lies.IgnoreRange && r.Method == http.MethodGet {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, size))
	} else {
		start, end = 0, size
	}
	if lies.EndlessGET && r.Method == http.MethodGet {
		w.WriteHeader(status) // no Content-Length: chunked, for ever
		bw := &errWriter{w: w}
		bw.str(string(o.data[start:end]))
		for bw.err == nil && r.Context().Err() == nil {
			bw.pad(64<<10, 'z')
		}
		return
	}
	h.Set("Content-Length", strconv.FormatInt(end-start, 10))
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		w.Write(o.data[start:end])
	}
}

// parseRange reads "bytes=A-B" or "bytes=A-": [start, end) and whether a
// range was asked for.
func parseRange(h string, size int64) (start, end int64, ranged bool, err error) {
	if h == "" {
		return 0, size, false, nil
	}
	spec, ok := strings.CutPrefix(h, "bytes=")
	a, b, ok2 := strings.Cut(spec, "-")
	if !ok || !ok2 {
		return 0, 0, false, fmt.Errorf("range %q", h)
	}
	if start, err = strconv.ParseInt(a, 10, 64); err != nil || start >= size {
		return 0, 0, false, fmt.Errorf("range %q of %d bytes", h, size)
	}
	end = size
	if b != "" {
		last, err := strconv.ParseInt(b, 10, 64)
		if err != nil || last < start {
			return 0, 0, false, fmt.Errorf("range %q", h)
		}
		end = min(last+1, size)
	}
	return start, end, true, nil
}

// list answers a ListObjectsV2, in pages of max-keys from
// continuation-token (the last key of the page before).
func (s *LyingS3) list(w http.ResponseWriter, r *http.Request, lies Lies) {
	q := r.URL.Query()
	prefix, after := q.Get("prefix"), q.Get("continuation-token")
	maxKeys := 1000
	if v, err := strconv.Atoi(q.Get("max-keys")); err == nil && v > 0 && v < maxKeys {
		maxKeys = v
	}
	if lies.ManyKeys > 0 {
		s.listMany(w, r, prefix, after, maxKeys, lies)
		return
	}
	if lies.ListBody != "" {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, lies.ListBody)
		return
	}
	s.mu.Lock()
	var keys []string
	for k := range s.objs {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	truncated := len(keys) > maxKeys
	if truncated {
		keys = keys[:maxKeys]
	}
	objs := make([]lyingObject, len(keys))
	for i, k := range keys {
		objs[i] = s.objs[k]
	}
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	bw := &errWriter{w: w}
	bw.str(xml.Header + `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	bw.str("<Name>" + escapeXML(s.Bucket) + "</Name><Prefix>" + escapeXML(prefix) + "</Prefix>")
	bw.str(fmt.Sprintf("<KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys><IsTruncated>%t</IsTruncated>", len(keys), maxKeys, truncated))
	if truncated {
		bw.str("<NextContinuationToken>" + escapeXML(keys[len(keys)-1]) + "</NextContinuationToken>")
	}
	bw.pad(lies.ListPadding, ' ')
	if after == "" {
		for range lies.LongKeys {
			bw.str("<Contents><Key>" + escapeXML(prefix))
			bw.pad(lies.LongKeyBytes, 'k')
			bw.str("</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>&quot;0&quot;</ETag><Size>1</Size></Contents>")
		}
	}
	for i, k := range keys {
		o := objs[i]
		bw.str("<Contents><Key>" + escapeXML(k) + "</Key>")
		if !lies.NoLastModified {
			bw.str("<LastModified>" + o.modTime.Format("2006-01-02T15:04:05.000Z") + "</LastModified>")
		}
		if !lies.NoETag {
			bw.str("<ETag>" + escapeXML(o.etag) + "</ETag>")
		}
		bw.str(fmt.Sprintf("<Size>%d</Size><StorageClass>STANDARD</StorageClass></Contents>", len(o.data)))
	}
	bw.str("</ListBucketResult>")
}

// listMany answers a listing page of Lies.ManyKeys: keys prefix +
// "many/" + an 8-digit number + 'k's, the page after the continuation
// token (the last number listed).
func (s *LyingS3) listMany(w http.ResponseWriter, r *http.Request, prefix, after string, maxKeys int, lies Lies) {
	start := 0
	if after != "" {
		n, err := strconv.Atoi(after)
		if err != nil {
			s3Fail(w, r, http.StatusBadRequest, "InvalidArgument", "continuation token")
			return
		}
		start = n + 1
	}
	end := min(start+maxKeys, lies.ManyKeys)
	pad := max(lies.ManyKeyBytes-len(prefix)-len("many/")-8, 0)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	bw := &errWriter{w: w}
	bw.str(xml.Header + `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	bw.str("<Name>" + escapeXML(s.Bucket) + "</Name><Prefix>" + escapeXML(prefix) + "</Prefix>")
	bw.str(fmt.Sprintf("<KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys><IsTruncated>%t</IsTruncated>", end-start, maxKeys, end < lies.ManyKeys))
	if end < lies.ManyKeys {
		bw.str(fmt.Sprintf("<NextContinuationToken>%d</NextContinuationToken>", end-1))
	}
	// Each key's element made in one buffer and written at once: a page
	// is a thousand keys of up to a kilobyte, and the tests list
	// hundreds of pages.
	head, padding := "<Contents><Key>"+escapeXML(prefix)+"many/", bytes.Repeat([]byte{'k'}, pad)
	var key []byte
	for i := start; i < end; i++ {
		key = fmt.Appendf(append(key[:0], head...), "%08d", i)
		key = append(key, padding...)
		key = fmt.Appendf(key, "</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>&quot;%08d&quot;</ETag><Size>1000</Size></Contents>", i)
		bw.bytes(key)
	}
	bw.str("</ListBucketResult>")
}

// errWriter writes until the first error (the client hung up), then
// writes nothing.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) str(s string) {
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

// bytes writes b, unless an earlier write failed.
func (e *errWriter) bytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

// pad writes n bytes of c, a chunk of at most 64 KiB at a time (no
// larger than n: a short pad makes a short chunk).
func (e *errWriter) pad(n int64, c byte) {
	if n <= 0 || e.err != nil {
		return
	}
	chunk := bytes.Repeat([]byte{c}, int(min(n, 64<<10)))
	for n > 0 && e.err == nil {
		k := min(n, int64(len(chunk)))
		_, e.err = e.w.Write(chunk[:k])
		n -= k
	}
}

func escapeXML(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// s3Fail answers with S3's error document (no body to a HEAD).
func s3Fail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	body := xml.Header + "<Error><Code>" + code + "</Code><Message>" + escapeXML(msg) + "</Message></Error>"
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		io.WriteString(w, body)
	}
}
