package storetest_test

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
)

// TestGCS puts objects into fake-gcs-server and reads them back the ways
// Google's Go client does: ranged reads on the XML path (/bucket/object,
// what the client uses for reads) with the generation and ETag in the
// headers, and listings of a prefix on the JSON API.
func TestGCS(t *testing.T) {
	g := storetest.StartGCS(t, t.TempDir())
	g.CreateBucket(t, "gdata")
	objs := g.PutTree(t, "gdata", "photos/", photos)
	name := "photos/flow/000007.jpg"
	file, err := os.ReadFile(filepath.Join(photos, "flow", "000007.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	o := objs[name]
	sum := md5.Sum(file)
	if o.Size != int64(len(file)) || o.Generation <= 0 || o.ETag != base64.StdEncoding.EncodeToString(sum[:]) {
		t.Errorf("%s: %+v, want size %d, a generation, the MD5 as ETag", name, o, len(file))
	}

	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, g.Endpoint+"/gdata/"+name, nil)
	req.Header.Set("Range", "bytes=100-1099")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, file[100:1100]) {
		t.Errorf("ranged read: %s, %d bytes; want 206 and bytes 100-1099", resp.Status, len(body))
	}
	if got, want := resp.Header.Get("X-Goog-Generation"), fmt.Sprint(o.Generation); got != want {
		t.Errorf("ranged read: generation %q, want %q", got, want)
	}
	if got := resp.Header.Get("Etag"); got != `"`+o.ETag+`"` {
		t.Errorf("ranged read: ETag %q, want %q", got, o.ETag)
	}

	resp, err = http.Get(g.Endpoint + "/storage/v1/b/gdata/o?prefix=" + url.QueryEscape("photos/flow/"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct{ Name string }
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	if want := "photos/flow/000007-422.jpg photos/flow/000007.jpg photos/flow/000025.jpg"; err != nil || strings.Join(names, " ") != want {
		t.Errorf("list photos/flow/: %v %v, want %s", names, err, want)
	}
	if env := g.Env(); len(env) == 0 || env[0] != "STORAGE_EMULATOR_HOST="+strings.TrimPrefix(g.Endpoint, "http://") {
		t.Errorf("Env: %v", env)
	}
}
