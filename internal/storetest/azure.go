package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/stoker-dev/stoker/internal/localnet"
)

// AzuriteVersion is the Azurite the tests run, the Makefile's
// AZURITE_VERSION (a test checks that they agree). Azurite is an npm
// package: make setup installs it into .bin/azurite with npm, and it runs
// on the machine's node.
const AzuriteVersion = "3.35.0"

// Azurite's well-known development account (its documentation's, the
// same in every Azurite): not a secret.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azure is an Azurite process serving Azure Blob Storage over plain HTTP
// on a loopback port, keeping its containers in a directory, for the
// development account (AzuriteAccount, AzuriteKey).
type Azure struct {
	// Endpoint is the account's blob service URL,
	// http://127.0.0.1:PORT/devstoreaccount1 (path-style, as Azurite
	// addresses accounts).
	Endpoint string
	// Host is 127.0.0.1:PORT.
	Host string
	// Dir is the directory it keeps its data in.
	Dir string

	proc   *proc
	client *azblob.Client
}

// azuritePath is Azurite's blob server script, or fails the test saying
// how to get it: $STOKER_AZURITE (a main.js or azurite-blob), else the
// one make setup installs into .bin/azurite, which must be the pinned
// version.
func azuritePath(t T) string {
	t.Helper()
	if p := os.Getenv("STOKER_AZURITE"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("STOKER_AZURITE=%s: %v (unset it to use the one make setup installs)", p, err)
		}
		return p
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("azurite: %v", err)
	}
	pkg := filepath.Join(root, ".bin", "azurite", "node_modules", "azurite")
	data, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		t.Fatalf("azurite %s is not installed (%v): run make setup (or make stores), or set STOKER_AZURITE to Azurite's azurite-blob", AzuriteVersion, err)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(data, &v); err != nil || v.Version != AzuriteVersion {
		t.Fatalf("%s is azurite %q (%v), the tests want %s: run make setup", pkg, v.Version, err, AzuriteVersion)
	}
	return filepath.Join(pkg, "dist", "src", "blob", "main.js")
}

// StartAzure starts Azurite's blob service keeping its data in dir, on a
// free loopback port, waits until it answers, and stops it when the test
// ends. It fails the test, saying to run make setup, when the pinned
// Azurite or node is missing.
func StartAzure(t T, dir string) *Azure {
	t.Helper()
	script := azuritePath(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("azurite runs on node, which is not on PATH (%v): run make setup", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		t.Fatal(err)
	}
	a := &Azure{Dir: dir}
	for attempt := 1; ; attempt++ {
		port, err := localnet.FreePortOn("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		a.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		a.Endpoint = "http://" + a.Host + "/" + AzuriteAccount
		args := []string{script,
			"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port), "--location", dir,
			// The Go SDK may speak a newer API version than this Azurite
			// knows; what stoker uses is in every version.
			"--skipApiVersionCheck", "--disableTelemetry", "--silent",
		}
		env := []string{"PATH=" + filepath.Dir(node) + ":/usr/bin:/bin", "HOME=" + os.TempDir(), "TMPDIR=" + os.TempDir()}
		a.proc, err = startProc("azurite", node, args, env, a.healthy)
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("retrying on another port: %v", err)
	}
	a.proc.cleanup(t)
	cred, err := azblob.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	if a.client, err = azblob.NewClientWithSharedKeyCredential(a.Endpoint+"/", cred, &azblob.ClientOptions{
		ClientOptions: policy.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}},
	}); err != nil {
		t.Fatal(err)
	}
	return a
}

// healthy: any HTTP answer from the account's URL (an unsigned request is
// refused, but answered).
func (a *Azure) healthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Endpoint+"?comp=list", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Stop kills the server now; the test's cleanup would otherwise do it.
func (a *Azure) Stop(t T) {
	t.Helper()
	if err := a.proc.stop(); err != nil {
		t.Fatal(err)
	}
}

// URL is the azblob:// URL of prefix in container, as --dataset takes it.
func (a *Azure) URL(container, prefix string) string {
	return "azblob://" + container + "/" + strings.TrimPrefix(prefix, "/")
}

// Env is the environment that points stoker (gocloud.dev's azureblob
// variables) at this server with the development account's shared key,
// and blanks the other ways to name a credential or an endpoint.
func (a *Azure) Env() []string { return a.EnvFor(a.Host) }

// EnvFor is Env with another host:port, such as a fault proxy's.
func (a *Azure) EnvFor(host string) []string {
	return []string{
		"AZURE_STORAGE_ACCOUNT=" + AzuriteAccount,
		"AZURE_STORAGE_KEY=" + AzuriteKey,
		"AZURE_STORAGE_DOMAIN=" + host,
		"AZURE_STORAGE_PROTOCOL=http",
		"AZURE_STORAGE_IS_LOCAL_EMULATOR=true",
		"AZURE_STORAGE_SAS_TOKEN=",
		"AZURE_STORAGE_CONNECTION_STRING=",
		"AZURE_STORAGEBLOB_CONNECTIONSTRING=",
	}
}

// ConnectionString is the development account's connection string for
// this server (BlobEndpoint names it).
func (a *Azure) ConnectionString() string {
	return "DefaultEndpointsProtocol=http;AccountName=" + AzuriteAccount + ";AccountKey=" + AzuriteKey +
		";BlobEndpoint=" + a.Endpoint + ";"
}

// CreateContainer makes container.
func (a *Azure) CreateContainer(t T, container string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := a.client.CreateContainer(ctx, container, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		t.Fatalf("create container %s: %v", container, err)
	}
}

// Put writes data as the blob name in container and returns its ETag as
// the upload's answer gives it.
func (a *Azure) Put(t T, container, name string, data []byte) azcore.ETag {
	t.Helper()
	etag, err := a.put(container, name, data)
	if err != nil {
		t.Fatal(err)
	}
	return etag
}

func (a *Azure) put(container, name string, data []byte) (azcore.ETag, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := a.client.UploadBuffer(ctx, container, name, data, nil)
	if err != nil {
		return "", fmt.Errorf("put azblob://%s/%s: %w", container, name, err)
	}
	if resp.ETag == nil {
		return "", fmt.Errorf("put azblob://%s/%s: no ETag", container, name)
	}
	return *resp.ETag, nil
}

// Delete deletes the blob name in container.
func (a *Azure) Delete(t T, container, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := a.client.DeleteBlob(ctx, container, name, nil); err != nil {
		t.Fatalf("delete azblob://%s/%s: %v", container, name, err)
	}
}

// PutTree copies every regular file under dir into container under
// prefix, as PutTree of S3 does, and returns each blob's ETag by name.
func (a *Azure) PutTree(t T, container, prefix, dir string) map[string]azcore.ETag {
	t.Helper()
	var mu sync.Mutex
	etags := map[string]azcore.ETag{}
	err := putTree(dir, prefix, func(name string, data []byte) error {
		etag, err := a.put(container, name, data)
		mu.Lock()
		etags[name] = etag
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatalf("PutTree %s into azblob://%s/%s: %v", dir, container, prefix, err)
	}
	return etags
}

// Client is an azblob client of the development account on this server,
// without retries.
func (a *Azure) Client() *azblob.Client { return a.client }
