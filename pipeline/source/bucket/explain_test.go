package bucket

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/storetest"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// openErr opens url with env set and returns the error, which must be
// one (a store that opens fails the test).
func openErr(t *testing.T, url string, env map[string]string) error {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pol := source.Policy{Attempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, RequestTimeout: 5 * time.Second}
	st, err := source.Open(ctx, url, source.WithPolicy(pol))
	if err == nil {
		st.Close()
		t.Fatalf("%s opened", url)
	}
	return err
}

type openCase struct {
	name, url string
	env       map[string]string
	is        error // nil: not checked
	says      []string
}

func checkOpenErrors(t *testing.T, cases []openCase, secrets ...string) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := openErr(t, c.url, c.env)
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("%v\nwant errors.Is %v", err, c.is)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%v\ndoes not say %q", err, s)
				}
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("%v\nshows a credential", err)
				}
			}
		})
	}
}

// TestOpenErrorsS3: a store that cannot be opened says why in the user's
// terms and names what fixes it: no credentials (the SDK says "no EC2
// IMDS role found"), refused credentials, no such bucket, the wrong
// region, and an endpoint that refuses connections or does not exist.
func TestOpenErrorsS3(t *testing.T) {
	s, _ := s3Env(t, nil)
	checkOpenErrors(t, []openCase{
		{"no credentials", "s3://bkt/data", map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, source.ErrDenied,
			[]string{"s3://bkt/data", "no AWS credentials were found (tried AWS_ACCESS_KEY_ID", "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"}},
		{"wrong secret", "s3://bkt/data", map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong-secret-value"}, source.ErrDenied,
			[]string{"SignatureDoesNotMatch", "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"}},
		{"no bucket", "s3://nobkt/data", nil, source.ErrNotExist, []string{"NoSuchBucket", "there is no bucket nobkt", "AWS_ENDPOINT_URL and AWS_REGION"}},
		{"wrong region", "s3://bkt/data", map[string]string{"AWS_REGION": "eu-west-3"}, nil,
			[]string{"the bucket bkt is in region " + s.Region + ": set AWS_REGION=" + s.Region}},
		{"connection refused", "s3://bkt/data", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, source.ErrUnavailable,
			[]string{"connection refused", "cannot reach the store at http://127.0.0.1:1 (AWS_ENDPOINT_URL"}},
		{"no such host", "s3://bkt/data", map[string]string{"AWS_ENDPOINT_URL": "http://no-such-host.invalid:9000"}, source.ErrUnavailable,
			[]string{"no such host no-such-host.invalid: cannot reach the store at http://no-such-host.invalid:9000 (AWS_ENDPOINT_URL"}},
	}, s.SecretKey, "wrong-secret-value")
}

// TestOpenErrorsAzure: the same on Azurite: a refused key, no such
// container, an account name that does not exist (gocloud calls the DNS
// failure "NotFound"; it is not a missing object), a refused connection,
// and an identity over http.
func TestOpenErrorsAzure(t *testing.T) {
	azureEnv(t, nil)
	checkOpenErrors(t, []openCase{
		{"wrong key", "azblob://ctr/data", map[string]string{"AZURE_STORAGE_KEY": "d3JvbmcK"}, source.ErrDenied,
			[]string{"azblob://ctr/data", "HTTP 403 AuthorizationFailure (GET http://", `the store refused the credential for container ctr of account "devstoreaccount1": check AZURE_STORAGE_KEY`}},
		{"no container", "azblob://noctr/data", nil, source.ErrNotExist,
			[]string{"HTTP 404 ContainerNotFound", `there is no container noctr in storage account "devstoreaccount1"`}},
		{"no such account", "azblob://ctr/data", map[string]string{"AZURE_STORAGE_ACCOUNT": "nosuchaccount0x9z", "AZURE_STORAGE_DOMAIN": "",
			"AZURE_STORAGE_IS_LOCAL_EMULATOR": "", "AZURE_STORAGE_PROTOCOL": ""}, source.ErrUnavailable,
			[]string{`no such host nosuchaccount0x9z.blob.core.windows.net: is AZURE_STORAGE_ACCOUNT ("nosuchaccount0x9z") the storage account's name?`}},
		{"connection refused", "azblob://ctr/data", map[string]string{"AZURE_STORAGE_DOMAIN": "127.0.0.1:1"}, source.ErrUnavailable,
			[]string{"cannot reach the store at http://127.0.0.1:1 (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_DOMAIN"}},
		{"identity over http", "azblob://ctr/data", map[string]string{"AZURE_STORAGE_KEY": ""}, nil,
			[]string{"with AZURE_STORAGE_PROTOCOL=http (an emulator), set AZURE_STORAGE_KEY or a connection string"}},
	}, storetest.AzuriteKey)
}

// TestOpenErrorsGCS: the same on fake-gcs-server: no such bucket, and an
// emulator that refuses connections.
func TestOpenErrorsGCS(t *testing.T) {
	g := storetest.StartGCS(t, t.TempDir())
	g.CreateBucket(t, "gb")
	for _, kv := range g.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	checkOpenErrors(t, []openCase{
		{"no bucket", "gs://nogb/data", nil, source.ErrNotExist, []string{"there is no bucket nogb: check the URL's bucket name"}},
		{"connection refused", "gs://gb/data", map[string]string{"STORAGE_EMULATOR_HOST": "127.0.0.1:1"}, source.ErrUnavailable,
			[]string{"cannot reach the store at http://127.0.0.1:1 (STORAGE_EMULATOR_HOST"}},
	})
}

// TestAdvice: what cannot be staged on a loopback store: Google's "no
// credentials" and Azure's default chain finding no identity.
func TestAdvice(t *testing.T) {
	for _, c := range []struct {
		scheme string
		err    error
		says   string
	}{
		{"gs", errors.New("listing: blob: google: could not find default credentials. See https://cloud.google.com/docs/authentication"),
			"set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file, or run gcloud auth application-default login"},
		{"azblob", errors.New("listing: DefaultAzureCredential: failed to acquire a token"),
			"set one of them, or give this machine an identity"},
	} {
		if got := adviceFor(c.scheme, "b", c.err); !strings.Contains(got, c.says) {
			t.Errorf("%s: %v: advice %q, want %q", c.scheme, c.err, got, c.says)
		}
		if classify(c.err, false) != kindDenied {
			t.Errorf("%v: classified %v, want denied (not retried)", c.err, classify(c.err, false))
		}
	}
}
