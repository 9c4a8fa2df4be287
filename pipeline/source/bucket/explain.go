package bucket

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// explainOpen is err, the failure of a store's first listing, with what to
// do about it: which setting names the credential, the endpoint, the
// bucket or the region that failed, for S3 (AWS_*), GCS
// (GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST) and Azure
// (AZURE_STORAGE_*). The SDKs' own messages say what went wrong in their
// terms ("no EC2 IMDS role found", a bare 403, "NotFound" for a DNS
// failure); this says it in the user's. err is wrapped, so its sentinel
// (ErrDenied, ErrNotExist, ErrUnavailable) still tells what it was.
func explainOpen(scheme, bucket string, err error) error {
	if advice := adviceFor(scheme, bucket, err); advice != "" {
		return fmt.Errorf("%w\n  %s", err, advice)
	}
	return err
}

func adviceFor(scheme, bucket string, err error) string {
	switch {
	case credentialsMissing(err):
		return missingCredentials[scheme]
	case errors.Is(err, source.ErrDenied):
		return fmt.Sprintf(refused[scheme], bucket, azureAccount())
	case scheme == "azblob" && strings.Contains(err.Error(), "not permitted for non-TLS"):
		return "an Azure identity's token goes over https only: with AZURE_STORAGE_PROTOCOL=http (an emulator), " +
			"set AZURE_STORAGE_KEY or a connection string"
	}
	if r := s3Region(err); scheme == "s3" && r != "" {
		return fmt.Sprintf("the bucket %s is in region %s: set AWS_REGION=%s", bucket, r, r)
	}
	if host, ok := noSuchHost(err); ok {
		if scheme == "azblob" && strings.HasSuffix(host, ".blob.core.windows.net") {
			return fmt.Sprintf("no such host %s: is AZURE_STORAGE_ACCOUNT (%q) the storage account's name? "+
				"(for another endpoint: AZURE_STORAGE_DOMAIN, or a connection string's BlobEndpoint)", host, azureAccount())
		}
		return fmt.Sprintf("no such host %s: %s", host, fmt.Sprintf(reach[scheme], endpointOf(scheme, err)))
	}
	switch {
	case errors.Is(err, source.ErrNotExist):
		return fmt.Sprintf(noBucket[scheme], bucket, azureAccount())
	case errors.Is(err, source.ErrUnavailable):
		return fmt.Sprintf(reach[scheme], endpointOf(scheme, err))
	}
	return ""
}

// What to set, by scheme. refused and noBucket take the bucket and
// Azure's account; reach the endpoint tried.
var (
	missingCredentials = map[string]string{
		"s3": "no AWS credentials were found (tried AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, " +
			"web identity, ECS and EC2 instance metadata): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
		"gs": "no Google credentials were found (tried GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default login " +
			"and the metadata server): set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file, or run " +
			"gcloud auth application-default login (STORAGE_EMULATOR_HOST=HOST:PORT for an emulator)",
		"azblob": "no Azure credential worked (AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN and AZURE_STORAGE_CONNECTION_STRING " +
			"are unset, and Azure's default chain found no identity): set one of them, or give this machine an identity " +
			"(workload or managed identity, az login) with the Storage Blob Data Reader role",
	}
	refused = map[string]string{
		"s3": "the store refused these credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE's), " +
			"and that they may list and read bucket %s%.0s",
		"gs": "the store refused these credentials: check that GOOGLE_APPLICATION_CREDENTIALS's account (or this machine's " +
			"identity) may list and read bucket %s (roles/storage.objectViewer)%.0s",
		"azblob": "the store refused the credential for container %s of account %q: check AZURE_STORAGE_KEY (or the " +
			"SAS token, the connection string's AccountKey, or the identity's Storage Blob Data Reader role)",
	}
	noBucket = map[string]string{
		"s3":     "there is no bucket %s at this endpoint: check the URL's bucket name, and AWS_ENDPOINT_URL and AWS_REGION%.0s",
		"gs":     "there is no bucket %s: check the URL's bucket name (and STORAGE_EMULATOR_HOST for an emulator)%.0s",
		"azblob": "there is no container %s in storage account %q: check the URL's container name and AZURE_STORAGE_ACCOUNT (or the connection string)",
	}
	reach = map[string]string{
		"s3":     "cannot reach the store at %s (AWS_ENDPOINT_URL, or AWS_REGION's S3 endpoint): is it up there, and is that the right address?",
		"gs":     "cannot reach the store at %s (STORAGE_EMULATOR_HOST, or Google's endpoint): is it up there, and is that the right address?",
		"azblob": "cannot reach the store at %s (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_DOMAIN and AZURE_STORAGE_PROTOCOL, or a connection string's BlobEndpoint): is it up there, and is that the right address?",
	}
)

// credentialsMissing says whether err is an SDK's "found no credential
// to sign with", which no retry mends: the AWS SDK's chain (ending at
// EC2 instance metadata), Google's Application Default Credentials, or
// Azure's default chain.
func credentialsMissing(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	for _, s := range []string{
		"get identity: get credentials:", "failed to retrieve credentials", "failed to refresh cached credentials", // AWS
		"could not find default credentials", // Google
		"DefaultAzureCredential:",            // Azure
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// noSuchHost is the host a DNS lookup in err said does not exist.
func noSuchHost(err error) (string, bool) {
	var de *net.DNSError
	if errors.As(err, &de) && de.IsNotFound {
		return de.Name, true
	}
	return "", false
}

// regionExpected is how S3 says which region a request should have been
// signed for.
var regionExpected = regexp.MustCompile(`region '?"?[a-z0-9-]+'?"? is wrong; expecting '?"?([a-z0-9-]+)`)

// s3Region is the region S3 says the bucket is in, when err says it
// was asked in another: a 301 with x-amz-bucket-region, or a 400
// AuthorizationHeaderMalformed "expecting <region>".
func s3Region(err error) string {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		if r := re.Response.Header.Get("X-Amz-Bucket-Region"); r != "" && re.HTTPStatusCode()/100 == 3 {
			return r
		}
	}
	if err != nil {
		if m := regionExpected.FindStringSubmatch(err.Error()); m != nil {
			return m[1]
		}
	}
	return ""
}

// requestURL is the endpoint of a request as Go's HTTP client quotes it
// in an error (Get "http://host:port/...").
var requestURL = regexp.MustCompile(`(?:Get|Head|Put|Post) "(https?://[^/"?]+)`)

// endpointOf is the endpoint a request in err went to (scheme://host),
// else what the settings name.
func endpointOf(scheme string, err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	if m := requestURL.FindStringSubmatch(fmt.Sprint(err)); m != nil {
		return m[1] // a request that gave up says its URL in its message alone
	}
	switch scheme {
	case "s3":
		if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
			return e
		}
		return "AWS S3"
	case "gs":
		if e := os.Getenv("STORAGE_EMULATOR_HOST"); e != "" {
			return e
		}
		return "storage.googleapis.com"
	}
	return "the account's endpoint"
}

// azureAccount is the storage account the settings name.
func azureAccount() string {
	if a := os.Getenv("AZURE_STORAGE_ACCOUNT"); a != "" {
		return a
	}
	for _, v := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING"} {
		if a := connAccount(os.Getenv(v)); a != "" {
			return a
		}
	}
	return ""
}
