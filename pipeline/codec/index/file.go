package index

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
)

// An Index on disk (Index.Save, Index.Load):
//
//	"STOKERIX"           8 bytes
//	version              u32 (FileVersion)
//	fingerprint length   u32, then its bytes (what the writer was given:
//	                     the datasets' fingerprints)
//	entries              u64, then per entry, most recently used first:
//	                     u64 hash, u64 file size, u32 length, the blob
//	checksum             u32, CRC-32C of everything before it
//
// little-endian. A file is evidence, not truth: whoever can write the
// directory can write one with a good checksum. Nothing in a file is used
// unless all of it checks: the size (at most maxIndexFileRatio times the
// budget), the magic, the version, the fingerprint, every entry's
// structure and the checksum, all checked in a first pass that keeps no
// entry in memory, whatever the file's size. A file holds only
// checkpoints a decode confirmed (Save), and a loaded checkpoint is not
// believed until a decode here confirms it: an entry is checked against
// its JPEG's bytes before use (huff.c: positions inside the scan and
// increasing, DC predictors the file's quantization allows, the scan's
// first checkpoint and those at restart markers where they must be), and
// decoding never starts at a loaded checkpoint, only compares it as it
// passes (huff.h): its DC predictors are sums over every block before it,
// which nothing short of decoding from the scan's start can check. An
// entry that fails a check or disagrees is dropped, with every entry of
// its file. So a file that lies costs no pixels and fails no sample, and
// is not saved again. The price: a loaded index no longer makes a
// restarted server's first epoch faster (it decodes as a cold one, and
// confirms what it passes); only a decode from the scan's start could
// vouch for a checkpoint's predictors, and that is the cold decode.
const (
	FileVersion    = 1          // the format's version, after the magic
	FileMagic      = "STOKERIX" // an index file's first 8 bytes
	maxFingerprint = 1 << 16
	// An index file over maxIndexFileRatio times the budget (plus
	// maxIndexFileSlack) is refused unread: Save writes at most a budget's
	// worth, and this leaves room for a server whose budget was larger.
	maxIndexFileRatio = 4
	maxIndexFileSlack = 1 << 20
)

// ErrFile is wrapped by the errors Load returns for an index file that
// is not used: corrupt, truncated, too large, of another version or of
// other data.
var ErrFile = errors.New("pipeline: index file not used")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Save writes the index's entries, tagged with fingerprint (what Load must
// be given to use them), to w: of each, the checkpoints a decode here
// confirmed (entries with none are left out).
func (ix *Index) Save(w io.Writer, fingerprint string) error {
	ents := ix.snapshot()
	n := 0
	for i, e := range ents {
		if BlobConfirmed(e.blob) == 0 {
			ents[i].blob = nil
			continue
		}
		n++
	}
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	var hdr [16]byte
	bw.WriteString(FileMagic)
	binary.LittleEndian.PutUint32(hdr[:], FileVersion)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(len(fingerprint)))
	bw.Write(hdr[:8])
	bw.WriteString(fingerprint)
	binary.LittleEndian.PutUint64(hdr[:], uint64(n))
	bw.Write(hdr[:8])
	var eh [20]byte
	var buf []byte
	for _, e := range ents {
		if e.blob == nil {
			continue
		}
		buf = slices.Grow(buf[:0], len(e.blob))[:len(e.blob)]
		BlobConfirmedOnly(buf, e.blob)
		binary.LittleEndian.PutUint64(eh[:], e.key.Sum)
		binary.LittleEndian.PutUint64(eh[8:], uint64(e.key.Size))
		binary.LittleEndian.PutUint32(eh[16:], uint32(len(buf)))
		bw.Write(eh[:])
		bw.Write(buf)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(hdr[:], crc.Sum32())
	_, err := w.Write(hdr[:4])
	return err
}

// maxIndexFile is the largest index file an Index with budget reads.
func maxIndexFile(budget int64) int64 {
	if budget > (math.MaxInt64-maxIndexFileSlack)/maxIndexFileRatio {
		return math.MaxInt64
	}
	return budget*maxIndexFileRatio + maxIndexFileSlack
}

// Load reads an index file written by Save with the same fingerprint and
// adds its entries, most recently used first, as far as the budget allows
// (entries already present are kept), as not yet confirmed (see above).
// It adds nothing unless the whole file checks; the error then wraps
// ErrFile (or is the reader's). r is read twice: first all of it, to
// check it, in a fixed amount of memory; then again for the entries. It
// returns how many entries it added.
func (ix *Index) Load(r io.ReadSeeker, fingerprint string) (int, error) {
	return ix.load(r, fingerprint, "")
}

func (ix *Index) load(r io.ReadSeeker, fingerprint, name string) (int, error) {
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	if limit := maxIndexFile(ix.budget); size > limit {
		ix.filesDropped.Add(1)
		return 0, fmt.Errorf("%w: %d bytes, more than %dx the index's budget of %d bytes allows", ErrFile, size, maxIndexFileRatio, ix.budget)
	}
	// First pass: everything checked, nothing kept.
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	if err := readIndexFile(r, size, fingerprint, nil); err != nil {
		ix.filesDropped.Add(1)
		return 0, err
	}
	// Second pass: the entries that fit the budget, checked again (the
	// file may have changed in between).
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	type loaded struct {
		key  Key
		blob []byte
	}
	var keep []loaded
	var used int64
	err = readIndexFile(r, size, fingerprint, func(k Key, n int64) []byte {
		if used+n+entryOverhead > ix.budget {
			return nil
		}
		used += n + entryOverhead
		keep = append(keep, loaded{k, make([]byte, n)})
		return keep[len(keep)-1].blob
	})
	if err != nil {
		// Changed since the first pass: what was read goes back at once.
		ix.filesDropped.Add(1)
		if keep = nil; used > 16<<20 {
			debug.FreeOSMemory()
		}
		return 0, err
	}
	origin := ix.addFile(name)
	added := 0
	for _, e := range keep {
		if ix.pushBack(e.key, e.blob, origin) {
			added++
		}
	}
	return added, nil
}

// readIndexFile reads an index file of size bytes from r and checks all
// of it. Each entry's blob is read into what take returns for it (nil, or
// take nil: checked as it streams past, not kept). Memory is bounded
// (two 64 KiB buffers) besides what take returns.
func readIndexFile(r io.Reader, size int64, fingerprint string, take func(k Key, n int64) []byte) error {
	crc := crc32.New(castagnoli)
	br := bufio.NewReaderSize(r, 1<<16)
	tr := io.TeeReader(br, crc)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrFile, fmt.Sprintf(format, a...))
	}
	var hdr [20]byte
	if _, err := io.ReadFull(tr, hdr[:16]); err != nil {
		return bad("truncated header: %v", err)
	}
	if string(hdr[:8]) != FileMagic {
		return bad("not a stoker index file")
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != FileVersion {
		return bad("version %d, this stoker reads %d", v, FileVersion)
	}
	n := binary.LittleEndian.Uint32(hdr[12:])
	if n > maxFingerprint {
		return bad("fingerprint of %d bytes", n)
	}
	fp := make([]byte, n)
	if _, err := io.ReadFull(tr, fp); err != nil {
		return bad("truncated header: %v", err)
	}
	if string(fp) != fingerprint {
		return bad("made for other data (fingerprint %.16q, want %.16q)", fp, fingerprint)
	}
	if _, err := io.ReadFull(tr, hdr[:8]); err != nil {
		return bad("truncated header: %v", err)
	}
	count := binary.LittleEndian.Uint64(hdr[:8])
	if count > uint64(size)/(20+BlobHeader) {
		return bad("%d entries in a file of %d bytes", count, size)
	}
	scratch := make([]byte, 1<<16)
	for i := uint64(0); i < count; i++ {
		if _, err := io.ReadFull(tr, hdr[:20]); err != nil {
			return bad("truncated at entry %d of %d: %v", i, count, err)
		}
		k := Key{Sum: binary.LittleEndian.Uint64(hdr[:]), Size: int64(binary.LittleEndian.Uint64(hdr[8:]))}
		bn := int64(binary.LittleEndian.Uint32(hdr[16:]))
		if k.Size < 0 || bn < BlobHeader || bn > 64<<20 {
			return bad("entry %d: %d bytes", i, bn)
		}
		var blob []byte
		if take != nil {
			blob = take(k, bn)
		}
		var ok bool
		var err error
		if blob != nil {
			_, err = io.ReadFull(tr, blob)
			ok = err == nil && BlobValid(blob)
		} else {
			ok, err = streamBlobValid(tr, bn, scratch)
		}
		if err != nil {
			return bad("truncated at entry %d of %d: %v", i, count, err)
		}
		if !ok {
			return bad("entry %d is not an index", i)
		}
	}
	want := crc.Sum32()
	if _, err := io.ReadFull(br, hdr[:4]); err != nil {
		return bad("truncated before the checksum: %v", err)
	}
	if got := binary.LittleEndian.Uint32(hdr[:4]); got != want {
		return bad("checksum %08x, want %08x", got, want)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return bad("bytes after the checksum")
	}
	return nil
}

// streamBlobValid is BlobValid of the next size bytes of r, read through
// scratch (a multiple of 4 bytes, at least BlobHeader) without keeping
// them.
func streamBlobValid(r io.Reader, size int64, scratch []byte) (bool, error) {
	hdr := scratch[:BlobHeader]
	if _, err := io.ReadFull(r, hdr); err != nil {
		return false, err
	}
	n, ncomp := BlobCheckpoints(hdr)
	ok := n >= 0 && size == int64(BlobHeader+n*(4+2*ncomp))
	left := size - BlobHeader
	for pos := int64(4 * max(n, 0)); left > 0; {
		c := min(left, int64(len(scratch)))
		if _, err := io.ReadFull(r, scratch[:c]); err != nil {
			return false, err
		}
		for at := 0; ok && pos > 0 && at+4 <= int(c); at += 4 {
			ok = binary.LittleEndian.Uint32(scratch[at:])&blobSure == 0
			pos -= 4
		}
		left -= c
	}
	return ok, nil
}

// SaveFile writes the index to path through a temporary file in the same
// directory, renamed over path once complete and synced, so that a crash
// leaves the old file or the new one, never a torn one.
func (ix *Index) SaveFile(path, fingerprint string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = ix.Save(f, fingerprint)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// LoadFile is Load from the file at path. A missing file is no error: it
// adds nothing.
func (ix *Index) LoadFile(path, fingerprint string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return ix.load(f, fingerprint, path)
}

// Path is the index file of the data with fingerprint fp
// (the pipeline's IndexFingerprint) in dir.
func Path(dir, fp string) string {
	return filepath.Join(dir, "decoder-index-"+fp[:min(len(fp), 16)]+".bin")
}
