package ring

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// shmHandshakeTimeout bounds one handshake on a server's ring socket, and
// shmFetchPatience how long a trainer connects again when the server cut
// its handshake unanswered (a neighbor flooding the socket can get a
// connection cut): under the server's default --first-message-timeout
// (10 s), which is the token's life.
const (
	shmHandshakeTimeout = 2 * time.Second
	shmFetchPatience    = 5 * time.Second
)

// BootID is this machine's boot id, "" when unreadable.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Fetch is the trainer's side of a shared-memory handshake: it
// connects to the abstract Unix socket a ShmOffer names, writes the offer's
// token and returns the server's one-byte answer (1: here is the ring, 0:
// unknown or used token) and the memfd received with it (-1 if none). A
// handshake the server cut unanswered is tried again, for up to
// shmFetchPatience.
func Fetch(socket string, token []byte) (answer byte, fd int, err error) {
	deadline := time.Now().Add(shmFetchPatience)
	for wait := 2 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		answer, fd, err = fetch(socket, token)
		if err == nil || !cut(err) || time.Now().After(deadline) {
			return answer, fd, err
		}
		time.Sleep(wait)
	}
}

// cut reports whether a handshake's error is the server closing it
// unanswered, or its socket's backlog full: worth another try. No socket
// at that name (another network namespace) is not.
func cut(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) ||
		errors.Is(err, unix.EPIPE) || errors.Is(err, unix.EAGAIN)
}

// fetch is one handshake.
func fetch(socket string, token []byte) (answer byte, fd int, err error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: "@" + socket, Net: "unix"})
	if err != nil {
		return 0, -1, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(shmHandshakeTimeout))
	if _, err := c.Write(token); err != nil {
		return 0, -1, err
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || n != 1 {
		return 0, -1, errors.Join(err, io.ErrUnexpectedEOF)
	}
	fd = -1
	if msgs, _ := unix.ParseSocketControlMessage(oob[:oobn]); len(msgs) == 1 {
		if fds, _ := unix.ParseUnixRights(&msgs[0]); len(fds) == 1 {
			fd = fds[0]
		}
	}
	return buf[0], fd, nil
}

// Mapping is an offered ring, mapped read-only: the loader copies each
// batch out of its slot and gives the slot back at once.
type Mapping struct {
	mem []byte
	// Slots is how many slots the ring has, SlotBytes each one's size.
	Slots     uint32
	SlotBytes uint64
}

// Map fetches and maps the ring o offers.
func Map(o *stokerv1.ShmOffer) (*Mapping, error) {
	answer, fd, err := Fetch(o.GetSocket(), o.GetToken())
	if err == nil && (answer != 1 || fd < 0) {
		err = errors.New("the server refused the token")
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	total, ok := mulOK(uint64(o.GetSlots()), o.GetSlotBytes())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || !ok || uint64(st.Size) != total || total == 0 {
		return nil, fmt.Errorf("the ring's memfd has %d bytes, the offer says %d slots of %d (%v)", st.Size, o.GetSlots(), o.GetSlotBytes(), err)
	}
	mem, err := unix.Mmap(fd, 0, int(total), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &Mapping{mem: mem, Slots: o.GetSlots(), SlotBytes: o.GetSlotBytes()}, nil
}

// Slot is slot i's first n bytes.
func (r *Mapping) Slot(i uint32, n uint64) []byte {
	off := uint64(i) * r.SlotBytes
	return r.mem[off : off+n]
}

// Close unmaps the ring.
func (r *Mapping) Close() {
	unix.Munmap(r.mem)
}

// mulOK is a*b, false when it overflows or exceeds 1 TiB (no ring is that
// large).
func mulOK(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0 && lo <= 1<<40
}
