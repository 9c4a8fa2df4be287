package index

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/racebuild"
)

// exactSerialTest marks t as an exactness test that must not overlap
// others (it reads the heap's allocations): skipped under -race, which
// skews them; make test-go runs it without (its tests are named
// TestExact...).
func exactSerialTest(t *testing.T) {
	t.Helper()
	if racebuild.Enabled {
		t.Skip("an exactness test: make test-go-once runs it without -race (-run '^TestExact')")
	}
}

// synthIndexFile is an index file of size bytes made up as it is read
// (nothing of it held): a header, copies of one entry, and a checksum that
// is wrong, sum, unless sum is nil.
type synthIndexFile struct {
	head, unit []byte
	count      int64
	sum        []byte
	off        int64
	read       int64 // bytes read, over every pass
}

func newSynthIndexFile(fingerprint string, k Key, blob []byte, size int64) *synthIndexFile {
	le := binary.LittleEndian
	unit := le.AppendUint64(nil, k.Sum)
	unit = le.AppendUint64(unit, uint64(k.Size))
	unit = le.AppendUint32(unit, uint32(len(blob)))
	unit = append(unit, blob...)
	head := append([]byte(FileMagic), le.AppendUint32(nil, FileVersion)...)
	head = le.AppendUint32(head, uint32(len(fingerprint)))
	head = append(head, fingerprint...)
	count := (size - int64(len(head)) - 12) / int64(len(unit))
	head = le.AppendUint64(head, uint64(count))
	return &synthIndexFile{head: head, unit: unit, count: count, sum: []byte{1, 2, 3, 4}}
}

func (f *synthIndexFile) size() int64 {
	return int64(len(f.head)) + f.count*int64(len(f.unit)) + int64(len(f.sum))
}

func (f *synthIndexFile) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && f.off < f.size() {
		var src []byte
		switch o := f.off; {
		case o < int64(len(f.head)):
			src = f.head[o:]
		case o < int64(len(f.head))+f.count*int64(len(f.unit)):
			src = f.unit[(o-int64(len(f.head)))%int64(len(f.unit)):]
		default:
			src = f.sum[o-int64(len(f.head))-f.count*int64(len(f.unit)):]
		}
		c := copy(p[n:], src)
		n += c
		f.off += int64(c)
	}
	f.read += int64(n)
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (f *synthIndexFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		f.off = off
	case io.SeekCurrent:
		f.off += off
	case io.SeekEnd:
		f.off = f.size() + off
	}
	return f.off, nil
}

// TestExactIndexFileHugeBadChecksum: a 1 GiB index file (256 MiB with -short)
// of well-formed entries and a bad checksum, loaded into a 1 GiB budget,
// is refused for its checksum, and Load allocates a bounded amount
// whatever the file's size (it used to hold every entry in the budget
// until the checksum failed: 830 MiB for such a file), so nothing is left
// to return. A file over 4x the budget is refused unread.
func TestExactIndexFileHugeBadChecksum(t *testing.T) {
	exactSerialTest(t) // reads runtime.MemStats: overlaps no other test
	// A blob of a 64x2 MCU scan, checkpoints every 8 MCUs, none known:
	// well-formed, and 1 KB or so, as a photo's.
	blob := make([]byte, BlobHeader+16*(4+2*3))
	binary.LittleEndian.PutUint32(blob, blobMagic)
	binary.LittleEndian.PutUint16(blob[4:], 64)
	binary.LittleEndian.PutUint16(blob[6:], 2)
	blob[8], blob[9] = 3, 8
	if !BlobValid(blob) {
		t.Fatal("the blob is not well-formed")
	}
	k := Key{Sum: 1, Size: 1000}
	size := int64(1 << 30)
	if testing.Short() {
		size = 256 << 20
	}
	f := newSynthIndexFile("fp", k, blob, size)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := New(1 << 30)
	n, err := ix.Load(f, "fp")
	runtime.ReadMemStats(&after)
	t.Logf("%d-byte file (%d entries): %v; allocated %d bytes while loading", f.size(), f.count, err, after.TotalAlloc-before.TotalAlloc)
	if !errors.Is(err, ErrFile) || n != 0 || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Load: %d, %v; want it refused for its checksum", n, err)
	}
	if f.read < f.size() {
		t.Errorf("read %d of %d bytes: the checksum was not what refused it", f.read, f.size())
	}
	const bound = 4 << 20
	if a := after.TotalAlloc - before.TotalAlloc; a > bound {
		t.Errorf("Load allocated %d bytes for a file it refused, want at most %d", a, bound)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapInuse > before.HeapInuse+bound {
		t.Errorf("heap in use %d bytes after the refusal, %d before", after.HeapInuse, before.HeapInuse)
	}
	if s := ix.Stats(); s.Entries != 0 || s.FilesDropped != 1 {
		t.Errorf("after the refusal: %+v", s)
	}

	// Over 4x the budget: refused before a byte is read.
	f = newSynthIndexFile("fp", k, blob, 8<<20)
	small := New(1 << 20)
	if n, err := small.Load(f, "fp"); !errors.Is(err, ErrFile) || n != 0 || !strings.Contains(err.Error(), "budget") || f.read != 0 {
		t.Errorf("a file of %d bytes for a 1 MiB budget: %d, %v, %d bytes read", f.size(), n, err, f.read)
	}
	// The same file with its checksum right loads (what fits the budget).
	f = newSynthIndexFile("fp", k, blob, 2<<20)
	crc := crc32.New(castagnoli)
	f.sum = nil
	if _, err := io.Copy(crc, f); err != nil {
		t.Fatal(err)
	}
	f.sum = binary.LittleEndian.AppendUint32(nil, crc.Sum32())
	f.Seek(0, io.SeekStart)
	if n, err := New(1<<30).Load(f, "fp"); err != nil || n != 1 {
		t.Errorf("the well-formed file: %d entries, %v; want 1 (its entries are one key)", n, err)
	}
}
