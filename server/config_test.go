package server

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := map[string]string{"imagenet": "/data/imagenet"}
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{"minimal", Config{Datasets: ok}, nil},
		{"all set", Config{Datasets: ok, Workers: 8, Window: 16, MaxBatchBytes: 1 << 30, MaxStreamsPerClient: 4}, nil},
		{"no datasets", Config{}, []string{"no datasets"}},
		{"bad name", Config{Datasets: map[string]string{"a/b": "/x", "": "/y"}}, []string{`"a/b"`, `""`}},
		{"empty path", Config{Datasets: map[string]string{"a": ""}}, []string{"empty path"}},
		{"negatives", Config{Datasets: ok, Workers: -1, Window: -1, MaxBatchBytes: -1, MaxStreamsPerClient: -1},
			[]string{"workers -1", "window -1", "max batch bytes -1", "max streams per client -1"}},
		{"huge window", Config{Datasets: ok, Window: 5000}, []string{"window 5000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not say %q", err, w)
				}
			}
		})
	}
	d := Config{Datasets: ok}.withDefaults()
	if d.Workers < 1 || d.Window != DefaultWindow || d.MaxBatchBytes != DefaultMaxBatchBytes || d.MaxStreamsPerClient != DefaultMaxStreamsPerClient {
		t.Errorf("defaults: %+v", d)
	}
}
