package storetest

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LyingGCS is a GCS of this process on a loopback port that speaks just
// enough of GCS to lie: the JSON API's object listing, metadata and
// uploads (media and multipart), and media downloads (the XML API's GET
// /BUCKET/OBJECT, which Google's Go client reads with, and the JSON API's
// alt=media), with ranges and generations, of one bucket's objects kept
// in memory; no credentials are checked. An object replaced is another
// generation, and the old one is gone (a bucket without object
// versioning). Its GCSLies say how it lies; the zero GCSLies answer as GCS
// does, so a test can start honest, lie, and be honest again (SetLies).
//
// It is what a hostile or broken store can do to a client, not a model of
// GCS: TestLyingGCSHonest checks that Google's client reads its honest
// answers as it reads fake-gcs-server's.
type LyingGCS struct {
	// Endpoint is http://127.0.0.1:PORT, what STORAGE_EMULATOR_HOST names
	// (Env).
	Endpoint string
	// Bucket is the one bucket it serves.
	Bucket string

	srv *http.Server

	mu   sync.Mutex
	objs map[string]gcsObject
	gen  int64 // the last generation given
	lies GCSLies

	lists, metas, gets, generationGets, puts, redirects, authorized atomic.Int64
}

// GCSLies are what a LyingGCS does wrong. Each applies from the next
// request.
type GCSLies struct {
	// LongNames adds this many entries to the first page of every
	// listing, each with a name of LongNameBytes bytes ("k..."), written
	// as the body goes and never held: a listing body of any size.
	LongNames     int
	LongNameBytes int64
	// Padding pads every JSON answer (a listing page, an object's
	// metadata) with this many bytes of whitespace (valid JSON, of any
	// size).
	Padding int64
	// NoGeneration leaves the generation out of everything (listings,
	// metadata, downloads' X-Goog-Generation) and ignores the generation
	// a download asks for.
	NoGeneration bool
	// NoUpdated lists entries without their updated time.
	NoUpdated bool
	// IgnoreRange answers a ranged download with 200 and the whole
	// object, as HTTP allows a server that does not do ranges.
	IgnoreRange bool
	// IgnoreGeneration serves the object as it is now (under its own
	// generation) whatever generation a download asks for.
	IgnoreGeneration bool
	// RedirectTo answers every request with 307 to this URL (scheme and
	// host, no path) with the request's path and query.
	RedirectTo string
}

// gcsObject is one generation of an object, as kept.
type gcsObject struct {
	data    []byte
	gen     int64
	updated time.Time
	md5     string // base64, as GCS gives it
	crc32c  string // base64 of the big-endian Castagnoli CRC
}

// LyingGCSStats counts the requests a LyingGCS answered, by operation.
type LyingGCSStats struct {
	// Lists, Metas, Gets and Puts: listing pages, object metadata,
	// downloads and uploads answered; Redirects: requests redirected.
	Lists, Metas, Gets, Puts, Redirects int64
	// GenerationGets are the downloads that asked for a generation.
	GenerationGets int64
	// Authorized are the requests that carried an Authorization header.
	Authorized int64
}

// StartLyingGCS starts a LyingGCS serving bucket on a free loopback port;
// it stops when the test ends.
func StartLyingGCS(t T, bucket string) *LyingGCS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &LyingGCS{Endpoint: "http://" + ln.Addr().String(), Bucket: bucket, objs: map[string]gcsObject{},
		gen: time.Now().UnixMicro()}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: time.Minute}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// SetLies sets how the store lies from the next request on.
func (s *LyingGCS) SetLies(l GCSLies) {
	s.mu.Lock()
	s.lies = l
	s.mu.Unlock()
}

// Put stores data as name, a new generation, and returns what GCS says of
// it.
func (s *LyingGCS) Put(name string, data []byte) GCSObject {
	sum := md5.Sum(data)
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	o := gcsObject{data: slices.Clone(data), gen: s.gen, updated: time.Now().UTC(),
		md5: base64.StdEncoding.EncodeToString(sum[:]), crc32c: base64.StdEncoding.EncodeToString(crc[:])}
	s.objs[name] = o
	return GCSObject{Generation: o.gen, ETag: o.md5, Size: int64(len(data))}
}

// PutTree puts every regular file under dir as prefix + its
// slash-separated path in dir (prefix "" or ending in "/").
func (s *LyingGCS) PutTree(t T, prefix, dir string) {
	t.Helper()
	err := putTree(dir, prefix, func(name string, data []byte) error {
		s.Put(name, data)
		return nil
	})
	if err != nil {
		t.Fatalf("PutTree %s: %v", dir, err)
	}
}

// Delete removes name.
func (s *LyingGCS) Delete(name string) {
	s.mu.Lock()
	delete(s.objs, name)
	s.mu.Unlock()
}

// Get returns name's bytes, as stored.
func (s *LyingGCS) Get(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[name]
	return o.data, ok
}

// Stats counts the requests answered so far.
func (s *LyingGCS) Stats() LyingGCSStats {
	return LyingGCSStats{Lists: s.lists.Load(), Metas: s.metas.Load(), Gets: s.gets.Load(), Puts: s.puts.Load(),
		Redirects: s.redirects.Load(), GenerationGets: s.generationGets.Load(), Authorized: s.authorized.Load()}
}

// URL is the gs:// URL of prefix in the bucket.
func (s *LyingGCS) URL(prefix string) string {
	return "gs://" + s.Bucket + "/" + strings.TrimPrefix(prefix, "/")
}

// Env is the environment that points Google's storage client at this
// store, with no credentials: STORAGE_EMULATOR_HOST (see GCS.Env).
func (s *LyingGCS) Env() []string { return (&GCS{}).EnvFor(s.Endpoint) }

func (s *LyingGCS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	lies := s.lies
	s.mu.Unlock()
	if r.Header.Get("Authorization") != "" {
		s.authorized.Add(1)
	}
	if lies.RedirectTo != "" {
		s.redirects.Add(1)
		w.Header().Set("Location", lies.RedirectTo+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	p, q := r.URL.Path, r.URL.Query()
	jsonObjects := "/storage/v1/b/" + s.Bucket + "/o"
	switch {
	case r.Method == http.MethodGet && p == jsonObjects:
		s.lists.Add(1)
		s.list(w, r, lies)
	case r.Method == http.MethodGet && strings.HasPrefix(p, jsonObjects+"/") && q.Get("alt") == "media":
		s.gets.Add(1)
		s.download(w, r, strings.TrimPrefix(p, jsonObjects+"/"), lies)
	case r.Method == http.MethodGet && strings.HasPrefix(p, jsonObjects+"/"):
		s.metas.Add(1)
		s.metadata(w, strings.TrimPrefix(p, jsonObjects+"/"), lies)
	case r.Method == http.MethodPost && p == "/upload"+jsonObjects:
		s.puts.Add(1)
		s.upload(w, r, lies)
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/"+s.Bucket+"/"):
		s.gets.Add(1)
		s.download(w, r, strings.TrimPrefix(p, "/"+s.Bucket+"/"), lies)
	case strings.HasPrefix(p, "/storage/v1/b/") || strings.HasPrefix(p, "/upload/"):
		gcsFail(w, http.StatusNotFound, "no such bucket or operation: "+r.Method+" "+p)
	default:
		gcsFail(w, http.StatusNotFound, "NoSuchKey: "+p)
	}
}

// object looks name up.
func (s *LyingGCS) object(name string) (gcsObject, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[name]
	return o, ok
}

// resource is name's JSON API resource (an object's metadata), less what
// lies leaves out.
func (s *LyingGCS) resource(name string, o gcsObject, lies GCSLies) map[string]any {
	m := map[string]any{
		"kind": "storage#object", "id": s.Bucket + "/" + name + "/" + strconv.FormatInt(o.gen, 10),
		"name": name, "bucket": s.Bucket, "metageneration": "1", "contentType": "application/octet-stream",
		"size": strconv.Itoa(len(o.data)), "md5Hash": o.md5, "crc32c": o.crc32c, "etag": o.md5,
		"storageClass": "STANDARD", "timeCreated": o.updated.Format(time.RFC3339Nano),
		"updated": o.updated.Format(time.RFC3339Nano), "generation": strconv.FormatInt(o.gen, 10),
	}
	if lies.NoGeneration {
		delete(m, "generation")
		delete(m, "id")
	}
	if lies.NoUpdated {
		delete(m, "updated")
	}
	return m
}

// metadata answers an object's metadata (objects.get).
func (s *LyingGCS) metadata(w http.ResponseWriter, name string, lies GCSLies) {
	o, ok := s.object(name)
	if !ok {
		gcsFail(w, http.StatusNotFound, "No such object: "+s.Bucket+"/"+name)
		return
	}
	body, _ := json.Marshal(s.resource(name, o, lies))
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	bw := &errWriter{w: w}
	bw.pad(lies.Padding, ' ')
	bw.str(string(body))
}

// list answers an objects.list, in pages of maxResults from pageToken
// (the last name of the page before).
func (s *LyingGCS) list(w http.ResponseWriter, r *http.Request, lies GCSLies) {
	q := r.URL.Query()
	prefix, after := q.Get("prefix"), q.Get("pageToken")
	maxResults := 1000
	if v, err := strconv.Atoi(q.Get("maxResults")); err == nil && v > 0 && v < maxResults {
		maxResults = v
	}
	s.mu.Lock()
	var names []string
	for k := range s.objs {
		if strings.HasPrefix(k, prefix) && k > after {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	truncated := len(names) > maxResults
	if truncated {
		names = names[:maxResults]
	}
	objs := make([]gcsObject, len(names))
	for i, k := range names {
		objs[i] = s.objs[k]
	}
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	bw := &errWriter{w: w}
	bw.str(`{"kind":"storage#objects",`)
	if truncated {
		bw.str(`"nextPageToken":` + jsonString(names[len(names)-1]) + ",")
	}
	bw.pad(lies.Padding, ' ')
	bw.str(`"items":[`)
	sep := ""
	if after == "" {
		for range lies.LongNames {
			bw.str(sep + `{"kind":"storage#object","name":` + strings.TrimSuffix(jsonString(prefix), `"`))
			bw.pad(lies.LongNameBytes, 'k')
			bw.str(`","bucket":` + jsonString(s.Bucket) + `,"generation":"1","metageneration":"1","size":"1",` +
				`"updated":"2026-01-01T00:00:00.000Z"}`)
			sep = ","
		}
	}
	for i, k := range names {
		item, _ := json.Marshal(s.resource(k, objs[i], lies))
		bw.str(sep + string(item))
		sep = ","
	}
	bw.str("]}")
}

// download answers a media download: the object's bytes, the range asked
// for (206), or all of them (200).
func (s *LyingGCS) download(w http.ResponseWriter, r *http.Request, name string, lies GCSLies) {
	o, ok := s.object(name)
	if !ok {
		gcsFail(w, http.StatusNotFound, "No such object: "+s.Bucket+"/"+name)
		return
	}
	if g := r.URL.Query().Get("generation"); g != "" {
		s.generationGets.Add(1)
		if g != strconv.FormatInt(o.gen, 10) && !lies.NoGeneration && !lies.IgnoreGeneration {
			gcsFail(w, http.StatusNotFound, "No such object: "+s.Bucket+"/"+name+"#"+g)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Last-Modified", o.updated.Format(http.TimeFormat))
	h.Set("ETag", `"`+o.md5+`"`)
	h.Set("Accept-Ranges", "bytes")
	h.Set("X-Goog-Hash", "crc32c="+o.crc32c+",md5="+o.md5)
	h.Set("X-Goog-Stored-Content-Encoding", "identity")
	h.Set("X-Goog-Stored-Content-Length", strconv.Itoa(len(o.data)))
	h.Set("X-Goog-Metageneration", "1")
	if !lies.NoGeneration {
		h.Set("X-Goog-Generation", strconv.FormatInt(o.gen, 10))
	}
	size := int64(len(o.data))
	start, end, ranged, err := parseRange(r.Header.Get("Range"), size)
	if err != nil {
		h.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		gcsFail(w, http.StatusRequestedRangeNotSatisfiable, err.Error())
		return
	}
	status := http.StatusOK
	if ranged && !lies.IgnoreRange {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, size))
	} else {
		start, end = 0, size
	}
	h.Set("Content-Length", strconv.FormatInt(end-start, 10))
	w.WriteHeader(status)
	w.Write(o.data[start:end])
}

// upload answers a media or multipart upload (uploadType=media or
// multipart: what Google's client sends for an object under its chunk
// size) with the new object's metadata.
func (s *LyingGCS) upload(w http.ResponseWriter, r *http.Request, lies GCSLies) {
	name := r.URL.Query().Get("name")
	body := io.LimitReader(r.Body, 1<<30)
	var data []byte
	var err error
	switch r.URL.Query().Get("uploadType") {
	case "media":
		data, err = io.ReadAll(body)
	case "multipart":
		name, data, err = readMultipart(r.Header.Get("Content-Type"), body, name)
	default:
		gcsFail(w, http.StatusNotImplemented, "only media and multipart uploads")
		return
	}
	if err == nil && name == "" {
		err = fmt.Errorf("no object name")
	}
	if err != nil {
		gcsFail(w, http.StatusBadRequest, err.Error())
		return
	}
	s.Put(name, data)
	o, _ := s.object(name)
	out, _ := json.Marshal(s.resource(name, o, lies))
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Write(out)
}

// readMultipart reads a multipart/related upload: the object's metadata
// (JSON, its name) and its bytes.
func readMultipart(contentType string, body io.Reader, name string) (string, []byte, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return "", nil, fmt.Errorf("content type %q: want multipart/related", contentType)
	}
	mr := multipart.NewReader(body, params["boundary"])
	part, err := mr.NextPart()
	if err != nil {
		return "", nil, fmt.Errorf("metadata part: %w", err)
	}
	var meta struct{ Name string }
	if err := json.NewDecoder(io.LimitReader(part, 1<<20)).Decode(&meta); err != nil {
		return "", nil, fmt.Errorf("metadata part: %w", err)
	}
	if meta.Name != "" {
		name = meta.Name
	}
	part, err = mr.NextPart()
	if err != nil {
		return "", nil, fmt.Errorf("media part: %w", err)
	}
	data, err := io.ReadAll(part)
	return name, data, err
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// gcsFail answers with the JSON API's error document.
func gcsFail(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg,
		"errors": []map[string]string{{"message": msg, "reason": http.StatusText(status)}}}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
