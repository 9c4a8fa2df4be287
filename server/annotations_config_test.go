package server

import (
	"strings"
	"testing"
)

// TestAnnotationsConfig: --annotations goes with a --dataset of the same
// name (local or in object storage); a YOLO dataset's on a disk without
// a --manifest (one in a bucket may have one).
func TestAnnotationsConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Datasets: map[string]string{"a": "/d"}, Annotations: map[string]string{"b": "/x.json"}}, "no such dataset"},
		{Config{Datasets: map[string]string{"a": "ftp://b/p"}, Annotations: map[string]string{"a": "/x.json"}}, "unsupported URL scheme"},
		{Config{Datasets: map[string]string{"a": "/d"}, Annotations: map[string]string{"a": "http://h/x.json"}}, "unsupported URL scheme"},
		{Config{Datasets: map[string]string{"a": "/d"}, Annotations: map[string]string{"a": "/data.yaml"}, Manifests: map[string]string{"a": "/m"}}, "--manifest and a YOLO dataset on a disk"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.cfg.Annotations, err, c.want)
		}
	}
	for _, c := range [][2]string{{"/d", "/x.json"}, {"s3://b/images/train", "s3://b/instances.json"}, {"gs://b/p", "/x.json"}, {"/d", "azblob://c/data.yaml"}, {"s3://b/images/train", "s3://b/data.yaml"}} {
		ok := Config{Datasets: map[string]string{"a": c[0]}, Annotations: map[string]string{"a": c[1]}, Workers: 1}
		if !strings.HasSuffix(c[1], ".yaml") || strings.HasPrefix(c[0], "s3://") {
			ok.Manifests = map[string]string{"a": "/m"}
		}
		if err := ok.Validate(); err != nil {
			t.Errorf("dataset %s with its annotations %s: %v", c[0], c[1], err)
		}
	}
}
