package pipeline

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// An Index on disk (Index.Save, Index.Load):
//
//	"STOKERIX"           8 bytes
//	version              u32 (indexFileVersion)
//	fingerprint length   u32, then its bytes (what the writer was given:
//	                     the datasets' fingerprints)
//	entries              u64, then per entry, most recently used first:
//	                     u64 hash, u64 file size, u32 length, the blob
//	checksum             u32, CRC-32C of everything before it
//
// little-endian. Nothing in a file is used unless all of it checks: the
// magic, the version, the fingerprint, every entry's structure and the
// checksum. Even then each blob is checked against its file's headers
// before it is used, and every checkpoint against the decoder as it
// passes, so a file that lies costs speed, never pixels.
const (
	indexFileMagic   = "STOKERIX"
	indexFileVersion = 1
	maxFingerprint   = 1 << 16
)

// ErrIndexFile is wrapped by the errors Load returns for an index file that
// is not used: corrupt, truncated, of another version or of other data.
var ErrIndexFile = errors.New("pipeline: index file not used")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Save writes the index's entries, tagged with fingerprint (what Load must
// be given to use them), to w.
func (ix *Index) Save(w io.Writer, fingerprint string) error {
	ents := ix.snapshot()
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	var hdr [16]byte
	bw.WriteString(indexFileMagic)
	binary.LittleEndian.PutUint32(hdr[:], indexFileVersion)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(len(fingerprint)))
	bw.Write(hdr[:8])
	bw.WriteString(fingerprint)
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(ents)))
	bw.Write(hdr[:8])
	var eh [20]byte
	for _, e := range ents {
		binary.LittleEndian.PutUint64(eh[:], e.key.sum)
		binary.LittleEndian.PutUint64(eh[8:], uint64(e.key.size))
		binary.LittleEndian.PutUint32(eh[16:], uint32(len(e.blob)))
		bw.Write(eh[:])
		bw.Write(e.blob)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(hdr[:], crc.Sum32())
	_, err := w.Write(hdr[:4])
	return err
}

// Load reads an index file written by Save with the same fingerprint and
// adds its entries, most recently used first, as far as the budget allows
// (entries already present are kept). It adds nothing unless the whole
// file checks; the error then wraps ErrIndexFile (or is the reader's). It
// returns how many entries it added.
func (ix *Index) Load(r io.Reader, fingerprint string) (int, error) {
	crc := crc32.New(castagnoli)
	br := bufio.NewReaderSize(r, 1<<16)
	tr := io.TeeReader(br, crc)
	bad := func(format string, a ...any) (int, error) {
		return 0, fmt.Errorf("%w: %s", ErrIndexFile, fmt.Sprintf(format, a...))
	}
	var hdr [20]byte
	if _, err := io.ReadFull(tr, hdr[:16]); err != nil {
		return bad("truncated header: %v", err)
	}
	if string(hdr[:8]) != indexFileMagic {
		return bad("not a stoker index file")
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != indexFileVersion {
		return bad("version %d, this stoker reads %d", v, indexFileVersion)
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
	// Entries are read into a budget's worth of memory at most; the rest
	// are read only to check the sum.
	type loaded struct {
		key  indexKey
		blob []byte
	}
	var keep []loaded
	var used int64
	for i := uint64(0); i < count; i++ {
		if _, err := io.ReadFull(tr, hdr[:20]); err != nil {
			return bad("truncated at entry %d of %d: %v", i, count, err)
		}
		k := indexKey{sum: binary.LittleEndian.Uint64(hdr[:]), size: int64(binary.LittleEndian.Uint64(hdr[8:]))}
		size := int64(binary.LittleEndian.Uint32(hdr[16:]))
		if k.size < 0 || size < blobHeader || size > 64<<20 {
			return bad("entry %d: %d bytes", i, size)
		}
		if used+size+entryOverhead > ix.budget {
			if _, err := io.CopyN(io.Discard, tr, size); err != nil {
				return bad("truncated at entry %d of %d: %v", i, count, err)
			}
			continue
		}
		blob := make([]byte, size)
		if _, err := io.ReadFull(tr, blob); err != nil {
			return bad("truncated at entry %d of %d: %v", i, count, err)
		}
		if !blobValid(blob) {
			return bad("entry %d is not an index", i)
		}
		keep = append(keep, loaded{k, blob})
		used += size + entryOverhead
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
	added := 0
	for _, e := range keep {
		if ix.pushBack(e.key, e.blob) {
			added++
		}
	}
	return added, nil
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
	return ix.Load(f, fingerprint)
}

// IndexFingerprint is what an index file of the given datasets is tagged
// with (Save, Load) and named by (IndexPath): a hash of their fingerprints,
// in any order. A server with the same data, under any names, finds the
// same file.
func IndexFingerprint(datasets ...Dataset) string {
	fps := make([]string, len(datasets))
	for i, ds := range datasets {
		fps[i] = ds.Fingerprint()
	}
	slices.Sort(fps)
	h := sha256.New()
	for _, fp := range fps {
		h.Write([]byte(fp))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// IndexPath is the index file of the data with fingerprint fp
// (IndexFingerprint) in dir.
func IndexPath(dir, fp string) string {
	return filepath.Join(dir, "decoder-index-"+fp[:min(len(fp), 16)]+".bin")
}
