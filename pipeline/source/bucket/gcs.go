package bucket

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	gblob "gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
	"google.golang.org/api/option"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// openGCS opens a GCS bucket through the JSON API (reads through the XML
// API's media downloads, as Google's client makes them) with a guarded
// client (gcsGuard), as S3's and Azure's are. The credentials are
// Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// gcloud's application-default login, the metadata server), as gocloud's
// gs:// opener finds them; none with STORAGE_EMULATOR_HOST (an emulator,
// over http).
func openGCS(ctx context.Context, bucket string) (*gblob.Bucket, error) {
	var ts oauth2.TokenSource
	var opts []option.ClientOption
	if os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		creds, err := gcp.DefaultCredentials(ctx)
		if err != nil {
			err = fmt.Errorf("%w: no Google credentials: %v", source.ErrDenied, err)
			if credentialsMissing(err) {
				err = explainOpen("gs", bucket, err) // else the error names the setting that failed
			}
			return nil, err
		}
		ts = creds.TokenSource
		if ud, err := creds.GetUniverseDomain(); err == nil && ud != "" {
			opts = append(opts, option.WithUniverseDomain(ud))
		}
	}
	c, err := gcsClient(ctx, ts, opts...)
	if err != nil {
		return nil, err
	}
	return gcsblob.OpenBucket(ctx, nil, bucket, &gcsblob.Options{Client: c})
}

// gcsClient is Google's storage client over a guarded HTTP client that
// signs its requests with ts (none when nil). The token's transport
// signs whatever goes through it, a redirect to another host included,
// which the guard never follows. The client's own retries are off: the
// store's policy retries, and one count holds.
func gcsClient(ctx context.Context, ts oauth2.TokenSource, opts ...option.ClientOption) (*storage.Client, error) {
	var rt http.RoundTripper = storeTransport()
	if ts != nil {
		rt = &oauth2.Transport{Base: rt, Source: oauth2.ReuseTokenSource(nil, ts)}
	}
	hc := guardClient(&http.Client{Transport: rt}, gcsGuard)
	c, err := storage.NewClient(ctx, append(opts, option.WithHTTPClient(hc))...)
	if err != nil {
		return nil, fmt.Errorf("GCS client: %w", err)
	}
	c.SetRetry(storage.WithPolicy(storage.RetryNever))
	return c, nil
}

// gcsGuard: Google's client parses the JSON API's answers (alt=json: a
// listing page, an object's metadata, an upload's result); a media
// download (the XML API's GET /BUCKET/OBJECT, or alt=media) is the
// object's bytes, checked by checkGCSMedia. Anything else is bounded as a
// parsed answer would be.
var gcsGuard = guard{answer: gcsAnswer, media: checkGCSMedia}

func gcsAnswer(req *http.Request) answerKind {
	alt := req.URL.Query().Get("alt")
	switch {
	case req.Method == http.MethodGet && alt == "media":
		return mediaAnswer
	case req.Method == http.MethodGet && alt == "" && strings.Contains(strings.TrimPrefix(req.URL.Path, "/"), "/"):
		return mediaAnswer // the XML API's GET /BUCKET/OBJECT (the JSON API's calls all say alt=json)
	case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/o"):
		return listingAnswer // the JSON API's objects.list: GET .../b/BUCKET/o
	}
	return otherAnswer
}

// checkGCSMedia holds a download's answer to what it asked for, which
// Google's client does not give back: its generation (the client reports
// the generation it asked for, whatever the answer's X-Goog-Generation
// says) and its range (the client checks only that a range not starting
// at 0 came as 206, and a reopened stream's not at all).
func checkGCSMedia(req *http.Request, resp *http.Response) error {
	if gen := req.URL.Query().Get("generation"); gen != "" {
		switch got := resp.Header.Get("X-Goog-Generation"); {
		case got == "":
			return protocolf("the store's answer to a read of generation %s carries no generation (X-Goog-Generation): "+
				"it cannot be told from another generation's bytes", gen)
		case got != gen:
			return changedf("the store served generation %s for a read of generation %s", clip(got, 32), gen)
		}
	}
	asked := req.Header.Get("Range")
	if asked == "" {
		return nil
	}
	start, last, ok := parseByteRange(asked)
	if !ok {
		return nil // a suffix range, which this package does not ask for
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		cr := resp.Header.Get("Content-Range")
		sp := answerOf(&cr, &resp.ContentLength)
		end := sp.total - 1
		if last >= 0 {
			end = min(last, end)
		}
		if !sp.whole && sp.start == start && sp.total > 0 && sp.start+sp.length-1 == end {
			return nil
		}
		return protocolf("the store answered a read of %s with Content-Range %q, %d bytes", asked, clip(cr, 64), resp.ContentLength)
	case http.StatusOK:
		if start == 0 && resp.ContentLength >= 0 && (last < 0 || resp.ContentLength == last+1) {
			return nil // the whole object, which is the range asked for
		}
		why := ": it ignores Range, and a sample cannot be read from it"
		if resp.Header.Get("X-Goog-Stored-Content-Encoding") == "gzip" {
			why = ": the object is stored with Content-Encoding gzip, which GCS serves decompressed and whole; store it without"
		}
		end := "end"
		if last >= 0 {
			end = strconv.FormatInt(last+1, 10)
		}
		return protocolf("the store answered a read of bytes [%d, %s) with the whole object (HTTP 200, no Content-Range, %d bytes)%s",
			start, end, resp.ContentLength, why)
	}
	return protocolf("the store answered a read of %s with HTTP %d", asked, resp.StatusCode)
}

// parseByteRange reads a Range of "bytes=A-B" or "bytes=A-" (last -1).
func parseByteRange(h string) (start, last int64, ok bool) {
	spec, ok1 := strings.CutPrefix(h, "bytes=")
	a, b, ok2 := strings.Cut(spec, "-")
	if !ok1 || !ok2 || a == "" {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if b == "" {
		return start, -1, true
	}
	last, err = strconv.ParseInt(b, 10, 64)
	return start, last, err == nil && last >= start
}

// gcsProvider's version is the object's generation.
type gcsProvider struct{}

// listVersion is the entry's generation. GCS lists every object with one
// and with its updated time: an entry without either is malformed.
func (gcsProvider) listVersion(lo *gblob.ListObject) (string, error) {
	var a storage.ObjectAttrs
	if !lo.As(&a) {
		return "", fmt.Errorf("GCS client: a listing entry is no storage.ObjectAttrs")
	}
	return gcsVersion("the listing's entry", &a)
}

func (gcsProvider) attrVersion(at *gblob.Attributes) (string, error) {
	var a storage.ObjectAttrs
	if !at.As(&a) {
		return "", fmt.Errorf("GCS client: an object's attributes are no storage.ObjectAttrs")
	}
	return gcsVersion("the metadata of", &a)
}

func gcsVersion(what string, a *storage.ObjectAttrs) (string, error) {
	switch {
	case a.Generation <= 0:
		return "", protocolf("%s %q has no generation: GCS gives every object one, which a read asks for", what, clip(a.Name, 64))
	case a.Updated.IsZero():
		return "", protocolf("%s %q has no updated time: GCS gives every object one", what, clip(a.Name, 64))
	}
	return strconv.FormatInt(a.Generation, 10), nil
}

// readerVersion is the generation the reader read: the one asked for,
// which checkGCSMedia held the answer to, or the answer's own.
func (gcsProvider) readerVersion(rd *gblob.Reader) string {
	var r *storage.Reader
	if rd.As(&r) && r.Attrs.Generation > 0 {
		return strconv.FormatInt(r.Attrs.Generation, 10)
	}
	return ""
}

// answered is what the GCS client says of its answer, which checkGCSMedia
// has held to the range asked for.
func (gcsProvider) answered(rd *gblob.Reader) (answer, bool) {
	var r *storage.Reader
	if !rd.As(&r) {
		return answer{}, false
	}
	return answer{start: r.Attrs.StartOffset, length: r.Remain(), total: r.Attrs.Size,
		raw: fmt.Sprintf("(GCS reader at %d, %d bytes)", r.Attrs.StartOffset, r.Remain())}, true
}

// precondition asks for the generation: the object handle's, which
// gcsblob gives as a **storage.ObjectHandle to replace.
func (gcsProvider) precondition(as func(any) bool, version string) error {
	gen, err := strconv.ParseInt(version, 10, 64)
	if err != nil || gen <= 0 {
		return fmt.Errorf("version %q is no GCS generation (an index of another kind of store?)", clip(version, 32))
	}
	var oh **storage.ObjectHandle
	if !as(&oh) {
		return errNoPrecondition
	}
	*oh = (*oh).Generation(gen)
	return nil
}
