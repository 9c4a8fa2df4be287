package shm

import "testing"

// TestShmWaitPool: the pool of connections waiting for their token is
// shared by process and user: a process past its bound is refused, and a
// newcomer at a full user or pool takes the place of the oldest
// connection of the process (user) with the most.
func TestShmWaitPool(t *testing.T) {
	type peer struct {
		pid int32
		uid uint32
	}
	fill := func(p *waitPool, peers ...peer) []*waitConn {
		var out []*waitConn
		for _, pr := range peers {
			w := &waitConn{peer: shmPeer{pid: pr.pid, uid: pr.uid}}
			if ev, ok := p.admit(w); !ok || ev != nil {
				t.Fatalf("filling: %v admitted %v, evicted %v", pr, ok, ev)
			}
			out = append(out, w)
		}
		return out
	}
	times := func(n int, pr peer) []peer {
		out := make([]peer, n)
		for i := range out {
			out[i] = pr
		}
		return out
	}
	newPool := func() *waitPool { return &waitPool{conns: map[*waitConn]struct{}{}} }

	t.Run("per process", func(t *testing.T) {
		p := newPool()
		fill(p, times(WaitingPerPID, peer{1, 100})...)
		if ev, ok := p.admit(&waitConn{peer: shmPeer{1, 100}}); ok || ev != nil {
			t.Errorf("a process past its bound: admitted %v, evicted %v", ok, ev)
		}
		if _, ok := p.admit(&waitConn{peer: shmPeer{2, 100}}); !ok {
			t.Error("another process of the same user refused")
		}
	})
	t.Run("per user: the process with most makes room", func(t *testing.T) {
		p := newPool()
		old := fill(p, times(3, peer{1, 100})...) // the oldest, but fewest
		var big []*waitConn
		for pid := int32(2); pid <= 4; pid++ {
			big = append(big, fill(p, times(WaitingPerPID, peer{pid, 100})...)...)
		}
		fill(p, times(shmWaitingPerUID-3-3*WaitingPerPID, peer{5, 100})...)
		w := &waitConn{peer: shmPeer{6, 100}}
		ev, ok := p.admit(w)
		if !ok || ev != big[0] {
			t.Errorf("admitted %v, evicted %+v; want pid 2's oldest, not pid 1's %+v", ok, ev, old[0])
		}
		if len(p.conns) != shmWaitingPerUID {
			t.Errorf("%d waiting, want %d", len(p.conns), shmWaitingPerUID)
		}
	})
	t.Run("pool: the user with most makes room", func(t *testing.T) {
		p := newPool()
		var first *waitConn
		for uid := uint32(100); len(p.conns) < shmWaiting; uid++ {
			for pid := int32(uid * 10); len(p.conns) < shmWaiting && pid < int32(uid*10)+4; pid++ {
				ws := fill(p, times(WaitingPerPID, peer{pid, uid})...)
				if first == nil {
					first = ws[0]
				}
			}
		}
		ev, ok := p.admit(&waitConn{peer: shmPeer{1, 999}})
		if !ok || ev != first {
			t.Errorf("a new user at a full pool: admitted %v, evicted %+v; want the oldest of the largest user %+v", ok, ev, first)
		}
		if !p.remove(p.anyOf(999)) || p.remove(ev) {
			t.Error("remove: the newcomer not there, or the evicted one still there")
		}
	})
}

// anyOf is a waiting connection of user uid, nil if none.
func (p *waitPool) anyOf(uid uint32) *waitConn {
	for c := range p.conns {
		if c.peer.uid == uid {
			return c
		}
	}
	return nil
}
