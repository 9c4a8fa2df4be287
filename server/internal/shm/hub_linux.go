package shm

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

// A neighbor must not be able to deny a trainer its ring: any local
// process can connect to the hub's socket. A trainer writes its token as
// soon as it connects, so a connection whose token is already there when
// it is accepted is answered at once, on the accept loop: it holds nothing
// and waits for nothing. The others wait for their token in a bounded
// pool, each for ReadTimeout, and the pool is shared by the connecting
// processes' credentials (SO_PEERCRED): one process may have
// WaitingPerPID connections waiting (more are closed at once), and
// when a user's or the pool's bound is reached, the oldest waiting
// connection of the process (or user) that has the most makes room. A
// trainer whose connection was cut anyway connects again while its token
// is valid (internal/ring, python/stoker/_shm.py).
const (
	ReadTimeout       = time.Second
	shmWaiting        = 64
	shmWaitingPerUID  = 32
	WaitingPerPID     = 8
	shmAnswerDeadline = time.Second
)

// Hub hands rings' memfds to trainers on this machine. It listens on an
// abstract Unix socket: no file to clean up, and one that only processes in
// the server's network namespace reach (a trainer in a container of its own
// falls back to chunks). A connection writes an offer's token and gets the
// ring's memfd back (SCM_RIGHTS) with the byte 1, or the byte 0 for a token
// that is unknown or used.
type Hub struct {
	ln     *net.UnixListener
	name   string // the socket's abstract name, without its leading NUL
	bootID string
	log    *slog.Logger
	// refuse counts and logs (rate-limited) a connection cut or refused.
	refuse func(policy, msg string, attrs ...any)

	mu      sync.Mutex
	pending map[string]*Ring // by token; an offer not yet answered
	waiting waitPool         // guarded by mu
	wg      sync.WaitGroup
}

// NewHub listens on a fresh abstract socket.
func NewHub(log *slog.Logger, refuse func(policy, msg string, attrs ...any)) (*Hub, error) {
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
	h := &Hub{
		ln: ln, name: name, bootID: strings.TrimSpace(string(boot)), log: log, refuse: refuse,
		pending: make(map[string]*Ring), waiting: waitPool{conns: make(map[*waitConn]struct{})},
	}
	h.wg.Add(1)
	go h.serve()
	return h, nil
}

func (h *Hub) serve() {
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
		h.accepted(c)
	}
}

// shmPeer is a connecting process's credentials.
type shmPeer struct {
	pid int32
	uid uint32
}

// peerOf is c's peer credentials (SO_PEERCRED), as of its connect.
func peerOf(c *net.UnixConn) shmPeer {
	var cred *unix.Ucred
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		})
	}
	if cred == nil {
		return shmPeer{pid: -1, uid: ^uint32(0)} // all unknowns share one bound
	}
	return shmPeer{pid: cred.Pid, uid: cred.Uid}
}

// accepted answers c at once when its token is already there, or puts it
// in the waiting pool.
func (h *Hub) accepted(c *net.UnixConn) {
	w := &waitConn{c: c, peer: peerOf(c)}
	var n int
	if rc, err := c.SyscallConn(); err == nil {
		rc.Read(func(fd uintptr) bool {
			n, _, _ = unix.Recvfrom(int(fd), w.tok[:], unix.MSG_DONTWAIT)
			return true // one try, whatever it read
		})
	}
	if n == len(w.tok) {
		h.answer(w)
		c.Close()
		return
	}
	n = max(n, 0)
	h.mu.Lock()
	evicted, ok := h.waiting.admit(w)
	h.mu.Unlock()
	if evicted != nil {
		evicted.c.Close() // its goroutine sees the error and forgets it
		h.refuse("shm_silent", "shared memory: a connection waiting for its token cut to make room",
			"pid", evicted.peer.pid, "uid", evicted.peer.uid, "for_pid", w.peer.pid)
	}
	if !ok {
		c.Close()
		h.refuse("shm_flood", "shared memory: a process has too many connections waiting for their token: closed",
			"pid", w.peer.pid, "uid", w.peer.uid, "limit", WaitingPerPID)
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(ReadTimeout))
		_, err := io.ReadFull(c, w.tok[n:])
		h.mu.Lock()
		was := h.waiting.remove(w)
		h.mu.Unlock()
		switch {
		case err == nil:
			h.answer(w)
		case was && errors.Is(err, os.ErrDeadlineExceeded):
			h.refuse("shm_silent", "shared memory: a connection sent no token in time: cut",
				"pid", w.peer.pid, "uid", w.peer.uid, "timeout", ReadTimeout)
		}
	}()
}

// answer hands the ring of w's token to w, or says 0.
func (h *Hub) answer(w *waitConn) {
	c := w.c
	c.SetWriteDeadline(time.Now().Add(shmAnswerDeadline))
	h.mu.Lock()
	r := h.pending[string(w.tok[:])]
	delete(h.pending, string(w.tok[:])) // single use
	h.mu.Unlock()
	if r == nil {
		c.Write([]byte{0})
		h.refuse("shm_bad_token", "shared memory: a handshake with an unknown or used token", "pid", w.peer.pid, "uid", w.peer.uid)
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
	r.handedAt = time.Now()
	r.peer = w.peer
}

// waitConn is a connection waiting for its token.
type waitConn struct {
	c    *net.UnixConn
	peer shmPeer
	tok  [shmTokenBytes]byte
	seq  uint64 // admission order: lower is older
}

// waitPool bounds the connections waiting for their token: in all, per
// user and per process.
type waitPool struct {
	conns map[*waitConn]struct{}
	seq   uint64
}

// admit adds w unless its process already has WaitingPerPID waiting.
// When w's user, or the pool, is at its bound, the oldest connection of
// the process (or user) with the most waiting is taken out to make room,
// and returned for closing: a flood from one process or user can never
// hold every place, and a newcomer from elsewhere always gets one.
func (p *waitPool) admit(w *waitConn) (evicted *waitConn, ok bool) {
	pidN, uidN := 0, 0
	for c := range p.conns {
		if c.peer.pid == w.peer.pid {
			pidN++
		}
		if c.peer.uid == w.peer.uid {
			uidN++
		}
	}
	switch {
	case pidN >= WaitingPerPID:
		return nil, false
	case uidN >= shmWaitingPerUID:
		evicted = p.oldestOfLargest(func(c *waitConn) bool { return c.peer.uid == w.peer.uid }, func(c *waitConn) int64 { return int64(c.peer.pid) })
	case len(p.conns) >= shmWaiting:
		evicted = p.oldestOfLargest(func(*waitConn) bool { return true }, func(c *waitConn) int64 { return int64(c.peer.uid) })
	}
	if evicted != nil {
		delete(p.conns, evicted)
	}
	p.seq++
	w.seq = p.seq
	p.conns[w] = struct{}{}
	return evicted, true
}

// oldestOfLargest is, among the connections in, the oldest of the group
// (by key) that has the most.
func (p *waitPool) oldestOfLargest(in func(*waitConn) bool, key func(*waitConn) int64) *waitConn {
	count := map[int64]int{}
	for c := range p.conns {
		if in(c) {
			count[key(c)]++
		}
	}
	var best *waitConn
	for c := range p.conns {
		if !in(c) {
			continue
		}
		if best == nil || count[key(c)] > count[key(best)] || count[key(c)] == count[key(best)] && c.seq < best.seq {
			best = c
		}
	}
	return best
}

// remove takes w out of the pool, reporting whether it was there (not
// already taken out to make room).
func (p *waitPool) remove(w *waitConn) bool {
	_, ok := p.conns[w]
	delete(p.conns, w)
	return ok
}

// Offer makes a ring of n slots of size bytes and registers it under a
// new token until Withdraw.
func (h *Hub) Offer(n int, size int64) (*Ring, error) {
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

// Withdraw forgets r's token: the handshake is over, whatever its outcome.
func (h *Hub) Withdraw(r *Ring) {
	h.mu.Lock()
	delete(h.pending, string(r.token[:]))
	h.mu.Unlock()
}

// Close stops the hub, cuts the connections waiting for their token and
// waits for their goroutines.
func (h *Hub) Close() {
	h.ln.Close()
	h.mu.Lock()
	for w := range h.waiting.conns {
		w.c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// Ring is one stream's shared memory: slots slots of size bytes in a
// sealed memfd, mapped here until close.
type Ring struct {
	*slots
	mem   []byte
	size  int64
	token [shmTokenBytes]byte

	mu       sync.Mutex
	fd       int // -1 once handed to the trainer, or closed
	handed   bool
	handedAt time.Time
	peer     shmPeer // the process it was handed to
}

// newRing makes the memfd, sized and sealed, and maps it. Sealing matters:
// a trainer that could shrink the file would make the server's next write
// to the mapping a SIGBUS.
func newRing(n int, size int64) (*Ring, error) {
	total := int64(n) * size
	fd, err := unix.MemfdCreate("stoker-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	fail := func(what string, err error) (*Ring, error) {
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
	return &Ring{slots: newSlots(n), mem: mem, size: size, fd: fd}, nil
}

// Slot is slot i's memory.
func (r *Ring) Slot(i uint32) []byte {
	off := int64(i) * r.size
	return r.mem[off : off+r.size : off+r.size]
}

// WasHanded reports whether a trainer received the memfd, and the pid and
// uid of the process that did.
func (r *Ring) WasHanded() (ok bool, pid int32, uid uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handed, r.peer.pid, r.peer.uid
}

// HandedAt is when a trainer received the memfd, zero if none did.
func (r *Ring) HandedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handedAt
}

// Close unmaps the ring and closes the memfd if it is still here. The
// memory goes once the trainer's mapping and descriptor go too.
func (r *Ring) Close() {
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

// WaitingFrom says whether a connection of process pid waits in the pool
// for its token (tests wait for it rather than guess how long that takes).
func (h *Hub) WaitingFrom(pid int32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.waiting.conns {
		if c.peer.pid == pid {
			return true
		}
	}
	return false
}
