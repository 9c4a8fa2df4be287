package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// testNetns is a network namespace joined to this one by a veth pair: the
// host side has .1 of a /30, the namespace side .2.
type testNetns struct {
	name           string
	hostIf, nsIf   string
	hostIP, peerIP string
}

// ipCmd runs ip with args, returning its combined output in the error.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// startNetns makes the namespace and its veth pair, or skips the test with
// the reason when this machine does not allow it (no ip, no CAP_NET_ADMIN,
// no veth).
func startNetns(t *testing.T) *testNetns {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("needs the ip command (iproute2) to make a network namespace: %v", err)
	}
	tag := fmt.Sprintf("%x", rand.Uint32()&0xffffff)
	n := &testNetns{name: fmt.Sprintf("stoker-test-%d-%s", os.Getpid(), tag), hostIf: "stkh" + tag, nsIf: "stkp" + tag}
	if err := ipCmd("netns", "add", n.name); err != nil {
		t.Skipf("cannot make a network namespace (needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := ipCmd("netns", "del", n.name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := ipCmd("netns", "exec", n.name, "true"); err != nil {
		t.Skipf("cannot run a process in a network namespace: %v", err)
	}
	if err := ipCmd("link", "add", n.hostIf, "type", "veth", "peer", "name", n.nsIf, "netns", n.name); err != nil {
		t.Skipf("cannot make a veth pair into a network namespace: %v", err)
	}
	t.Cleanup(func() {
		ipCmd("link", "del", n.hostIf) // gone already if the namespace went first
	})
	// A /30 of 10.0.0.0/8 that this machine does not use yet.
	out, err := exec.Command("ip", "-4", "-o", "addr").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -4 -o addr: %v: %s", err, out)
	}
	routes, _ := exec.Command("ip", "-4", "route").CombinedOutput()
	for {
		prefix := fmt.Sprintf("10.%d.%d.", 200+rand.IntN(50), rand.IntN(256))
		if strings.Contains(string(out), prefix) || strings.Contains(string(routes), prefix) {
			continue
		}
		base := 4 * rand.IntN(63)
		n.hostIP, n.peerIP = fmt.Sprintf("%s%d", prefix, base+1), fmt.Sprintf("%s%d", prefix, base+2)
		break
	}
	for _, args := range [][]string{
		{"addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.name, "addr", "add", n.peerIP + "/30", "dev", n.nsIf},
		{"-n", n.name, "link", "set", n.nsIf, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// cut takes the namespace's end of the veth pair down: from then on what
// is sent to the namespace vanishes, with no reset and no ICMP error.
func (n *testNetns) cut(t *testing.T) {
	t.Helper()
	if err := ipCmd("-n", n.name, "link", "set", n.nsIf, "down"); err != nil {
		t.Fatal(err)
	}
}

// TestNetnsPeerCutOff runs one of three peers in a network namespace and
// cuts it off mid-epoch without a reset: its leases are hedged or time out
// and go to the others, and the trainer waits no longer than the lease
// timeout plus 5 s.
func TestNetnsPeerCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	n := startNetns(t)
	ctx := processTest(t, 5*time.Minute)
	data := writeDataset(t, faultSamples, faultClasses, 0)
	local := startPeers(t, ctx, 2, data)
	far := startServe(t, ctx, serveConfig{
		name: "peer in " + n.name, dataset: data, workers: 1, netns: n.name,
		listen: n.peerIP + ":0", metrics: n.peerIP + ":0",
	})
	peers := []*serveProc{far, local[0], local[1]}
	coord := startServe(t, ctx, serveConfig{name: "coordinator", dataset: data, peers: peerList(peers...)})
	waitPeersReady(t, ctx, coord, 3)
	spec := testJob(faultBatch, 13)
	nb := faultSamples / faultBatch
	res := consumeEpoch(t, ctx, coord.addr, spec, consumeOpts{
		throttle: 2 * time.Millisecond,
		after: func(k int) {
			if k == nb/3 {
				inflight := leasesInFlight(t, ctx, coord, peers)
				n.cut(t)
				t.Logf("cut %s off after %d of %d batches, with %v leases in flight on it", far.addr, k, nb, inflight[0])
			}
		},
	})
	checkEpoch(t, res, spec, faultSamples)
	ms := logLeases(t, ctx, coord)
	// Its leases in flight time out, or are outrun by their hedges first.
	if sumSeries(ms, "stoker_lease_failures_total", `maker="`+far.addr+`"`, `reason="timeout"`)+
		sumSeries(ms, "stoker_lease_failures_total", `maker="`+far.addr+`"`, `reason="slow"`) == 0 {
		t.Errorf("no lease of the cut-off peer %s timed out or was outrun by its hedge: the fault was not exercised", far.addr)
	}
	for _, p := range local {
		if sumSeries(ms, "stoker_leases_total", `maker="`+p.addr+`"`) == 0 {
			t.Errorf("peer %s got no leases", p.addr)
		}
	}
}
