package server

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	ok := map[string]string{"imagenet": "/data/imagenet"}
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{"minimal", Config{Datasets: ok, Workers: 1}, nil},
		{"coordinator only", Config{Datasets: ok, Peers: "127.0.0.1:7070,[::1]:7071"}, nil},
		{"dns peers", Config{Datasets: ok, Peers: "dns:///workers.ns.svc:7070"}, nil},
		{"dns peers with resolver", Config{Datasets: ok, Peers: "dns://127.0.0.1:5353/workers:7070"}, nil},
		{"nothing makes batches", Config{Datasets: ok}, []string{"workers 0 and no peers"}},
		{"peer without port", Config{Datasets: ok, Workers: 1, Peers: "a:1,b"}, []string{`"b" is not HOST:PORT`}},
		{"dns peer without port", Config{Datasets: ok, Workers: 1, Peers: "dns:///workers"}, []string{"the port is needed"}},
		{"all set", Config{Datasets: ok, Workers: 8, Window: 16, MaxBatchBytes: 1 << 30, MaxStreamsPerClient: 4}, nil},
		{"no datasets", Config{}, []string{"no datasets"}},
		{"bad name", Config{Datasets: map[string]string{"a/b": "/x", "": "/y"}}, []string{`"a/b"`, `""`}},
		{"empty path", Config{Datasets: map[string]string{"a": ""}}, []string{"empty path"}},
		{"manifest", Config{Datasets: ok, Workers: 1, Manifests: map[string]string{"imagenet": "s3://b/m"}}, nil},
		{"manifest of no dataset", Config{Datasets: ok, Workers: 1, Manifests: map[string]string{"other": "/m", "imagenet": ""}},
			[]string{`manifest for "other": no such dataset`, `manifest for "imagenet": empty path`}},
		{"negatives", Config{Datasets: ok, Workers: -1, Window: -1, MaxBatchBytes: -1, MaxStreamsPerClient: -1, LeaseTimeout: -1},
			[]string{"workers -1", "window -1", "max batch bytes -1", "max streams per client -1", "lease timeout"}},
		{"NaN", Config{Datasets: ok, Workers: 1, ShareFloor: math.NaN(), StallTarget: math.NaN()}, []string{"share floor NaN", "stall target NaN"}},
		{"peer token in plaintext", Config{Datasets: ok, Workers: 1, Peers: "127.0.0.1:7070,cpu1:7070,10.0.0.2:7070", PeerTokenFile: "tok"},
			[]string{"cpu1:7070, 10.0.0.2:7070", "add --peer-ca", "--peer-insecure-token"}},
		{"peer token in plaintext, dns", Config{Datasets: ok, Peers: "dns:///workers.ns.svc:7070", PeerTokenFile: "tok"}, []string{"dns:///workers.ns.svc:7070"}},
		{"peer token on loopback", Config{Datasets: ok, Peers: "127.0.0.1:7070,localhost:7071,[::1]:7072", PeerTokenFile: "tok"}, nil},
		{"peer token, dns localhost", Config{Datasets: ok, Peers: "dns:///localhost:7070", PeerTokenFile: "tok"}, nil},
		{"peer token over TLS", Config{Datasets: ok, Peers: "cpu1:7070", PeerTokenFile: "tok", PeerCA: "ca.pem"}, nil},
		{"peer token in plaintext, allowed", Config{Datasets: ok, Peers: "cpu1:7070", PeerTokenFile: "tok", PeerInsecureToken: true}, nil},
		{"huge window", Config{Datasets: ok, Workers: 1, Window: 5000}, []string{"window 5000"}},
		{"peer client certificate", Config{Datasets: ok, Workers: 1, PeerCA: "ca.pem", PeerCert: "c.pem", PeerKey: "k.pem"}, nil},
		{"peer certificate without key", Config{Datasets: ok, Workers: 1, PeerCA: "ca.pem", PeerCert: "c.pem"}, []string{"--peer-cert and --peer-key"}},
		{"cache dir and budget", Config{Datasets: ok, Workers: 1, CacheDir: "/var/cache/stoker", CacheBudget: 1 << 30}, nil},
		{"cache dir without budget", Config{Datasets: ok, Workers: 1, CacheDir: "/var/cache/stoker"}, []string{"--cache-dir with --cache-budget"}},
		{"cache budget without dir", Config{Datasets: ok, Workers: 1, CacheBudget: 1 << 30}, []string{"--cache-dir with --cache-budget"}},
		{"store policy", Config{Datasets: ok, Workers: 1, StoreTimeout: time.Second, StoreAttempts: 2}, nil},
		{"negative store policy", Config{Datasets: ok, Workers: 1, StoreTimeout: -time.Second, StoreAttempts: -1}, []string{"--store-timeout -1s, --store-attempts -1"}},
		{"peer certificate without CA", Config{Datasets: ok, Workers: 1, PeerCert: "c.pem", PeerKey: "k.pem"}, []string{"with --peer-ca"}},
		{"decode fast", Config{Datasets: ok, Workers: 1, Decode: "fast"}, nil},
		{"decode exact", Config{Datasets: ok, Workers: 1, Decode: "exact"}, nil},
		{"unknown decode", Config{Datasets: ok, Workers: 1, Decode: "scaled"}, []string{`--decode "scaled": want exact`}},
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
	if d.Workers != 0 || d.Window != 0 || d.LeaseTimeout != DefaultLeaseTimeout || d.MaxBatchBytes != DefaultMaxBatchBytes || d.MaxStreamsPerClient != DefaultMaxStreamsPerClient {
		t.Errorf("defaults: %+v", d)
	}
}
