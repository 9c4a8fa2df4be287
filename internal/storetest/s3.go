package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stoker-dev/stoker/internal/localnet"
)

// VersityGWVersion is the versitygw the tests run, the Makefile's
// VERSITYGW_VERSION (a test checks that they agree).
const VersityGWVersion = "v1.8.0"

var versitygw = tool{
	name:    "versitygw",
	envVar:  "STOKER_VERSITYGW",
	module:  "github.com/versity/versitygw",
	version: VersityGWVersion,
}

// S3 is a versitygw process serving a directory as S3 on a loopback port:
// Dir/<bucket>/<key> is the object key in bucket. One account, the root
// user, whose keys are made afresh for each store.
type S3 struct {
	// Endpoint is the store's URL, http://127.0.0.1:PORT (path-style
	// addressing: http://127.0.0.1:PORT/bucket/key).
	Endpoint string
	// AccessKey and SecretKey are the root user's credentials.
	AccessKey, SecretKey string
	// Region is the region the store says it is in and signatures name.
	Region string
	// Dir is the directory served.
	Dir string

	// health is the path of versitygw's unauthenticated health check
	// (--health), which startS3 polls until it answers: random, so that
	// another test's store that took the port meanwhile does not answer.
	health string
	proc   *proc
	helper *s3.Client // the helpers' own, so their uploads share connections
}

// StartS3 starts versitygw serving dir (a directory per bucket) on a free
// loopback port, waits until it answers, and stops it when the test ends.
// It fails the test, saying to run make setup, when the pinned versitygw is
// not installed ($STOKER_VERSITYGW names another binary).
//
// Put objects through the store (CreateBucket, Put, PutTree) rather than
// as files under dir: versitygw keeps an object's ETag in an extended
// attribute it writes on upload, and a file it did not write has none.
func StartS3(t T, dir string) *S3 {
	t.Helper()
	return startS3(t, dir, false, randomKey("STK", 17), randomKey("", 40))
}

// ReadOnly starts a second versitygw on the same directory with the same
// keys, which refuses every write (--readonly): a bucket stoker may read
// but not write a manifest into. It stops when the test ends.
func (s *S3) ReadOnly(t T) *S3 {
	t.Helper()
	return startS3(t, s.Dir, true, s.AccessKey, s.SecretKey)
}

func startS3(t T, dir string, readOnly bool, access, secret string) *S3 {
	t.Helper()
	exe := versitygw.path(t)
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &S3{
		AccessKey: access, SecretKey: secret, Region: "us-east-1", Dir: dir,
		health: "/storetest-health-" + randomKey("", 16),
	}
	// The port is free when chosen, not when versitygw binds it: a store
	// that exits at once most likely lost it to another process, so it
	// gets another port.
	for attempt := 1; ; attempt++ {
		port, err := localnet.FreePortOn("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.Endpoint = "http://" + addr
		args := []string{
			"--port", addr,
			"--region", s.Region,
			"--health", s.health,
			"--keep-alive", // connection reuse, as real stores allow
			"--quiet",      // no line per request
		}
		if readOnly {
			args = append(args, "--readonly")
		}
		args = append(args, "posix", dir)
		// The whole environment, as versitygw reads its flags' defaults
		// from VGW_*, ROOT_ACCESS_KEY and the like; the keys go this way
		// rather than in argv, which any user's ps shows.
		env := []string{
			"PATH=/usr/bin:/bin", "HOME=" + os.TempDir(), "TMPDIR=" + os.TempDir(),
			"ROOT_ACCESS_KEY_ID=" + s.AccessKey, "ROOT_SECRET_ACCESS_KEY=" + s.SecretKey,
		}
		s.proc, err = startProc("versitygw", exe, args, env, s.healthy)
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("retrying on another port: %v", err)
	}
	s.proc.cleanup(t)
	s.helper = s.Client()
	return s
}

// healthy asks the gateway's health check.
func (s *S3) healthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+s.health, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", s.health, resp.Status)
	}
	return nil
}

// Stop kills the store now (a store that goes away mid-test); the test's
// cleanup would otherwise do it.
func (s *S3) Stop(t T) {
	t.Helper()
	if err := s.proc.stop(); err != nil {
		t.Fatal(err)
	}
}

// URL is the s3:// URL of prefix in bucket, as --dataset takes it.
func (s *S3) URL(bucket, prefix string) string {
	return "s3://" + bucket + "/" + strings.TrimPrefix(prefix, "/")
}

// Env is the environment that points an AWS SDK's standard chain at this
// store: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_REGION, for a `stoker serve` process (cmd.Env = append(os.Environ(),
// s.Env()...): the last value of a name wins). It also blanks or redirects
// what a developer's own AWS settings could add: a profile, a session
// token, an S3-only endpoint, ~/.aws, and the EC2 metadata service.
func (s *S3) Env() []string { return s.EnvFor(s.Endpoint) }

// EnvFor is Env with another endpoint, such as a fault proxy's in front of
// the store.
func (s *S3) EnvFor(endpoint string) []string {
	none := filepath.Join(s.Dir, ".no-aws-config") // never created
	return []string{
		"AWS_ENDPOINT_URL=" + endpoint,
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_SESSION_TOKEN=",   // empty is unset to the SDKs
		"AWS_PROFILE=",         //
		"AWS_ENDPOINT_URL_S3=", //
		"AWS_CONFIG_FILE=" + none,
		"AWS_SHARED_CREDENTIALS_FILE=" + none,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Client is an aws-sdk-go-v2 S3 client of this store with its keys,
// path-style, and the SDK's default retryer; opts change it (Via, NoRetry,
// or any of the SDK's).
func (s *S3) Client(opts ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	}, opts...)
}

// Via makes a client talk to endpoint (a fault proxy) instead of the store.
func Via(endpoint string) func(*s3.Options) {
	return func(o *s3.Options) { o.BaseEndpoint = aws.String(endpoint) }
}

// NoRetry makes a client try each request once, so a test sees every fault
// as its own error.
func NoRetry(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// randomKey is prefix followed by n-len(prefix) random letters and digits.
func randomKey(prefix string, n int) string {
	return (prefix + rand.Text() + rand.Text())[:n]
}
