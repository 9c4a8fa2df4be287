package dataset

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// imagenetLike is a manifest shaped like ImageNet's train set in a
// bucket: n objects in 1000 classes, n01440764/n01440764_10026.JPEG,
// about 110 kB each, each with a quoted MD5 ETag.
func imagenetLike(n int) *Manifest {
	m := &Manifest{Root: "s3://bucket/imagenet/train/", Layout: LayoutImageFolder}
	const classes = 1000
	for c := range classes {
		m.Classes = append(m.Classes, fmt.Sprintf("n%08d", 1440764+c*7919))
	}
	x := uint64(88172645463325252)
	next := func() uint64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x }
	for i := range n {
		c := i * classes / n
		key := fmt.Sprintf("%s/%s_%d.JPEG", m.Classes[c], m.Classes[c], 10000+i)
		size := int64(60000 + next()%100000)
		o := m.AddObject(source.Object{Key: key, Size: size, Version: fmt.Sprintf(`"%016x%016x"`, next(), next())})
		m.AddSample(ManifestSample{Object: o, Size: size, Label: int64(c)})
	}
	return m
}

// BenchmarkManifestLoad is what a server does with a manifest at start:
// verify, decode and check it, and compute the fingerprint (DecodeManifest
// then NewStoreDataset), for ImageNet-like buckets of 100,000 and
// 1,281,167 objects.
//
//	go test -run XXX -bench BenchmarkManifestLoad -benchtime 3x ./pipeline/dataset
func BenchmarkManifestLoad(b *testing.B) {
	for _, n := range []int{100_000, 1_281_167} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			var file bytes.Buffer
			if err := imagenetLike(n).Encode(&file); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(file.Len()))
			for b.Loop() {
				m, err := DecodeManifest(bytes.NewReader(file.Bytes()), 0)
				if err != nil {
					b.Fatal(err)
				}
				ds, err := NewStoreDataset(nopStore{}, m, nil)
				if err != nil || ds.Len() != n {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(file.Len())/float64(n), "file-B/object")
		})
	}
}

// BenchmarkOpenSourceS3 opens a bucket of 100,000 objects (an ImageFolder
// of 1000 classes, in a real S3 server, versitygw, on loopback) as serve
// does at start: from its manifest, and without one (listed).
//
//	go test -run XXX -bench BenchmarkOpenSourceS3 -benchtime 1x ./pipeline/dataset
func BenchmarkOpenSourceS3(b *testing.B) {
	const n, classes = 100_000, 1000
	dir := b.TempDir()
	// Files put in the store's directory by hand are served without an
	// ETag (read by size and time): writing 100,000 by PUT would take
	// minutes and change nothing a listing costs.
	for i := range n {
		c := i % classes
		p := filepath.Join(dir, "bkt", "ds", fmt.Sprintf("n%08d", c), fmt.Sprintf("img_%06d.JPEG", i))
		if i < classes {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte(strings.Repeat("x", 1+i%64)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s := storetest.StartS3(b, dir)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	url := s.URL("bkt", "ds/")
	ctx := context.Background()
	st, err := source.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	m, err := IndexStore(ctx, st, IndexOptions{})
	if err != nil || m.Len() != n {
		b.Fatalf("%v (%d samples)", err, m.Len())
	}
	var file bytes.Buffer
	m.Encode(&file)
	out := filepath.Join(b.TempDir(), "manifest")
	if err := os.WriteFile(out, file.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	st.Close()
	for _, c := range []struct {
		name string
		opts []SourceOption
	}{
		{"manifest", []SourceOption{WithManifest(out)}},
		{"listing", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				ds, err := OpenSource(ctx, url, c.opts...)
				if err != nil || ds.Len() != n {
					b.Fatal(err)
				}
				ds.Close()
			}
		})
	}
}
