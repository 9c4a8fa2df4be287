package source

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDiskCacheGet is the CPU a sample costs read from a warm disk
// tier (the files in the page cache, no memory tier): the photos of
// testdata/photos (48.5 KB on average) as ranges, each read and checked as
// Cache.Get does. It uses only the API main had before the MAC (issue 38),
// so the same file builds against both for a side-by-side run.
// cpu-ns/image is the process's user and system time per Get.
func BenchmarkDiskCacheGet(b *testing.B) {
	var files [][]byte
	filepath.WalkDir("../../testdata/photos", func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && filepath.Ext(p) == ".jpg" {
			data, err := os.ReadFile(p)
			if err == nil {
				files = append(files, data)
			}
		}
		return err
	})
	if len(files) < 40 {
		b.Fatalf("%d photos", len(files))
	}
	c, err := NewCache(WithDisk(b.TempDir(), 1<<30))
	if err != nil {
		b.Fatal(err)
	}
	rs := make([]Range, len(files))
	var total int64
	for i, data := range files {
		obj := Object{Key: filepath.Join("photos", string(rune('a'+i%26)), time.Duration(i).String()), Version: `"etag"`, Size: int64(len(data))}
		rs[i] = Range{Obj: obj, Len: obj.Size}
		c.Put("s3://bucket/", rs[i], data)
		total += obj.Size
	}
	buf := make([]byte, 0, 1<<20)
	for _, r := range rs { // warm: the page cache, the memory of the first reads
		if _, ok := c.Get("s3://bucket/", r, buf); !ok {
			b.Fatal("a miss")
		}
	}
	b.SetBytes(total / int64(len(rs)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, ok := c.Get("s3://bucket/", rs[i%len(rs)], buf); !ok {
			b.Fatal("a miss")
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/image")
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
