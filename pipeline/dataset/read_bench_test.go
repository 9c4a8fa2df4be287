package dataset

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/beneath"
)

// BenchmarkImageFolderRead: a file of 48 KiB (the shared photo set's mean)
// read from the page cache, through the fast path and through os.Root's.
func BenchmarkImageFolderRead(b *testing.B) {
	root := b.TempDir()
	files := map[string][]byte{}
	for c := range 16 {
		for i := range 16 {
			files[filepath.Join(string(rune('a'+c)), strconv.Itoa(i)+".jpg")] = make([]byte, 48<<10)
		}
	}
	writeTree(b, root, files)
	d, err := OpenImageFolder(root)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	fast := d.fast
	for _, tc := range []struct {
		name string
		fast *beneath.Reader
	}{{"openat2", fast}, {"os.Root", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			d.fast = tc.fast
			var buf []byte
			for i := 0; b.Loop(); i++ {
				if buf, err = d.Read(i%d.Len(), buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	d.fast = fast
}
