package source

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// diskTier keeps ranges in files under a directory, one file per range,
// named by a hash of its key and spread over 256 subdirectories. A file
// is written whole under a temporary name and renamed into place, so a
// reader never sees half of one; it carries its key and a checksum of key
// and bytes, checked at every read, so a file damaged since (or a crash
// mid-write that left a torn file) is a miss, and is removed. Keys
// include the object's version, so entries from an earlier run are safe
// to serve: they are kept across restarts.
//
// Which ranges are on disk is kept in memory (a name and a size each), so
// asking costs no system call.
type diskTier struct {
	dir    string
	budget int64

	mu    sync.Mutex
	used  int64              // files' sizes, those being written included
	files map[diskName]int64 // size; -1 while being written
	count int64              // files written (not being written)

	refused, evicted atomic.Int64
}

// diskName is a file's name: the SHA-256 of its key.
type diskName [sha256.Size]byte

// Entry layout: magic, key length (uint32), key, data length (uint64),
// data, CRC-32C of key and data (uint32); integers little-endian.
const (
	diskMagic  = "stokerB1"
	diskHeader = len(diskMagic) + 4
	diskTmp    = ".tmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func openDiskTier(dir string, budget int64) (*diskTier, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--cache-dir: %w", err)
	}
	d := &diskTier{dir: dir, budget: budget, files: map[diskName]int64{}}
	if err := d.load(); err != nil {
		return nil, fmt.Errorf("--cache-dir %s: %w", dir, err)
	}
	return d, nil
}

// load indexes the entries an earlier run left, removes its temporary
// files, and the oldest entries while they exceed the budget (the budget
// may have been lowered since).
func (d *diskTier) load() error {
	type found struct {
		name  diskName
		size  int64
		mtime time.Time
	}
	var all []found
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !e.Type().IsRegular() {
			return nil
		}
		if strings.HasSuffix(p, diskTmp) {
			os.Remove(p)
			return nil
		}
		var n diskName
		if b, err := hex.DecodeString(e.Name()); err != nil || len(b) != len(n) || filepath.Base(filepath.Dir(p)) != e.Name()[:2] {
			return nil // not ours: left alone
		} else {
			copy(n[:], b)
		}
		st, err := e.Info()
		if err != nil {
			return nil
		}
		all = append(all, found{n, st.Size(), st.ModTime()})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b found) int { return b.mtime.Compare(a.mtime) }) // newest first
	for _, f := range all {
		if d.used+f.size > d.budget {
			os.Remove(d.path(f.name))
			d.evicted.Add(1)
			continue
		}
		d.files[f.name] = f.size
		d.used += f.size
		d.count++
	}
	return nil
}

func (d *diskTier) path(n diskName) string {
	h := hex.EncodeToString(n[:])
	return filepath.Join(d.dir, h[:2], h)
}

// encodeKey is the key as it is stored in an entry and hashed for its name:
// each field length-prefixed, so no two keys encode alike.
func encodeKey(k cacheKey) []byte {
	b := make([]byte, 0, 64+len(k.store)+len(k.key)+len(k.version))
	for _, s := range []string{k.store, k.key, k.version} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, v := range []int64{k.size, k.mtime, k.off, k.n} {
		b = binary.AppendVarint(b, v)
	}
	return b
}

func (d *diskTier) contains(k cacheKey) bool {
	n := diskName(sha256.Sum256(encodeKey(k)))
	d.mu.Lock()
	size, ok := d.files[n]
	d.mu.Unlock()
	return ok && size >= 0
}

// get reads k's entry into buf and checks it; a damaged entry is removed
// and is a miss.
func (d *diskTier) get(k cacheKey, buf []byte) ([]byte, bool) {
	enc := encodeKey(k)
	n := diskName(sha256.Sum256(enc))
	d.mu.Lock()
	size, ok := d.files[n]
	d.mu.Unlock()
	if !ok || size < 0 {
		return nil, false
	}
	buf, err := readEntry(d.path(n), enc, k.n, buf)
	if err != nil {
		d.remove(n, size)
		return nil, false
	}
	return buf, true
}

// readEntry reads the entry at path, which must hold key enc and n bytes.
func readEntry(path string, enc []byte, n int64, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if want := int64(diskHeader+len(enc)+8) + n + 4; st.Size() != want {
		return nil, fmt.Errorf("%d bytes, want %d", st.Size(), want)
	}
	head := make([]byte, diskHeader+len(enc)+8)
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, err
	}
	if string(head[:len(diskMagic)]) != diskMagic ||
		binary.LittleEndian.Uint32(head[len(diskMagic):]) != uint32(len(enc)) ||
		!bytes.Equal(head[diskHeader:diskHeader+len(enc)], enc) ||
		binary.LittleEndian.Uint64(head[diskHeader+len(enc):]) != uint64(n) {
		return nil, errors.New("not this key's entry")
	}
	buf = grow(buf, n)
	var sum [4]byte
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(f, sum[:]); err != nil {
		return nil, err
	}
	crc := crc32.Update(crc32.Checksum(enc, castagnoli), castagnoli, buf)
	if binary.LittleEndian.Uint32(sum[:]) != crc {
		return nil, errors.New("checksum mismatch")
	}
	return buf, nil
}

// remove drops a damaged entry, unless another put replaced it meanwhile.
func (d *diskTier) remove(n diskName, size int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.files[n]; !ok || cur != size {
		return
	}
	os.Remove(d.path(n))
	delete(d.files, n)
	d.used -= size
	d.count--
	d.evicted.Add(1)
}

// put writes k's entry if the budget has room and it is not there yet.
// A failed write (disk full, permissions) leaves nothing behind and is
// not an error: the range is simply not cached.
func (d *diskTier) put(k cacheKey, data []byte) {
	enc := encodeKey(k)
	n := diskName(sha256.Sum256(enc))
	size := int64(diskHeader+len(enc)+8+len(data)) + 4
	d.mu.Lock()
	if _, ok := d.files[n]; ok {
		d.mu.Unlock()
		return
	}
	if d.used+size > d.budget {
		d.mu.Unlock()
		d.refused.Add(1)
		return
	}
	d.files[n] = -1 // being written: neither read nor written by another
	d.used += size
	d.mu.Unlock()
	err := writeEntry(d.path(n), enc, data)
	d.mu.Lock()
	if err != nil {
		delete(d.files, n)
		d.used -= size
	} else {
		d.files[n] = size
		d.count++
	}
	d.mu.Unlock()
}

func writeEntry(path string, enc, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "*"+diskTmp)
	if err != nil {
		return err
	}
	head := make([]byte, 0, diskHeader+len(enc)+8)
	head = append(head, diskMagic...)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(enc)))
	head = append(head, enc...)
	head = binary.LittleEndian.AppendUint64(head, uint64(len(data)))
	crc := crc32.Update(crc32.Checksum(enc, castagnoli), castagnoli, data)
	_, err = f.Write(head)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		_, err = f.Write(binary.LittleEndian.AppendUint32(nil, crc))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func (d *diskTier) stats(s *CacheStats) {
	d.mu.Lock()
	s.DiskBytes, s.DiskBudget, s.DiskRanges = d.used, d.budget, d.count
	d.mu.Unlock()
	s.DiskRefused, s.DiskEvictions = d.refused.Load(), d.evicted.Load()
}
