package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stoker-dev/stoker/internal/ragged"
	trainerring "github.com/stoker-dev/stoker/internal/ring"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/shm"
)

// shmTrainer is the trainer's side of shared-memory delivery, as the
// Python client does it: the offer, the handshake on the abstract socket,
// the mapping.
type shmTrainer struct {
	stream pb.FeedService_FeedClient
	offer  *pb.ShmOffer
	mem    []byte
	fd     int
	// targetsInSlot counts the batches whose targets readEpoch read from
	// their slot (BatchTargets.in_slot).
	targetsInSlot int
}

func bootID(t testing.TB) string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// shmOpen opens a stream asking for shared memory and returns the offer
// as received, before any handshake.
func (e *testEnv) shmOpen(t testing.TB, ctx context.Context, open *pb.OpenJob, boot string) *shmTrainer {
	t.Helper()
	if open.Shm == nil {
		open.Shm = &pb.ShmRequest{}
	}
	open.Shm.BootId = boot
	st := &shmTrainer{stream: e.feedStream(t, ctx, open), fd: -1}
	m, err := st.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if st.offer = m.GetShm(); st.offer == nil {
		t.Fatalf("first message %T, want ShmOffer", m.GetMsg())
	}
	return st
}

// shmAccepted opens a Feed stream for open with credits granted up front,
// asking for shared memory, and maps and accepts the ring offered. The
// stream ends with the test, or after 30 s.
func (e *testEnv) shmAccepted(t testing.TB, open *pb.OpenJob, credits uint32) *shmTrainer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	open.Credits = credits
	st := e.shmOpen(t, ctx, open, bootID(t))
	st.accept(t)
	return st
}

// accept fetches and maps the ring and accepts it.
func (st *shmTrainer) accept(t testing.TB) {
	t.Helper()
	o := st.offer
	if o.GetDeclined() != "" {
		t.Fatalf("declined: %s", o.GetDeclined())
	}
	ok, fd, err := trainerring.Fetch(o.GetSocket(), o.GetToken())
	if err != nil || ok != 1 || fd < 0 {
		t.Fatalf("fetch: %d, fd %d, %v", ok, fd, err)
	}
	st.mapAndAccept(t, fd)
}

// mapAndAccept maps the ring's memfd fd and accepts it.
func (st *shmTrainer) mapAndAccept(t testing.TB, fd int) {
	t.Helper()
	o := st.offer
	st.fd = fd
	var err error
	size := int(o.GetSlots()) * int(o.GetSlotBytes())
	if st.mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.close)
	if err := st.stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Shm{Shm: &pb.ShmAccept{Ok: true}}}); err != nil {
		t.Fatal(err)
	}
}

func (st *shmTrainer) close() {
	if st.mem != nil {
		unix.Munmap(st.mem)
		st.mem = nil
	}
	if st.fd >= 0 {
		unix.Close(st.fd)
		st.fd = -1
	}
}

// readEpoch reads JobInfo, the batches and EpochEnd. Slots are released
// right away unless hold, in which case they never are (later batches then
// come in chunks). It returns the batches and how many came in slots.
func (st *shmTrainer) readEpoch(t testing.TB, hold bool) (epoch, int) {
	t.Helper()
	var ep epoch
	first, err := st.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ep.info = first.GetJob(); ep.info == nil {
		t.Fatalf("got %T, want JobInfo", first.GetMsg())
	}
	inSlots := 0
	for {
		m, err := st.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ep.end = m.GetEnd(); ep.end != nil {
			return ep, inSlots
		}
		h := m.GetBatch()
		if h == nil {
			t.Fatalf("got %T, want BatchHeader", m.GetMsg())
		}
		if h.Slot == nil { // no slot: its chunks follow, as without a ring
			b, err := readChunks(st.stream, h, ep.info.GetMaxChunkBytes())
			if err != nil {
				t.Fatal(err)
			}
			ep.batches = append(ep.batches, b)
			continue
		}
		inSlots++
		off := int(h.GetSlot()) * int(st.offer.GetSlotBytes())
		data := bytes.Clone(st.mem[off : off+int(h.GetDataBytes())])
		hdr := proto.Clone(h).(*pb.BatchHeader)
		hdr.Slot = nil // compared with chunked batches
		if hdr.GetTargets().GetInSlot() != nil {
			// Read as a trainer does: every range checked, then copied
			// out before the slot goes back.
			slot := bytes.Clone(st.mem[off : off+int(st.offer.GetSlotBytes())])
			if err := ragged.FromSlot(hdr.Targets, slot, h.GetDataBytes()); err != nil {
				t.Fatalf("batch %d: %v", h.GetNumber(), err)
			}
			st.targetsInSlot++
		}
		if err := targetsAsField(hdr); err != nil {
			t.Fatal(err)
		}
		ep.batches = append(ep.batches, gotBatch{hdr: hdr, data: data})
		if !hold {
			cr := &pb.Credit{Credits: 1, ReleasedSlots: []uint32{h.GetSlot()}}
			// EOF: the server ended the stream after the last batch.
			if err := st.stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: cr}}); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
		}
	}
}

func TestShmSameBytes(t *testing.T) {
	e := newEnv(t, Config{Shm: true})
	want := e.collect(t, smallJob("tiny", 8))
	for _, tc := range []struct {
		name     string
		credits  uint32
		asReady  bool
		minSlots int
	}{
		{name: "released as read", credits: 2, minSlots: 5},
		{name: "as ready", credits: 3, asReady: true, minSlots: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			open := smallJob("tiny", 8)
			open.Credits, open.AsReady = tc.credits, tc.asReady
			st := e.shmOpen(t, ctx, open, bootID(t))
			if want := uint32(shm.RingSlots(int64(tc.credits), e.srv.coord.PoolCeiling(int64(tc.credits)))); st.offer.GetSlots() != want {
				t.Fatalf("ring of %d slots for %d credits, want %d", st.offer.GetSlots(), tc.credits, want)
			}
			st.accept(t)
			got, inSlots := st.readEpoch(t, false)
			if tc.asReady {
				slices.SortFunc(got.batches, func(a, b gotBatch) int { return int(a.hdr.GetNumber()) - int(b.hdr.GetNumber()) })
			}
			sameBatches(t, "shared memory vs chunks", want.batches, got.batches)
			if inSlots != len(want.batches) {
				t.Errorf("%d of %d batches in slots", inSlots, len(got.batches))
			}
		})
	}
}

func TestShmHeldSlotsFallBackToChunks(t *testing.T) {
	e := newEnv(t, Config{Shm: true})
	want := e.collect(t, smallJob("tiny", 2)) // 20 batches
	st := e.shmAccepted(t, smallJob("tiny", 2), 1)
	// Grant credits without releasing anything: once the trainer holds
	// every slot, batches come in chunks.
	go func() {
		for range 30 {
			st.stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1}}})
		}
	}()
	got, inSlots := st.readEpoch(t, true)
	sameBatches(t, "held slots", want.batches, got.batches)
	if inSlots != int(st.offer.GetSlots()) {
		t.Errorf("%d batches in slots, want the ring's %d", inSlots, st.offer.GetSlots())
	}
}

func TestShmDeclined(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		boot string
		want string
	}{
		{"another machine", Config{Shm: true}, "not-this-boot", "another machine"},
		{"off", Config{}, "", "--shm=false"},
		// The batch budget: 3/4 of it, the job's two batches of 256x256
		// (3 MiB) and 384 KiB for the two workers' sample scratch (their
		// read buffers and libjpeg's).
		{"memory budget", Config{Shm: true, MemoryBudget: 4<<20 + 512<<10}, "", "memory budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			want := e.collect(t, smallJob("tiny", 8))
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			open := smallJob("tiny", 8)
			if tc.name == "memory budget" {
				// 64 slots of 8 samples of 32x32x3 fit; of 256x256 do not.
				open.Job.Transform = &pb.TransformSpec{Ops: []*pb.Op{rrcOp(256)}}
				want = epoch{}
			}
			boot := tc.boot
			if boot == "" {
				boot = bootID(t)
			}
			st := e.shmOpen(t, ctx, open, boot)
			if !strings.Contains(st.offer.GetDeclined(), tc.want) || st.offer.GetSocket() != "" {
				t.Fatalf("offer %v, want declined with %q", st.offer, tc.want)
			}
			// No ShmAccept: the stream goes on in chunks.
			got, err := readEpoch(st.stream)
			if err != nil {
				t.Fatal(err)
			}
			if want.batches != nil {
				sameBatches(t, "declined", want.batches, got.batches)
			}
		})
	}
}

func TestShmTrainerDeclines(t *testing.T) {
	e := newEnv(t, Config{Shm: true})
	want := e.collect(t, smallJob("tiny", 8))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	st := e.shmOpen(t, ctx, smallJob("tiny", 8), bootID(t))
	// A trainer that cannot reach the socket (another network namespace)
	// says so, and gets chunks.
	st.stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Shm{Shm: &pb.ShmAccept{Reason: "connect: no such socket"}}})
	got, err := readEpoch(st.stream)
	if err != nil {
		t.Fatal(err)
	}
	sameBatches(t, "trainer declined", want.batches, got.batches)
	waitRingsGone(t, e)
}

// TestShmNoAnswer: a trainer that sends no ShmAccept gets
// DEADLINE_EXCEEDED after --first-message-timeout, saying which side
// stalled: whether its process had fetched the ring (then only its answer
// was left to send) or never came to the socket.
func TestShmNoAnswer(t *testing.T) {
	e := newEnv(t, Config{Shm: true, FirstMessageTimeout: 300 * time.Millisecond})
	for _, fetch := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		st := e.shmOpen(t, ctx, smallJob("tiny", 8), bootID(t))
		want := "the trainer never fetched the ring"
		if fetch {
			ok, fd, err := trainerring.Fetch(st.offer.GetSocket(), st.offer.GetToken())
			if err != nil || ok != 1 || fd < 0 {
				t.Fatalf("fetch: %d, fd %d, %v", ok, fd, err)
			}
			unix.Close(fd)
			want = fmt.Sprintf("the trainer's process (pid %d) fetched the ring", os.Getpid())
		}
		_, err := st.stream.Recv()
		if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no answer to the shared-memory offer") || !strings.Contains(err.Error(), want) {
			t.Errorf("fetched %v, no answer: %v; want DEADLINE_EXCEEDED saying %q", fetch, err, want)
		}
		cancel()
	}
	waitRingsGone(t, e)
}

// TestShmHostile: what a trainer (or any local process) can do to a ring
// and its socket gets an error, never the server.
func TestShmHostile(t *testing.T) {
	e := newEnv(t, Config{Shm: true})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	t.Run("token", func(t *testing.T) {
		st := e.shmOpen(t, ctx, smallJob("tiny", 8), bootID(t))
		bad := bytes.Clone(st.offer.GetToken())
		bad[0] ^= 1
		if ok, fd, err := trainerring.Fetch(st.offer.GetSocket(), bad); err != nil || ok != 0 || fd >= 0 {
			t.Errorf("wrong token: %d, fd %d, %v; want 0 and no descriptor", ok, fd, err)
		}
		st.accept(t)
		// Single use.
		if ok, fd, err := trainerring.Fetch(st.offer.GetSocket(), st.offer.GetToken()); err != nil || ok != 0 || fd >= 0 {
			t.Errorf("token used twice: %d, fd %d, %v; want 0 and no descriptor", ok, fd, err)
		}
		// Sealed: the trainer cannot resize what the server writes to.
		if err := unix.Ftruncate(st.fd, 0); !errors.Is(err, unix.EPERM) {
			t.Errorf("ftruncate of the ring: %v, want EPERM", err)
		}
		if err := unix.Ftruncate(st.fd, int64(len(st.mem))*2); !errors.Is(err, unix.EPERM) {
			t.Errorf("growing the ring: %v, want EPERM", err)
		}
		st.readEpoch(t, false)
	})
	for _, tc := range []struct {
		name string
		msg  *pb.FeedRequest
		want string
	}{
		{"release a slot past the ring", &pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{ReleasedSlots: []uint32{9999}}}}, "of a ring of"},
		{"release a free slot", &pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{ReleasedSlots: []uint32{0, 0}}}}, "holds no batch"},
		{"a second ShmAccept", &pb.FeedRequest{Msg: &pb.FeedRequest_Shm{Shm: &pb.ShmAccept{Ok: true}}}, "must be Credits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := smallJob("tiny", 8)
			open.Credits = 1
			st := e.shmOpen(t, ctx, open, bootID(t))
			st.accept(t)
			if err := st.stream.Send(tc.msg); err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := st.stream.Recv(); err != nil {
					if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("%v, want InvalidArgument with %q", err, tc.want)
					}
					break
				}
			}
		})
	}
	t.Run("no ShmAccept", func(t *testing.T) {
		st := e.shmOpen(t, ctx, smallJob("tiny", 8), bootID(t))
		st.stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1}}})
		_, err := st.stream.Recv()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "must be ShmAccept") {
			t.Fatalf("%v, want InvalidArgument", err)
		}
	})
	t.Run("socket garbage", func(t *testing.T) {
		// Connections that send nothing, or too little, are closed within
		// the read timeout (or at once, past this process's bound); the
		// hub still serves.
		st := e.shmOpen(t, ctx, smallJob("tiny", 8), bootID(t))
		var idle []*net.UnixConn
		for range shm.WaitingPerPID + 4 {
			c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: "@" + st.offer.GetSocket(), Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			c.Write([]byte("short"))
			idle = append(idle, c)
		}
		for _, c := range idle {
			c.SetReadDeadline(time.Now().Add(5 * shm.ReadTimeout))
			// EOF, or a reset where the hub closed it unread (too many).
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, unix.ECONNRESET) {
				t.Errorf("an idle handshake: %v, want it closed by the hub", err)
			}
			c.Close()
		}
		st.accept(t)
		st.readEpoch(t, false)
	})
	waitRingsGone(t, e)
}

// TestShmRingFreed: a trainer that goes away mid-epoch leaves no ring
// mapped in the server, and its bytes back in the budget.
func TestShmRingFreed(t *testing.T) {
	e := newEnv(t, Config{Shm: true})
	before := e.srv.budget.InUse()
	ctx, cancel := context.WithCancel(context.Background())
	open := smallJob("tiny", 2)
	open.Credits = 2
	st := e.shmOpen(t, ctx, open, bootID(t))
	st.accept(t)
	if n := countRingMaps(t); n != 2 { // the server's and this trainer's
		t.Errorf("%d ring mappings, want 2", n)
	}
	st.stream.Recv() // JobInfo
	st.stream.Recv() // a batch
	st.close()
	cancel()
	waitRingsGone(t, e)
	waitUntilState(t, "the stream's budget given back", func() string {
		return fmt.Sprintf("budget in use %d after the stream, %d before", e.srv.budget.InUse(), before)
	}, func() bool { return e.srv.budget.InUse() == before })
}

// countRingMaps counts this process's mappings of ring memfds.
func countRingMaps(t testing.TB) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), "memfd:stoker-ring")
}

// waitRingsGone waits until no ring is mapped and the gauge says so.
func waitRingsGone(t testing.TB, e *testEnv) {
	t.Helper()
	waitUntilState(t, "no ring mapped after the streams ended", func() string {
		return fmt.Sprintf("%d ring mappings, stoker_shm_ring_bytes %v", countRingMaps(t), testutil.ToFloat64(e.srv.m.shmRings))
	}, func() bool { return countRingMaps(t) == 0 && testutil.ToFloat64(e.srv.m.shmRings) == 0 })
}
