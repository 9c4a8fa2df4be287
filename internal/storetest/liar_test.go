package storetest_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/stoker-dev/stoker/internal/storetest"
)

func liarClient(s *storetest.LyingS3) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("LIAR", "liarliarliar", ""),
		Retryer:     aws.NopRetryer{},
	})
}

// TestLyingS3Honest: with no lies, the AWS SDK lists, heads, gets ranges
// of and puts objects as it would from S3, and If-Match is honoured.
func TestLyingS3Honest(t *testing.T) {
	s := storetest.StartLyingS3(t, "bkt")
	etag := s.Put("d/a.jpg", []byte("0123456789"))
	s.Put("d/b.jpg", []byte("bee"))
	s.Put("other", []byte("x"))
	c := liarClient(s)

	out, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: aws.String("d/"), MaxKeys: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "d/a.jpg" || aws.ToString(out.Contents[0].ETag) != etag ||
		aws.ToInt64(out.Contents[0].Size) != 10 || out.Contents[0].LastModified == nil || !aws.ToBool(out.IsTruncated) {
		t.Fatalf("first page %+v", out)
	}
	out, err = c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: aws.String("d/"), ContinuationToken: out.NextContinuationToken})
	if err != nil || len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "d/b.jpg" || aws.ToBool(out.IsTruncated) {
		t.Fatalf("second page %+v, %v", out, err)
	}

	g, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("d/a.jpg"), Range: aws.String("bytes=2-5"), IfMatch: aws.String(etag)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if string(body) != "2345" || aws.ToString(g.ContentRange) != "bytes 2-5/10" || aws.ToString(g.ETag) != etag {
		t.Errorf("range: %q, %q, %q", body, aws.ToString(g.ContentRange), aws.ToString(g.ETag))
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("d/a.jpg"), IfMatch: aws.String(`"other"`)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "PreconditionFailed" {
		t.Errorf("If-Match of another version: %v", err)
	}
	h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("d/b.jpg")})
	if err != nil || aws.ToInt64(h.ContentLength) != 3 || h.LastModified == nil {
		t.Errorf("head %+v, %v", h, err)
	}
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("d/c"), Body: strings.NewReader("sea")}); err != nil {
		t.Fatal(err)
	}
	if b, ok := s.Get("d/c"); !ok || string(b) != "sea" {
		t.Errorf("put: %q", b)
	}
	if st := s.Stats(); st.Lists != 2 || st.Gets != 2 || st.Heads != 1 || st.Puts != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestLyingS3Lies: each lie is told as its doc says.
func TestLyingS3Lies(t *testing.T) {
	s := storetest.StartLyingS3(t, "bkt")
	s.Put("a", []byte("0123456789"))
	c := liarClient(s)

	s.SetLies(storetest.Lies{IgnoreRange: true, NoETag: true})
	g, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a"), Range: aws.String("bytes=2-5"), IfMatch: aws.String(`"other"`)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if string(body) != "0123456789" || g.ContentRange != nil || g.ETag != nil {
		t.Errorf("ignored range, no ETag: %q, %v, %v", body, g.ContentRange, g.ETag)
	}

	s.SetLies(storetest.Lies{NoLastModified: true, LongKeys: 2, LongKeyBytes: 3000})
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, s.Endpoint+"/bkt?list-type=2", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Count(string(raw), "<Key>") != 3 || strings.Count(string(raw), "<LastModified>") != 2 || len(raw) < 6000 {
		t.Errorf("listing of %d bytes: %.300s", len(raw), raw)
	}

	s.SetLies(storetest.Lies{RedirectTo: "http://elsewhere.invalid"})
	req, _ = http.NewRequestWithContext(ctx(t), http.MethodGet, s.Endpoint+"/bkt/a?x=1", nil)
	resp, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "http://elsewhere.invalid/bkt/a?x=1" {
		t.Errorf("redirect: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
}
