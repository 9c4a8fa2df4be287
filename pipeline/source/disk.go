package source

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// diskTier keeps ranges in files under a directory, one file per range,
// named by a hash of its key and spread over 256 subdirectories. A file
// is written whole under a temporary name and renamed into place, so a
// reader never sees half of one.
//
// The directory is not trusted: whoever can write it could change an
// entry and recompute any checksum. So an entry carries its key and a MAC
// (AES-256-GMAC, cachekey.go) of key and bytes under a key that does not live in the
// directory (WithDiskKey: a file elsewhere, or this process's own), and
// is believed only when the MAC proves it; an entry that does not (its
// bytes changed, cut short, another key's) is a miss, removed, and its
// range read from the store again: a forged one (its MAC under this key
// wrong) is counted apart. Keys include the object's version, so entries
// from an earlier run under the same key are safe to serve: they are kept
// across restarts. The directory is reached through an os.Root, walked
// without following links, and written only through subdirectories that
// are directories, not links: nothing outside it is read or written.
//
// Which ranges are on disk is kept in memory (a name and a size each), so
// asking costs no system call.
type diskTier struct {
	dir    string
	root   *os.Root
	budget int64
	mac    macKey

	mu    sync.Mutex
	used  int64              // files' sizes, those being written included
	files map[diskName]int64 // size; -1 while being written
	count int64              // files written (not being written)

	refused, evicted, forged atomic.Int64
}

// diskName is a file's name: the SHA-256 of its key.
type diskName [sha256.Size]byte

// Entry layout: magic, the MAC key's ID (8 bytes), the MAC's nonce (12),
// key length (uint32), key, data length (uint64), data, the MAC (16) of
// all that before it; integers little-endian.
const (
	diskMagic  = "stokerB2"
	diskHeader = len(diskMagic) + macIDSize + nonceSize + 4
	diskTmp    = ".tmp"
)

func openDiskTier(dir string, budget int64, mac macKey) (*diskTier, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--cache-dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("--cache-dir: %w", err)
	}
	d := &diskTier{dir: dir, root: root, budget: budget, mac: mac, files: map[diskName]int64{}}
	if err := d.load(); err != nil {
		root.Close()
		return nil, fmt.Errorf("--cache-dir %s: %w", dir, err)
	}
	return d, nil
}

// load indexes the entries an earlier run left, removes its temporary
// files, and the oldest entries while they exceed the budget (the budget
// may have been lowered since). The walk follows no link: a
// subdirectory that is one is not entered, a file that is one not taken.
func (d *diskTier) load() error {
	type found struct {
		name  diskName
		size  int64
		mtime time.Time
	}
	var all []found
	err := fs.WalkDir(d.root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !e.Type().IsRegular() {
			return nil
		}
		if strings.HasSuffix(p, diskTmp) {
			d.root.Remove(p)
			return nil
		}
		var n diskName
		if b, err := hex.DecodeString(e.Name()); err != nil || len(b) != len(n) || path.Dir(p) != e.Name()[:2] {
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
			d.root.Remove(d.path(f.name))
			d.evicted.Add(1)
			continue
		}
		d.files[f.name] = f.size
		d.used += f.size
		d.count++
	}
	return nil
}

// path is n's entry, relative to the directory.
func (d *diskTier) path(n diskName) string {
	h := hex.EncodeToString(n[:])
	return h[:2] + "/" + h
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

// get reads k's entry into buf and checks it; an entry that does not
// prove itself is removed and is a miss.
func (d *diskTier) get(k cacheKey, buf []byte) ([]byte, bool) {
	enc := encodeKey(k)
	n := diskName(sha256.Sum256(enc))
	d.mu.Lock()
	size, ok := d.files[n]
	d.mu.Unlock()
	if !ok || size < 0 {
		return nil, false
	}
	buf, err := d.readEntry(d.path(n), enc, k.n, buf)
	if err != nil {
		if errors.Is(err, errForged) {
			d.forged.Add(1)
		}
		d.remove(n, size)
		return nil, false
	}
	return buf, true
}

// errForged: an entry under this process's key whose MAC is wrong: its
// bytes or key were changed by someone without the key.
var errForged = errors.New("MAC mismatch")

// readEntry reads the entry at rel, which must hold key enc and n bytes,
// and proves it by its MAC. The entry's head and data are read into buf
// together (what the MAC covers), then the data moved to buf's start.
func (d *diskTier) readEntry(rel string, enc []byte, n int64, buf []byte) ([]byte, error) {
	f, err := d.root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	hlen := int64(diskHeader + len(enc) + 8)
	if want := hlen + n + macSize; st.Size() != want {
		return nil, fmt.Errorf("%d bytes, want %d", st.Size(), want)
	}
	buf = grow(buf, hlen+n+macSize)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, err
	}
	head, tag := buf[:hlen], buf[hlen+n:]
	id := d.mac.id()
	const idAt, nonceAt, klenAt = len(diskMagic), len(diskMagic) + macIDSize, len(diskMagic) + macIDSize + nonceSize
	switch {
	case string(head[:idAt]) != diskMagic:
		return nil, errors.New("not an entry of this format")
	case !bytes.Equal(head[idAt:nonceAt], id[:]):
		return nil, errors.New("written under another key") // an earlier run's, without --cache-key-file
	case binary.LittleEndian.Uint32(head[klenAt:]) != uint32(len(enc)) ||
		!bytes.Equal(head[diskHeader:diskHeader+len(enc)], enc) ||
		binary.LittleEndian.Uint64(head[diskHeader+len(enc):]) != uint64(n):
		return nil, fmt.Errorf("%w: not this key's entry", errForged)
	case !d.mac.verify(head[nonceAt:klenAt], tag, buf[:hlen+n]):
		return nil, errForged
	}
	copy(buf, buf[hlen:hlen+n])
	return buf[:n], nil
}

// remove drops a damaged entry, unless another put replaced it meanwhile.
func (d *diskTier) remove(n diskName, size int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.files[n]; !ok || cur != size {
		return
	}
	d.root.Remove(d.path(n))
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
	size := int64(diskHeader+len(enc)+8+len(data)) + macSize
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
	err := d.writeEntry(d.path(n), enc, data)
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

// writeEntry writes the entry at rel through a temporary file renamed
// into place, in a subdirectory that must be one (not a link).
func (d *diskTier) writeEntry(rel string, enc, data []byte) error {
	sub := path.Dir(rel)
	st, err := d.root.Lstat(sub)
	if errors.Is(err, fs.ErrNotExist) {
		err = d.root.Mkdir(sub, 0o755)
		if errors.Is(err, fs.ErrExist) { // made meanwhile by another put
			st, err = d.root.Lstat(sub)
		}
	}
	if err == nil && st != nil && !st.IsDir() {
		err = fmt.Errorf("%s is not a directory (a link?): not written through", sub)
	}
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s/%s%s", sub, rand.Text(), diskTmp)
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	id := d.mac.id()
	msg := make([]byte, 0, diskHeader+len(enc)+8+len(data))
	msg = append(msg, diskMagic...)
	msg = append(msg, id[:]...)
	nonce := make([]byte, nonceSize)
	rand.Read(nonce)
	msg = append(msg, nonce...)
	msg = binary.LittleEndian.AppendUint32(msg, uint32(len(enc)))
	msg = append(msg, enc...)
	msg = binary.LittleEndian.AppendUint64(msg, uint64(len(data)))
	msg = append(msg, data...)
	_, err = f.Write(append(msg, d.mac.sum(nonce, msg)...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.root.Rename(tmp, rel)
	}
	if err != nil {
		d.root.Remove(tmp)
	}
	return err
}

func (d *diskTier) stats(s *CacheStats) {
	d.mu.Lock()
	s.DiskBytes, s.DiskBudget, s.DiskRanges = d.used, d.budget, d.count
	d.mu.Unlock()
	s.DiskRefused, s.DiskEvictions, s.DiskForged = d.refused.Load(), d.evicted.Load(), d.forged.Load()
}
