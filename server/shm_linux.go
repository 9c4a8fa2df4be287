package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// shmHandshakes bounds the handshakes in progress on the hub's socket, and
// shmHandshakeTimeout the time one may take: any local process can
// connect, and must not be able to hold the hub.
const (
	shmHandshakes       = 16
	shmHandshakeTimeout = 2 * time.Second
)

// shmHub hands rings' memfds to trainers on this machine. It listens on an
// abstract Unix socket: no file to clean up, and one that only processes in
// the server's network namespace reach (a trainer in a container of its own
// falls back to chunks). A connection writes an offer's token and gets the
// ring's memfd back (SCM_RIGHTS) with the byte 1, or the byte 0 for a token
// that is unknown or used.
type shmHub struct {
	ln     *net.UnixListener
	name   string // the socket's abstract name, without its leading NUL
	bootID string
	log    *slog.Logger

	mu      sync.Mutex
	pending map[string]*ring // by token; an offer not yet answered
	sem     chan struct{}
	wg      sync.WaitGroup
}

// newShmHub listens on a fresh abstract socket.
func newShmHub(log *slog.Logger) (*shmHub, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return nil, fmt.Errorf("shared memory: the boot id: %w", err)
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	name := fmt.Sprintf("stoker-%d-%s", os.Getpid(), hex.EncodeToString(nonce[:]))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@" + name, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("shared memory: %w", err)
	}
	h := &shmHub{
		ln: ln, name: name, bootID: strings.TrimSpace(string(boot)), log: log,
		pending: make(map[string]*ring), sem: make(chan struct{}, shmHandshakes),
	}
	h.wg.Add(1)
	go h.serve()
	return h, nil
}

func (h *shmHub) serve() {
	defer h.wg.Done()
	for {
		c, err := h.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			h.log.Warn("shared memory: accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case h.sem <- struct{}{}:
		default:
			c.Close() // too many at once: the trainer falls back to chunks
			continue
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer func() { <-h.sem }()
			defer c.Close()
			h.handshake(c)
		}()
	}
}

// handshake reads a token and answers with its ring's memfd.
func (h *shmHub) handshake(c *net.UnixConn) {
	c.SetDeadline(time.Now().Add(shmHandshakeTimeout))
	var tok [shmTokenBytes]byte
	if _, err := io.ReadFull(c, tok[:]); err != nil {
		return
	}
	h.mu.Lock()
	r := h.pending[string(tok[:])]
	delete(h.pending, string(tok[:])) // single use
	h.mu.Unlock()
	if r == nil {
		c.Write([]byte{0})
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 { // the stream ended meanwhile
		c.Write([]byte{0})
		return
	}
	if _, _, err := c.WriteMsgUnix([]byte{1}, unix.UnixRights(r.fd), nil); err != nil {
		return
	}
	// The trainer holds the memfd now; the server keeps only its mapping.
	unix.Close(r.fd)
	r.fd = -1
	r.handed = true
}

// offer makes a ring of n slots of size bytes and registers it under a
// new token until withdraw.
func (h *shmHub) offer(n int, size int64) (*ring, error) {
	r, err := newRing(n, size)
	if err != nil {
		return nil, err
	}
	rand.Read(r.token[:])
	h.mu.Lock()
	h.pending[string(r.token[:])] = r
	h.mu.Unlock()
	return r, nil
}

// withdraw forgets r's token: the handshake is over, whatever its outcome.
func (h *shmHub) withdraw(r *ring) {
	h.mu.Lock()
	delete(h.pending, string(r.token[:]))
	h.mu.Unlock()
}

// close stops the hub and waits for the handshakes in progress.
func (h *shmHub) close() {
	h.ln.Close()
	h.wg.Wait()
}

// ring is one stream's shared memory: slots slots of size bytes in a
// sealed memfd, mapped here until close.
type ring struct {
	*slots
	mem   []byte
	size  int64
	token [shmTokenBytes]byte

	mu     sync.Mutex
	fd     int // -1 once handed to the trainer, or closed
	handed bool
}

// newRing makes the memfd, sized and sealed, and maps it. Sealing matters:
// a trainer that could shrink the file would make the server's next write
// to the mapping a SIGBUS.
func newRing(n int, size int64) (*ring, error) {
	total := int64(n) * size
	fd, err := unix.MemfdCreate("stoker-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	fail := func(what string, err error) (*ring, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, total); err != nil {
		return fail("ftruncate", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal", err)
	}
	mem, err := unix.Mmap(fd, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	return &ring{slots: newSlots(n), mem: mem, size: size, fd: fd}, nil
}

// slot is slot i's memory.
func (r *ring) slot(i uint32) []byte {
	off := int64(i) * r.size
	return r.mem[off : off+r.size : off+r.size]
}

// wasHanded reports whether a trainer received the memfd.
func (r *ring) wasHanded() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handed
}

// close unmaps the ring and closes the memfd if it is still here. The
// memory goes once the trainer's mapping and descriptor go too.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}
