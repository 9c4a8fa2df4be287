package storetest_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/stoker-dev/stoker/internal/storetest"
)

const photos = "../../testdata/photos"

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func get(t *testing.T, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	return data
}

// TestS3Objects puts an object and a tree, and reads them back with their
// ETags, which are the MD5 of the bytes as S3's are for single-part
// uploads.
func TestS3Objects(t *testing.T) {
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "data")
	etag := s.Put(t, "data", "one/obj", []byte("hello"))
	if want := `"` + md5hex([]byte("hello")) + `"`; etag != want {
		t.Errorf("Put's ETag %s, want %s", etag, want)
	}
	c := s.Client()
	if got := get(t, c, "data", "one/obj"); string(got) != "hello" {
		t.Errorf("got %q", got)
	}

	etags := s.PutTree(t, "data", "photos/", photos)
	var want []string
	filepath.WalkDir(photos, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			rel, _ := filepath.Rel(photos, p)
			want = append(want, "photos/"+filepath.ToSlash(rel))
		}
		return err
	})
	if len(etags) != len(want) || len(want) < 40 {
		t.Fatalf("PutTree put %d objects, the tree has %d files", len(etags), len(want))
	}
	var listed []string
	pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("data"), Prefix: aws.String("photos/")})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			listed = append(listed, aws.ToString(o.Key))
			if aws.ToString(o.ETag) != etags[aws.ToString(o.Key)] {
				t.Errorf("%s: listed with ETag %s, put with %s", aws.ToString(o.Key), aws.ToString(o.ETag), etags[aws.ToString(o.Key)])
			}
		}
	}
	sort.Strings(want)
	if strings.Join(listed, "\n") != strings.Join(want, "\n") {
		t.Errorf("listed\n%v\nwant\n%v", listed, want)
	}
	for _, key := range want[:3] {
		file, _ := os.ReadFile(filepath.Join(photos, strings.TrimPrefix(key, "photos/")))
		if got := get(t, c, "data", key); !bytes.Equal(got, file) {
			t.Errorf("%s: %d bytes back, the file has %d", key, len(got), len(file))
		}
		if etags[key] != `"`+md5hex(file)+`"` {
			t.Errorf("%s: ETag %s, want the MD5 %s", key, etags[key], md5hex(file))
		}
	}
}

func md5hex(b []byte) string {
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

// TestS3FilesPlacedInDir pins what versitygw does with files it did not
// write: a directory in Dir is a bucket and its files are objects, served
// with their bytes but with no ETag, the case of a store that gives none.
func TestS3FilesPlacedInDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "placed", "cls"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "placed", "cls", "a.jpg"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := storetest.StartS3(t, dir)
	c := s.Client()
	if got := get(t, c, "placed", "cls/a.jpg"); string(got) != "abc" {
		t.Errorf("got %q", got)
	}
	h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("placed"), Key: aws.String("cls/a.jpg")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(h.ETag) != "" || aws.ToInt64(h.ContentLength) != 3 || h.LastModified == nil {
		t.Errorf("head: ETag %q, size %d, modified %v; want no ETag, 3 bytes, a time", aws.ToString(h.ETag), aws.ToInt64(h.ContentLength), h.LastModified)
	}
}

// TestS3Env reaches the store through the SDK's standard chain, from Env
// alone, even where the environment had its own AWS settings.
func TestS3Env(t *testing.T) {
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "envbucket")
	s.Put(t, "envbucket", "k", []byte("v"))
	for k, v := range map[string]string{ // what a developer's shell may hold
		"AWS_PROFILE": "no-such-profile", "AWS_SESSION_TOKEN": "stale",
		"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1", "AWS_REGION": "eu-west-3",
	} {
		t.Setenv(k, v)
	}
	env := s.Env()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	for _, name := range []string{"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} {
		if os.Getenv(name) == "" {
			t.Errorf("Env sets no %s", name)
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if got := get(t, c, "envbucket", "k"); string(got) != "v" {
		t.Errorf("got %q", got)
	}
}

// TestS3Stop: a stopped store refuses connections.
func TestS3Stop(t *testing.T) {
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "gone")
	s.Stop(t)
	_, err := s.Client(storetest.NoRetry).ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("gone")})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after Stop: %v, want connection refused", err)
	}
}

// TestS3ReadOnly: the read-only view serves the same objects and refuses
// writes.
func TestS3ReadOnly(t *testing.T) {
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "rodata")
	s.Put(t, "rodata", "k", []byte("v"))
	ro := s.ReadOnly(t)
	if ro.Endpoint == s.Endpoint {
		t.Fatal("the read-only view has the store's endpoint")
	}
	c := ro.Client(storetest.NoRetry)
	if got := get(t, c, "rodata", "k"); string(got) != "v" {
		t.Errorf("got %q", got)
	}
	_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("rodata"), Key: aws.String("manifest"), Body: strings.NewReader("x")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "AccessDenied" {
		t.Errorf("put into the read-only view: %v, want AccessDenied", err)
	}
}

// TestS3Health: StartS3 returned, so the store answers; and it answers
// unsigned requests with S3's own refusal, not something else on the port.
func TestS3Health(t *testing.T) {
	s := storetest.StartS3(t, t.TempDir())
	resp, err := http.Get(s.Endpoint + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Server") != "VERSITYGW" {
		t.Errorf("unsigned GET /: %s, server %q; want 403 from VERSITYGW", resp.Status, resp.Header.Get("Server"))
	}
}

// TestPinnedVersionsMatchMakefile: make setup installs the versions the
// helpers insist on.
func TestPinnedVersionsMatchMakefile(t *testing.T) {
	root, err := storetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"VERSITYGW_VERSION":       storetest.VersityGWVersion,
		"FAKE_GCS_SERVER_VERSION": storetest.FakeGCSServerVersion,
		"AZURITE_VERSION":         storetest.AzuriteVersion,
	} {
		m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(\S+)$`).FindSubmatch(mk)
		if m == nil || string(m[1]) != want {
			t.Errorf("Makefile's %s is %q, storetest wants %s", name, m, want)
		}
	}
}
