package storetest_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/stoker-dev/stoker/internal/storetest"
)

// TestAzure puts blobs into Azurite and reads them back with the Azure
// SDK: a ranged download, and a listing of a prefix. It also pins down
// what made azblob:// fail before stoker normalized versions: Azurite
// gives a blob's ETag quoted from an upload, a download and its
// properties, and unquoted in a listing (as Azure does, by public
// reports).
func TestAzure(t *testing.T) {
	a := storetest.StartAzure(t, t.TempDir())
	a.CreateContainer(t, "adata")
	etags := a.PutTree(t, "adata", "photos/", photos)
	name := "photos/flow/000007.jpg"
	file, err := os.ReadFile(filepath.Join(photos, "flow", "000007.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	c := a.Client()
	resp, err := c.DownloadStream(ctx(t), "adata", name, &azblob.DownloadStreamOptions{Range: azblob.HTTPRange{Offset: 100, Count: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(body, file[100:1100]) {
		t.Errorf("ranged download: %d bytes (%v), want bytes 100-1099", len(body), err)
	}
	if resp.ETag == nil || *resp.ETag != etags[name] || !strings.HasPrefix(string(*resp.ETag), `"`) {
		t.Errorf("download's ETag %v, the upload's %q (quoted)", resp.ETag, etags[name])
	}
	pager := c.NewListBlobsFlatPager("adata", &container.ListBlobsFlatOptions{Prefix: strPtr("photos/flow/")})
	var names []string
	for pager.More() {
		page, err := pager.NextPage(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			names = append(names, *b.Name)
			if got, want := string(*b.Properties.ETag), strings.Trim(string(etags[*b.Name]), `"`); got != want {
				t.Errorf("%s: listed ETag %q, want %q (the upload's, unquoted)", *b.Name, got, want)
			}
		}
	}
	if want := "photos/flow/000007-422.jpg photos/flow/000007.jpg photos/flow/000025.jpg"; strings.Join(names, " ") != want {
		t.Errorf("list photos/flow/: %v, want %s", names, want)
	}
}

func strPtr(s string) *string { return &s }
