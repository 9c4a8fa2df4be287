package storetest_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/storetest"
)

// TestChain is the smoke test of the whole test rig: versitygw serving
// the committed photos and shards made from them, the fault proxy in
// front (faults off), and the real aws-sdk-go-v2 client. A ranged GET
// returns the right bytes with the object's ETag, a member's range in a
// shard is its photo, and a GET conditional on a stale ETag is refused
// with 412.
func TestChain(t *testing.T) {
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "chain")
	etags := s.PutTree(t, "chain", "photos/", photos)
	shardDir := t.TempDir()
	samples := storetest.WriteShards(t, photos, shardDir, 8)
	shardETags := s.PutTree(t, "chain", "shards/", shardDir)
	p, err := faultproxy.New(s.Endpoint, 1, faultproxy.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := s.Client(storetest.Via(p.URL()), storetest.NoRetry)

	key := "photos/kite/000010.jpg"
	file, err := os.ReadFile(filepath.Join(photos, "kite", "000010.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.GetObject(ctx(t), &s3.GetObjectInput{
		Bucket: aws.String("chain"), Key: aws.String(key), Range: aws.String("bytes=100-1099"),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, file[100:1100]) {
		t.Errorf("bytes=100-1099 of %s: %d bytes (%v), not the file's", key, len(got), err)
	}
	if want := fmt.Sprintf("bytes 100-1099/%d", len(file)); aws.ToString(out.ContentRange) != want {
		t.Errorf("Content-Range %q, want %q", aws.ToString(out.ContentRange), want)
	}
	if aws.ToString(out.ETag) == "" || aws.ToString(out.ETag) != etags[key] {
		t.Errorf("ranged GET's ETag %q, the object's %q", aws.ToString(out.ETag), etags[key])
	}

	// A sample is one ranged GET inside its shard.
	sm := samples[len(samples)/2]
	out, err = c.GetObject(ctx(t), &s3.GetObjectInput{
		Bucket: aws.String("chain"), Key: aws.String("shards/" + sm.Shard),
		Range:   aws.String(fmt.Sprintf("bytes=%d-%d", sm.Offset, sm.Offset+sm.Size-1)),
		IfMatch: aws.String(shardETags["shards/"+sm.Shard]),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(out.Body)
	out.Body.Close()
	photo, _ := os.ReadFile(filepath.Join(photos, sm.Source))
	if err != nil || !bytes.Equal(got, photo) {
		t.Errorf("%s's range in %s: %d bytes (%v), not %s", sm.Member, sm.Shard, len(got), err, sm.Source)
	}

	// An object replaced since its ETag was read is refused, not served.
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{
		Bucket: aws.String("chain"), Key: aws.String(key), Range: aws.String("bytes=0-9"),
		IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`),
	})
	var re *awshttp.ResponseError
	var apiErr smithy.APIError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusPreconditionFailed ||
		!errors.As(err, &apiErr) || apiErr.ErrorCode() != "PreconditionFailed" {
		t.Errorf("GET If-Match a stale ETag: %v, want 412 PreconditionFailed", err)
	}
	if st := p.Stats(); st.Requests != 3 || st.Total() != 0 {
		t.Errorf("proxy stats %+v, want the 3 GETs and no faults", st)
	}
}

// TestChainGCS: fake-gcs-server behind the proxy, which must send the
// server's own Host (TargetHost) for its XML reads; a throttle from the
// proxy reaches the client as a 429.
func TestChainGCS(t *testing.T) {
	g := storetest.StartGCS(t, t.TempDir())
	g.CreateBucket(t, "gchain")
	objs := g.PutTree(t, "gchain", "photos/", photos)
	p, err := faultproxy.New(g.Endpoint, 1, faultproxy.Plan{}, faultproxy.TargetHost())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	name := "photos/kite/000010.jpg"
	file, _ := os.ReadFile(filepath.Join(photos, "kite", "000010.jpg"))
	get := func() *http.Response {
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, p.URL()+"/gchain/"+name, nil)
		req.Header.Set("Range", "bytes=100-1099")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, file[100:1100]) {
		t.Errorf("ranged read through the proxy: %s, %d bytes", resp.Status, len(body))
	}
	if got, want := resp.Header.Get("X-Goog-Generation"), fmt.Sprint(objs[name].Generation); got != want {
		t.Errorf("generation %q, want %q", got, want)
	}
	if err := p.SetPlan(faultproxy.Plan{Down: faultproxy.TooManyRequests}); err != nil {
		t.Fatal(err)
	}
	resp = get()
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("throttled read: %s, want 429", resp.Status)
	}
}
