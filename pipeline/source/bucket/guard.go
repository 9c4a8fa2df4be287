package bucket

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// Bounds on what a store's answer may make this process hold before it is
// believed. A store is outside input: a hostile or broken one must not
// take the server's memory through its SDK's parsers.
const (
	// maxListBody bounds a listing page's body (8 MiB): a page of 1,000
	// keys of at most 1 KiB, each escaped and with its fields, is well
	// under it (a real page is 100-400 KB).
	maxListBody = 8 << 20
	// maxErrorBody bounds the body of an answer that is not a success (an
	// error document is a few hundred bytes).
	maxErrorBody = 64 << 10
	// maxRedirects is how many same-host redirects a request follows.
	maxRedirects = 10
)

// guard is what a provider's guarded client knows of its protocol: which
// answers its client library parses, and so are read within a bound
// first, and what else a media answer (an object's bytes) must say.
type guard struct {
	// answer says what the answer to req is.
	answer func(req *http.Request) answerKind
	// media, if set, checks a successful media answer before its body is
	// read (GCS: its range and generation, which its client does not
	// give back).
	media func(req *http.Request, resp *http.Response) error
	// redirectHint says why the provider's store might redirect to another
	// host, and what to set then.
	redirectHint string
	// listRoots are the root elements of its XML listings: a successful
	// listing answer whose body is not XML with one of them is refused
	// (its client library would take an HTML page for an empty listing,
	// and other bytes for a transient error, retried).
	listRoots []string
}

// answerKind is what an answer's body is to a client.
type answerKind int

const (
	mediaAnswer   answerKind = iota // an object's bytes: read by the caller to the length it asked for
	listingAnswer                   // a listing page: parsed, read within maxListBody
	otherAnswer                     // another answer the client parses (an object's metadata): read within maxListBody
)

// What S3's and Azure's clients parse of a successful answer is a
// listing (HEAD and GET answers carry their metadata in headers).
var (
	s3Guard = guard{answer: listingOrMedia, listRoots: []string{"ListBucketResult", "ListVersionsResult"},
		redirectHint: "S3 redirects a request sent to another region than the bucket's: set AWS_REGION to the bucket's"}
	azureGuard = guard{answer: listingOrMedia, listRoots: []string{"EnumerationResults"}}
)

func listingOrMedia(req *http.Request) answerKind {
	if isListing(req) {
		return listingAnswer
	}
	return mediaAnswer
}

// guardClient returns a copy of c that believes nothing of a store it has
// not bounded: the bodies its client library parses (g.answer's listings
// and others, and every error's) are read whole within their bounds before
// any parser sees them (over it is ErrProtocol), a media answer is
// checked by g.media, and a redirect to another host (or scheme) is never
// followed. c's own redirect rules (the AWS SDK's: 307 and 308 only)
// apply within the host.
func guardClient(c *http.Client, g guard) *http.Client {
	gc := *c
	rt := gc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	gc.Transport = guardTransport{rt, g}
	inner := c.CheckRedirect
	gc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Host != first.Host || req.URL.Scheme != first.Scheme {
			hint := ""
			if g.redirectHint != "" {
				hint = " (" + g.redirectHint + ")"
			}
			return protocolf("redirected to another host (%s), which is never followed: a store answers for its own objects%s",
				clip(req.URL.Scheme+"://"+req.URL.Host, 128), hint)
		}
		if len(via) >= maxRedirects {
			return protocolf("redirected %d times", len(via))
		}
		if inner != nil {
			return inner(req, via)
		}
		return nil
	}
	return &gc
}

// guardTransport reads the bodies a client parses (listings, errors,
// metadata) within their bounds; an object's body passes through, read
// by the caller to the length it asked for, once g.media has checked
// what its answer says.
type guardTransport struct {
	rt http.RoundTripper
	g  guard
}

func (t guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil || req.Method == http.MethodHead {
		return resp, err
	}
	var limit int64
	var what, why string
	kind := t.g.answer(req)
	switch {
	case resp.StatusCode >= 300:
		limit, what, why = maxErrorBody, "an answer of HTTP "+strconv.Itoa(resp.StatusCode), "an error document is a few hundred bytes"
	case kind == listingAnswer:
		limit, what, why = maxListBody, "a listing page", "a page of 1,000 keys of at most 1 KiB is far less"
	case kind == otherAnswer:
		limit, what, why = maxListBody, "an answer (an object's metadata)", "an object's metadata is a few KiB"
	case t.g.media != nil:
		if err := t.g.media(req, resp); err != nil {
			resp.Body.Close()
			return nil, err
		}
		return resp, nil
	default:
		return resp, nil
	}
	body, err := readBounded(resp, limit)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if body == nil {
		return nil, protocolf("%s of over %d bytes (%s): refused before it was parsed", what, limit, why)
	}
	if kind == listingAnswer && resp.StatusCode < 300 && len(t.g.listRoots) > 0 {
		if err := checkListingXML(body, t.g.listRoots); err != nil {
			return nil, err
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// checkListingXML refuses a listing page that is not an XML document
// whose root element is one of roots: what a proxy or captive portal
// answers (an HTML page), or any other bytes.
func checkListingXML(body []byte, roots []string) error {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false // an HTML page's root is named, not a syntax error
	for {
		tok, err := d.Token()
		if err != nil {
			return protocolf("a listing page that is not XML (it begins %q): the store, or something between, answered outside its protocol", clip(string(body), 64))
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if slices.Contains(roots, tok.Name.Local) {
				return nil
			}
			return protocolf("a listing page whose XML is <%s>, not <%s> (it begins %q): the store, or something between, answered outside its protocol",
				clip(tok.Name.Local, 64), strings.Join(roots, "> or <"), clip(string(body), 64))
		case xml.CharData:
			if len(bytes.TrimSpace(tok)) > 0 {
				return protocolf("a listing page that is not XML (it begins %q): the store, or something between, answered outside its protocol", clip(string(body), 64))
			}
		}
	}
}

// readBounded reads resp's body whole; nil, without an error, when it has
// (or says it has) more than limit bytes. It reads in pieces and joins
// them once, so that what it allocates is about twice what it read, not
// a doubling buffer's four times.
func readBounded(resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, nil
	}
	if resp.ContentLength >= 0 {
		b := make([]byte, resp.ContentLength+1)
		n, err := io.ReadFull(resp.Body, b)
		switch {
		case int64(n) > resp.ContentLength:
			return nil, nil
		case int64(n) < resp.ContentLength:
			return nil, fmt.Errorf("body cut short at %d of %d bytes: %w", n, resp.ContentLength, err)
		}
		return b[:n], nil
	}
	var pieces [][]byte
	var total int64
	for {
		p := make([]byte, 256<<10)
		n, err := io.ReadFull(resp.Body, p)
		pieces = append(pieces, p[:n])
		total += int64(n)
		if total > limit {
			return nil, nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return bytes.Join(pieces, nil), nil
}

// isListing says whether req lists objects: S3's ListObjects (V2: a
// list-type; V1: on the bucket, with a prefix or a marker), Azure's List
// Blobs (comp=list).
func isListing(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	q := req.URL.Query()
	return q.Has("list-type") || q.Get("comp") == "list" || q.Has("prefix") || q.Has("marker") || q.Has("delimiter")
}

// clip is s cut to at most n bytes (at a character's start), marked when
// cut: for keys and hosts a store made up, in messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// keyTooLong says whether key (prefix included) is over the store's key
// limit: MaxKeyBytes bytes for S3 and GCS, MaxKeyBytes characters (at
// most 4 bytes each) for Azure.
func keyTooLong(scheme, key string) bool {
	if scheme == "azblob" {
		return len(key) > 4*source.MaxKeyBytes || utf8.RuneCountInString(key) > source.MaxKeyBytes
	}
	return len(key) > source.MaxKeyBytes
}

// protocolf is an ErrProtocol error.
func protocolf(format string, a ...any) error {
	return &answerError{source.ErrProtocol, fmt.Sprintf(format, a...)}
}

// changedf is an ErrChanged error found in a store's answer (another
// version than the one asked for).
func changedf(format string, a ...any) error {
	return &answerError{source.ErrChanged, fmt.Sprintf(format, a...)}
}

// answerError is what protocolf and changedf make: an error of its own
// type, so that the retrier can say it without the layers a provider's
// client wraps around it (its operation, the request's URL).
type answerError struct {
	sentinel error // ErrProtocol or ErrChanged
	msg      string
}

func (e *answerError) Error() string        { return e.sentinel.Error() + ": " + e.msg }
func (e *answerError) Is(target error) bool { return target == e.sentinel }

// noPanic runs f, one call into a provider's client library, and turns a
// panic there into an error: the library's parsers trust the store's
// answers more than this process does (gocloud's s3blob dereferences a
// listing entry's LastModified, which a store may leave out).
func noPanic(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = protocolf("the store's answer to %s is malformed: its client library failed on it (%s)", what, clip(strings.TrimSpace(fmt.Sprint(r)), 200))
		}
	}()
	return f()
}
