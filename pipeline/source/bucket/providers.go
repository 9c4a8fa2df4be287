package bucket

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	gblob "gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/s3blob"
)

// provider is what differs between S3, GCS and Azure: how an object's
// version is read from a listing, an attribute call and a reader (a
// listing's entry or an attribute answer without what the store's
// protocol says it carries is an ErrProtocol error), and how a read asks
// for one version only (an error if the client library would not take
// it).
type provider interface {
	listVersion(*gblob.ListObject) (string, error)
	attrVersion(*gblob.Attributes) (string, error)
	readerVersion(*gblob.Reader) string
	precondition(as func(any) bool, version string) error
	// answered is which bytes a reader's answer says it carries; false when
	// the provider's reader does not say.
	answered(*gblob.Reader) (answer, bool)
}

// answer is what a GET's answer says its body is: bytes [start,
// start+length) of an object of total bytes (its Content-Range), or, with
// whole, the object itself (no Content-Range: HTTP 200), length bytes.
type answer struct {
	start, length, total int64
	whole                bool
	raw                  string // the Content-Range, for messages
}

// answerOf reads an answer's Content-Range ("bytes A-B/TOTAL") and
// Content-Length; no Content-Range is the whole object.
func answerOf(contentRange *string, contentLength *int64) answer {
	n := int64(-1)
	if contentLength != nil {
		n = *contentLength
	}
	if contentRange == nil || *contentRange == "" {
		return answer{start: 0, length: n, total: n, whole: true}
	}
	cr := *contentRange
	sp := answer{start: -1, length: n, total: -1, raw: cr}
	r, ok := strings.CutPrefix(cr, "bytes ")
	ab, t, ok2 := strings.Cut(r, "/")
	a, b, ok3 := strings.Cut(ab, "-")
	if !ok || !ok2 || !ok3 {
		return sp
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	total, err3 := strconv.ParseInt(t, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || last < start || last-start+1 != n {
		return sp // lengths that disagree: refused as another range
	}
	sp.start, sp.total = start, total
	return sp
}

func openProvider(ctx context.Context, scheme, bucket string) (provider, *gblob.Bucket, error) {
	switch scheme {
	case "s3":
		b, err := openS3(ctx, bucket)
		return s3Provider{}, b, err
	case "gs":
		b, err := openGCS(ctx, bucket)
		return gcsProvider{}, b, err
	case "azblob":
		b, err := openAzure(ctx, bucket)
		return azureProvider{}, b, err
	}
	return nil, nil, fmt.Errorf("unsupported scheme %q", scheme)
}

// openS3 opens an S3 bucket with the AWS SDK's default configuration
// chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the
// shared config files, web identity (IRSA), ECS and EC2 instance
// metadata; AWS_REGION. AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) names an
// S3-compatible store (MinIO, Ceph, R2, versitygw): it is then addressed
// path-style, and the SDK's checksums are sent and checked only where the
// API requires them, which such stores do not all implement.
func openS3(ctx context.Context, bucket string) (*gblob.Bucket, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	endpoint := cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != ""
	if cfg.Region == "" {
		if !endpoint {
			return nil, fmt.Errorf("no AWS region: set AWS_REGION (or a region in the shared config file)")
		}
		cfg.Region = "us-east-1" // what S3-compatible stores answer to by default
	}
	// Read-ahead keeps up to a hundred or so requests in flight to one
	// host: the SDK's default client keeps only 10 idle connections per
	// host, so the rest would be new connections (and TLS handshakes)
	// each time.
	// Idle ones are closed after 20 s, as S3 itself closes them about
	// then: keeping them longer only keeps their goroutines.
	//
	// The client is guarded (guardClient): listing and error bodies are
	// read within bounds before the SDK parses them, and no redirect
	// leaves the store's host.
	hc, ok := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = 2 * maxIdlePerHost
		tr.MaxIdleConnsPerHost = maxIdlePerHost
		tr.IdleConnTimeout = 20 * time.Second
	}).Freeze().(*http.Client)
	if !ok {
		return nil, fmt.Errorf("AWS SDK: its HTTP client is no *http.Client")
	}
	cfg.HTTPClient = guardClient(hc, s3Guard)
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.Retryer = aws.NopRetryer{} // the store's policy retries
		if endpoint || (o.BaseEndpoint != nil && *o.BaseEndpoint != "") {
			o.UsePathStyle = true
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	return s3blob.OpenBucket(ctx, client, bucket, nil)
}

// openAzure opens an Azure container with a client whose own retries
// are off (the store's policy retries: the SDK's would try each of our
// tries up to 4 times, and the metrics would count one). Which endpoint
// and credential: azureContainer.
func openAzure(ctx context.Context, containerName string) (*gblob.Bucket, error) {
	client, err := azureContainer(containerName, azureClientOptions())
	if err != nil {
		return nil, err
	}
	return azureblob.OpenBucket(ctx, client, nil)
}

// azureClientOptions are the container client's options: one try per
// request, the store's policy retries; the HTTP client guarded
// (guardClient), as S3's.
func azureClientOptions() *container.ClientOptions {
	o := &container.ClientOptions{}
	o.Transport = guardClient(&http.Client{Transport: storeTransport()}, azureGuard)
	o.Retry = policy.RetryOptions{MaxRetries: -1} // < 0: one try, no retries
	o.Telemetry = policy.TelemetryOptions{ApplicationID: "stoker"}
	return o
}

// azureContainer is the client of containerName, from the variables
// gocloud.dev's azblob:// opener reads, in this order:
//
//  1. AZURE_STORAGE_CONNECTION_STRING (or AZURE_STORAGEBLOB_CONNECTIONSTRING):
//     the endpoint (BlobEndpoint, or AccountName and EndpointSuffix) and
//     the credential (AccountKey or SharedAccessSignature) together. Set
//     beside AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN it is an error
//     (which was meant?), not silently one or the other; beside an
//     AZURE_STORAGE_ACCOUNT it must name the same account.
//  2. AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY (a shared key), else
//     with AZURE_STORAGE_SAS_TOKEN, else alone: Azure's default
//     credential chain (environment, workload identity, managed identity,
//     the az CLI's login). The endpoint is https://ACCOUNT.blob.core.windows.net,
//     or AZURE_STORAGE_DOMAIN's (a sovereign cloud, a custom or private
//     endpoint's domain), AZURE_STORAGE_PROTOCOL=http, and for an emulator
//     (Azurite) AZURE_STORAGE_IS_LOCAL_EMULATOR=true with
//     AZURE_STORAGE_DOMAIN=HOST:PORT: the account is then the URL's first
//     path segment.
func azureContainer(containerName string, opts *container.ClientOptions) (*container.Client, error) {
	account, key, sas := os.Getenv("AZURE_STORAGE_ACCOUNT"), os.Getenv("AZURE_STORAGE_KEY"), os.Getenv("AZURE_STORAGE_SAS_TOKEN")
	connVar, conn := "AZURE_STORAGE_CONNECTION_STRING", os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
	if conn == "" {
		connVar, conn = "AZURE_STORAGEBLOB_CONNECTIONSTRING", os.Getenv("AZURE_STORAGEBLOB_CONNECTIONSTRING")
	}
	if conn != "" {
		switch {
		case key != "":
			return nil, fmt.Errorf("both %s and AZURE_STORAGE_KEY are set: the connection string carries its own endpoint and credential; unset one", connVar)
		case sas != "":
			return nil, fmt.Errorf("both %s and AZURE_STORAGE_SAS_TOKEN are set: the connection string carries its own endpoint and credential; unset one", connVar)
		}
		if name := connAccount(conn); account != "" && name != "" && name != account {
			return nil, fmt.Errorf("%s is for account %q but AZURE_STORAGE_ACCOUNT is %q: unset one", connVar, name, account)
		}
		c, err := container.NewClientFromConnectionString(conn, containerName, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (want AccountName=...;AccountKey=...;BlobEndpoint=https://...; the connection string is not shown)", connVar, err)
		}
		return c, nil
	}
	if account == "" {
		return nil, fmt.Errorf("no Azure storage account: set AZURE_STORAGE_ACCOUNT (with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, " +
			"or an Azure identity: workload or managed identity, az login), or AZURE_STORAGE_CONNECTION_STRING")
	}
	svc, err := azureblob.NewServiceURL(azureblob.NewDefaultServiceURLOptions())
	if err != nil {
		return nil, fmt.Errorf("Azure endpoint (AZURE_STORAGE_DOMAIN, AZURE_STORAGE_PROTOCOL): %w", err)
	}
	containerURL, err := url.JoinPath(string(svc), containerName)
	if err != nil {
		return nil, err
	}
	switch {
	case key != "":
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, fmt.Errorf("AZURE_STORAGE_KEY: %w", err)
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
	case sas != "":
		return container.NewClientWithNoCredential(containerURL, opts) // the token is in svc's query
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("Azure credentials for account %s (AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN and "+
			"AZURE_STORAGE_CONNECTION_STRING are unset, so Azure's default chain was tried): %w", account, err)
	}
	return container.NewClient(containerURL, cred, opts)
}

// connAccount is the AccountName a connection string names, if any.
func connAccount(conn string) string {
	for part := range strings.SplitSeq(conn, ";") {
		if k, v, ok := strings.Cut(part, "="); ok && k == "AccountName" {
			return v
		}
	}
	return ""
}

// maxIdlePerHost is the idle connections kept per store host: above the
// read-ahead's requests in flight (WithMaxInFlight's default).
const maxIdlePerHost = 256

// storeTransport is the HTTP transport of Azure's and GCS's clients (the
// AWS SDK builds its own alike): Go's default, keeping maxIdlePerHost idle
// connections per host for the read-ahead's requests in flight (Go's
// default keeps 2), closed after 20 s idle, and TLS 1.2 at least.
func storeTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 2 * maxIdlePerHost
	tr.MaxIdleConnsPerHost = maxIdlePerHost
	tr.IdleConnTimeout = 20 * time.Second
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	return tr
}

type s3Provider struct{}

// listVersion is the entry's ETag; "" where the store gives none
// (versitygw serving files it did not write), which content hashes
// cover (pipeline's StoreDataset).
func (s3Provider) listVersion(lo *gblob.ListObject) (string, error) {
	var o s3types.Object
	if lo.As(&o) {
		return aws.ToString(o.ETag), nil
	}
	return "", nil
}

func (s3Provider) attrVersion(a *gblob.Attributes) (string, error) {
	var h s3.HeadObjectOutput
	if a.As(&h) {
		return aws.ToString(h.ETag), nil
	}
	return a.ETag, nil
}

func (s3Provider) readerVersion(rd *gblob.Reader) string {
	var g s3.GetObjectOutput
	if rd.As(&g) {
		return aws.ToString(g.ETag)
	}
	return ""
}

func (s3Provider) answered(rd *gblob.Reader) (answer, bool) {
	var g s3.GetObjectOutput
	if !rd.As(&g) {
		return answer{}, false
	}
	return answerOf(g.ContentRange, g.ContentLength), true
}

func (s3Provider) precondition(as func(any) bool, version string) error {
	var in *s3.GetObjectInput
	if !as(&in) {
		return errNoPrecondition
	}
	in.IfMatch = aws.String(version)
	return nil
}

// errNoPrecondition: a client library would not take a read's version
// precondition (a change of its As types), and the read is not made
// rather than made for any version.
var errNoPrecondition = errors.New("the store's client library took no version precondition for a read")

// azureProvider's version is the blob's ETag, unquoted: Azure (and
// Azurite) list blobs with bare ETags (0x8DC...) but give them quoted
// ("0x8DC...") from a download or the blob's properties, so the same
// version would compare unequal as strings.
type azureProvider struct{}

// azureETag is etag as the provider's version: without its quotes (and
// a weak validator's W/, which Azure does not send but HTTP allows).
func azureETag(etag azcore.ETag) string {
	return strings.Trim(strings.TrimPrefix(string(etag), "W/"), `"`)
}

func (azureProvider) listVersion(lo *gblob.ListObject) (string, error) {
	var bi container.BlobItem
	if lo.As(&bi) && bi.Properties != nil && bi.Properties.ETag != nil {
		return azureETag(*bi.Properties.ETag), nil
	}
	return "", nil
}

func (azureProvider) attrVersion(a *gblob.Attributes) (string, error) {
	var p blob.GetPropertiesResponse
	if a.As(&p) && p.ETag != nil {
		return azureETag(*p.ETag), nil
	}
	return azureETag(azcore.ETag(a.ETag)), nil
}

func (azureProvider) readerVersion(rd *gblob.Reader) string {
	var r azblob.DownloadStreamResponse
	if rd.As(&r) && r.ETag != nil {
		return azureETag(*r.ETag)
	}
	return ""
}

func (azureProvider) answered(rd *gblob.Reader) (answer, bool) {
	var r azblob.DownloadStreamResponse
	if !rd.As(&r) {
		return answer{}, false
	}
	return answerOf(r.ContentRange, r.ContentLength), true
}

// precondition asks for the version with If-Match, whose ETag HTTP wants
// quoted.
func (azureProvider) precondition(as func(any) bool, version string) error {
	var o *azblob.DownloadStreamOptions
	if !as(&o) {
		return errNoPrecondition
	}
	etag := azcore.ETag(`"` + version + `"`)
	if o.AccessConditions == nil {
		o.AccessConditions = &azblob.AccessConditions{}
	}
	if o.AccessConditions.ModifiedAccessConditions == nil {
		o.AccessConditions.ModifiedAccessConditions = &blob.ModifiedAccessConditions{}
	}
	o.AccessConditions.ModifiedAccessConditions.IfMatch = &etag
	return nil
}
