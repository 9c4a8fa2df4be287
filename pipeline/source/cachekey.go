package source

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The disk tier's MAC is AES-256-GMAC (GCM authenticating, encrypting
// nothing) under a key that does not live in the cache directory, so that
// whoever can write the directory cannot make an entry that proves
// itself. Each entry has a random 96-bit nonce of its own, written beside
// it: GMAC is a MAC only while no nonce repeats under a key, which random
// nonces hold for far more entries than a cache has (NIST's bound is
// 2^32 per key). GMAC, not HMAC-SHA256: 5 µs for a 48 KB photo here
// against 35-46 (AES-NI and carry-less multiply; BENCHMARKS.md).
const (
	macSize     = 16 // GCM's tag
	macIDSize   = 8
	nonceSize   = 12
	minCacheKey = 16 // the shortest key taken (bytes)
)

// macKey is the disk tier's key, with its ID: the first bytes of a hash of
// it, written in each entry so that an entry made under another key (an
// earlier run's, without a key file) is told from a forged one. The ID
// says nothing of the key that helps forge.
type macKey struct {
	gcm   cipher.AEAD // safe for concurrent use
	ident [macIDSize]byte
}

func newMACKey(key []byte) macKey {
	aesKey := sha256.Sum256(append([]byte("stoker cache mac key\x00"), key...))
	id := sha256.Sum256(append([]byte("stoker cache key id\x00"), key...))
	block, err := aes.NewCipher(aesKey[:])
	if err != nil {
		panic(err) // a 32-byte key: never
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	m := macKey{gcm: gcm}
	copy(m.ident[:], id[:])
	return m
}

// randomMACKey is a key of this process alone: entries it writes prove
// themselves until it ends, and an earlier run's never do.
func randomMACKey() macKey {
	k := make([]byte, 32)
	rand.Read(k)
	return newMACKey(k)
}

func (m macKey) id() [macIDSize]byte { return m.ident }

// sum is the MAC of msg under nonce.
func (m macKey) sum(nonce, msg []byte) []byte { return m.gcm.Seal(nil, nonce, nil, msg) }

// verify says whether tag is the MAC of msg under nonce (in constant
// time).
func (m macKey) verify(nonce, tag, msg []byte) bool {
	_, err := m.gcm.Open(nil, nonce, tag, msg)
	return err == nil
}

// WithDiskKey is the key the disk tier's entries are proven with (at
// least 16 bytes; LoadCacheKey reads one from a file). Default: a key of
// this process's own, made at NewCache, so that entries of an earlier run
// cannot be proven and are read from the store again. The key must not
// be readable by whoever can write the directory.
func WithDiskKey(key []byte) CacheOption {
	return func(o *cacheOptions) { o.key = append([]byte(nil), key...) }
}

// DefaultCacheKeyFile is where a server keeps its disk cache's key when
// not told: stoker/cache-key in the user's configuration directory
// ($XDG_CONFIG_HOME, else ~/.config, on Linux).
func DefaultCacheKeyFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "stoker", "cache-key"), nil
}

// LoadCacheKey reads the disk cache's key from file, a key of at least
// 16 bytes in hex, and makes one (32 random bytes, mode 0600, its
// directory 0700) when there is none. It refuses a file inside cacheDir
// (whoever writes the directory would read the key), and one that users
// other than its owner may read or write (chmod 600).
func LoadCacheKey(file, cacheDir string) ([]byte, error) {
	if err := outside(file, cacheDir); err != nil {
		return nil, err
	}
	key, err := readCacheKey(file)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, err
	}
	k := make([]byte, 32)
	rand.Read(k)
	// Written aside and linked into place: two servers starting at once
	// agree on one key, and neither reads half of one.
	tmp, err := os.CreateTemp(filepath.Dir(file), ".cache-key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(k) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), file); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return readCacheKey(file)
}

func readCacheKey(file string) ([]byte, error) {
	st, err := os.Lstat(file)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("cache key %s is not a regular file", file)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("cache key %s may be read or written by users other than its owner (mode %v): chmod 600 it", file, st.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < minCacheKey {
		return nil, fmt.Errorf("cache key %s: want at least %d bytes in hex (remove it to have a new one made)", file, minCacheKey)
	}
	return key, nil
}

// outside refuses file when it is inside dir, links resolved.
func outside(file, dir string) error {
	resolve := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		// The longest existing ancestor resolved, the rest appended.
		rest := ""
		for cur := abs; ; {
			if r, err := filepath.EvalSymlinks(cur); err == nil {
				return filepath.Join(r, rest)
			}
			parent := filepath.Dir(cur)
			if parent == cur {
				return abs
			}
			rest = filepath.Join(filepath.Base(cur), rest)
			cur = parent
		}
	}
	f, d := resolve(file), resolve(dir)
	if rel, err := filepath.Rel(d, f); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("cache key %s is inside the cache directory %s: whoever can write the directory could read it and forge entries; keep it elsewhere", file, dir)
	}
	return nil
}
