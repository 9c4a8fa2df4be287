package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	trainerring "github.com/stoker-dev/stoker/internal/ring"
	"github.com/stoker-dev/stoker/server/internal/shm"
)

// floodEnv, set in a child's environment to "SOCKET:N", makes this test
// binary a neighbor that floods a ring socket instead of running tests.
const floodEnv = "STOKER_TEST_SHM_FLOOD"

func TestMain(m *testing.M) {
	if v := os.Getenv(floodEnv); v != "" {
		flood(v)
		return
	}
	os.Exit(m.Run())
}

// flood holds N connections to the socket that send nothing, each
// connecting again as soon as the server cuts it, until its stdin closes
// (the test ended, or died).
func flood(v string) {
	socket, ns, _ := strings.Cut(v, ":")
	n, _ := strconv.Atoi(ns)
	for range n {
		go func() {
			for {
				c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: "@" + socket, Net: "unix"})
				if err == nil {
					c.Read(make([]byte, 1)) // until the server cuts it
					c.Close()
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	fmt.Println("flooding")
	io.Copy(io.Discard, os.Stdin)
}

// startFlood starts a neighbor process holding n silent connections to
// socket. It ends with the test.
func startFlood(t *testing.T, socket string, n int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d", floodEnv, socket, n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &saying{word: "flooding", said: make(chan struct{})}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	select {
	case <-out.said:
	case <-time.After(hangGuard):
		t.Fatalf("the flooding process did not start in %v: it wrote %q", hangGuard, out.String())
	}
}

// saying is a process's output that closes said once it holds word.
type saying struct {
	word string
	said chan struct{}

	mu sync.Mutex
	b  bytes.Buffer
}

func (s *saying) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := strings.Contains(s.b.String(), s.word)
	s.b.Write(p)
	if !had && strings.Contains(s.b.String(), s.word) {
		close(s.said)
	}
	return len(p), nil
}

func (s *saying) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestShmNeighborFlood: local processes (same user as the trainer, other
// pids) that hold many silent connections to the ring socket and connect
// again as soon as they are cut do not deny the trainer its ring: every
// stream still gets shared memory, also a trainer slow to write its token.
// Before, 16 such connections took every handshake and shm failed.
func TestShmNeighborFlood(t *testing.T) {
	e := newEnv(t, Config{Shm: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := e.shmOpen(t, ctx, smallJob("tiny", 8), bootID(t))
	socket := st.offer.GetSocket()
	for range 3 {
		startFlood(t, socket, 48) // each over its own bound, together over the old 16
	}
	// The flood is on once the hub has turned some of it away at once
	// (over a process's bound) and cut some after the read timeout: the
	// pool is full of silent connections, renewed as they are cut.
	refused := func(policy string) float64 {
		return testutil.ToFloat64(e.srv.m.refusals.WithLabelValues(policy))
	}
	waitUntilState(t, "the flood: some connections refused at once, some cut silent", func() string {
		return fmt.Sprintf("%v refused at once, %v cut silent", refused("shm_flood"), refused("shm_silent"))
	}, func() bool { return refused("shm_flood") > 0 && refused("shm_silent") > 0 })
	st.accept(t) // fails the test if the handshake does
	st.readEpoch(t, false)
	for i := range 5 {
		st := e.shmOpen(t, ctx, smallJob("tiny", 8), bootID(t))
		if i%2 == 1 {
			st.acceptSlowly(t, e.srv.shm) // its token waits among the flood's connections
		} else {
			st.accept(t)
		}
		if _, inSlots := st.readEpoch(t, false); inSlots == 0 {
			t.Errorf("stream %d: no batch in the ring", i)
		}
	}
}

// acceptSlowly is accept by a trainer that writes its token only once the
// hub h has accepted its connection, found no token and put it in the
// pool to wait (not after a guess at how long that takes: the pool's path
// is taken however slow the machine, and the token comes well within the
// hub's read timeout from then).
func (st *shmTrainer) acceptSlowly(t *testing.T, h *shm.Hub) {
	t.Helper()
	o := st.offer
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: "@" + o.GetSocket(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitUntil(t, "the slow trainer's connection waiting in the hub's pool", func() bool { return h.WaitingFrom(int32(os.Getpid())) })
	if _, err := c.Write(o.GetToken()); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf, oob := make([]byte, 1), make([]byte, 64)
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || n != 1 || buf[0] != 1 || oobn == 0 {
		t.Fatalf("a slow trainer's handshake: %d bytes %v, %d control bytes, %v", n, buf[:n], oobn, err)
	}
	// Take the memfd and finish as accept does.
	ok, fd, err := trainerring.Fetch(o.GetSocket(), o.GetToken())
	if err != nil || ok != 0 || fd >= 0 {
		t.Fatalf("the token after its use: %d, fd %d, %v; want it refused", ok, fd, err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("rights: %v", err)
	}
	st.mapAndAccept(t, fds[0])
}
