package server

import (
	"strings"
	"testing"
)

// TestAnnotationsConfig: --annotations goes with a --dataset of the same
// name, local, and without a --manifest.
func TestAnnotationsConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Datasets: map[string]string{"a": "/d"}, Annotations: map[string]string{"b": "/x.json"}}, "no such dataset"},
		{Config{Datasets: map[string]string{"a": "s3://b/p"}, Annotations: map[string]string{"a": "/x.json"}}, "not a URL"},
		{Config{Datasets: map[string]string{"a": "/d"}, Annotations: map[string]string{"a": "/x.json"}, Manifests: map[string]string{"a": "/m"}}, "--manifest and --annotations"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.cfg.Annotations, err, c.want)
		}
	}
	ok := Config{Datasets: map[string]string{"a": "/d"}, Annotations: map[string]string{"a": "/x.json"}, Workers: 1}
	if err := ok.Validate(); err != nil {
		t.Errorf("a local dataset with its annotations: %v", err)
	}
}
