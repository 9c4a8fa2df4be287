"""Same-host delivery through a shared-memory ring, against the real server:
the same bytes as gRPC chunks, resume and as-ready on it, slots that stay
valid while referenced, the fallbacks, and a killed trainer's ring freed."""

from __future__ import annotations

import gc
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
import pytest
import torch

import stoker
from helpers import TINY_N, assert_same_batches, collect, indices, loader
from stoker._errors import StokerError

PYDIR = str(Path(__file__).resolve().parents[1])


def ring_maps(pid: int) -> int:
    """The mappings of ring memfds in process ``pid``."""
    with open(f"/proc/{pid}/maps") as f:
        return f.read().count("memfd:stoker-ring")


def wait_for(cond, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {seconds} s")
        time.sleep(0.05)


@pytest.mark.parametrize("in_order", [True, False])
def test_same_bytes_both_ways(server: str, in_order: bool) -> None:
    kw = dict(return_indices=True, in_order=in_order, seed=5)
    with loader(server, transport="grpc", **kw) as g:
        want = [collect(g) for _ in range(2)]
        assert g.transport == "grpc" and g.stats.shm_batches == 0
    with loader(server, transport="shm", **kw) as s:
        got = [collect(s) for _ in range(2)]
        assert s.transport == "shm" and s.transport_reason == ""
        assert s.stats.shm_batches == s.stats.batches == 2 * len(want[0])
    for w, g in zip(want, got):
        if not in_order:  # the same batches, in the order they were ready
            key = lambda b: b[2][0].item()  # noqa: E731
            w, g = sorted(w, key=key), sorted(g, key=key)
        assert_same_batches(w, g)


def test_auto_is_shm_on_this_host(server: str) -> None:
    with loader(server) as ld:
        next(iter(ld))
        assert ld.transport_requested == "auto" and ld.transport == "shm"


def test_transport_is_never_wrong_before_the_first_batch(server: str) -> None:
    # Before the server has answered, only transport="grpc" is known; a
    # loader that asks for a ring says None (not "grpc"), and why.
    with loader(server) as ld:
        assert ld.transport is None and "not known yet" in ld.transport_reason
        len(ld)  # DescribeJob: no stream, nothing negotiated
        assert ld.transport is None
        next(iter(ld))
        assert ld.transport == "shm" and ld.transport_reason == ""
    with loader(server, transport="grpc") as ld:
        assert ld.transport == "grpc" and "not asked" in ld.transport_reason
        next(iter(ld))
        assert ld.transport == "grpc"


def test_resume_on_shm(server: str) -> None:
    with loader(server, transport="grpc", seed=9) as ref:
        full = collect(ref)
    with loader(server, transport="shm", seed=9) as a:
        it = iter(a)
        head = [tuple(t.clone() for t in next(it)) for _ in range(3)]
        state = a.state_dict()
    with loader(server, transport="shm", seed=9) as b:
        b.load_state_dict(state)
        tail = collect(b)
        assert b.transport == "shm"
    assert_same_batches(full, head + tail)


def test_as_ready_resume_on_shm(server: str) -> None:
    kw = dict(in_order=False, return_indices=True, seed=4)
    with loader(server, transport="grpc", **kw) as ref:
        full = indices(collect(ref))
    with loader(server, transport="shm", **kw) as a:
        it = iter(a)
        head = [next(it) for _ in range(4)]
        state = a.state_dict()
    with loader(server, transport="shm", **kw) as b:
        b.load_state_dict(state)
        tail = collect(b)
    # Every sample of the epoch exactly as often as in one whole run.
    assert sorted(indices(head) + indices(tail)) == sorted(full)


def test_kept_batches_stay_valid(server: str) -> None:
    """A trainer that keeps every batch keeps its pixels: the server never
    writes a slot a tensor still views; later batches come in chunks."""
    with loader(server, transport="grpc", batch_size=2, seed=3) as g:
        want = collect(g)  # 24 batches, more than the ring's slots
    with loader(server, transport="shm", batch_size=2, seed=3, prefetch=2) as s:
        kept = list(s)  # the yielded tensors themselves, no copies
        assert 0 < s.stats.shm_batches < len(kept)  # the ring filled up: then chunks
        assert_same_batches(want, kept)
        del kept
        gc.collect()
        # Let go: the next epoch's batches come in slots again.
        before = s.stats.shm_batches
        n = sum(1 for _ in s)
        assert s.stats.shm_batches - before >= n - 2 - 2  # the prefetched ones may have come in chunks


def test_views_and_slices_hold_the_slot(server: str) -> None:
    with loader(server, transport="shm", batch_size=4, seed=8, prefetch=1) as s:
        it = iter(s)
        images, labels = next(it)
        part = images[1:3].numpy()[:, 0]  # a numpy view of a slice of the tensor
        snapshot = part.copy()
        del images, labels
        for _ in it:  # the rest of the epoch, through the ring's other slots
            pass
        assert (part == snapshot).all()


def test_grpc_and_declined(start_server) -> None:
    srv = start_server("--shm=false")
    with loader(srv.addr) as auto, pytest.warns(RuntimeWarning, match="--shm=false"):
        assert auto.transport is None  # until the server declines
        next(iter(auto))
        assert auto.transport == "grpc" and "--shm=false" in auto.transport_reason
    with loader(srv.addr, transport="shm") as forced:
        with pytest.raises(StokerError) as e:
            next(iter(forced))
        assert e.value.code == "FAILED_PRECONDITION" and "--shm=false" in str(e.value)


def test_transport_argument() -> None:
    with pytest.raises(ValueError, match="transport must be one of"):
        stoker.Loader("127.0.0.1:1", "tiny", transport="rdma")
    with pytest.raises(TypeError):
        stoker.Loader("127.0.0.1:1", "tiny", transport=1)


def test_ring_freed_when_the_trainer_is_killed(server: str, start_server) -> None:
    srv = start_server()
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, threading
            sys.path.insert(0, {PYDIR!r})
            import stoker
            from stoker import transforms as T
            ld = stoker.Loader({srv.addr!r}, "tiny", transform=T.Compose([T.Resize((32, 32))]), batch_size=4,
                               prefetch=2, pin_memory=False, transport="shm", timeout=60)
            it = iter(ld)
            kept = [next(it) for _ in range(2)]
            print("READY", ld.transport, flush=True)
            threading.Event().wait()  # holding the ring until the test kills it
        """)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = child.stdout.readline()
        assert line.split() == ["READY", "shm"], line
        assert ring_maps(child.pid) == 1 and ring_maps(srv.proc.pid) == 1
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        # The server unmaps its side when the stream breaks: with the
        # trainer's gone too, the memfd's memory is freed.
        wait_for(lambda: ring_maps(srv.proc.pid) == 0, "the server unmapping the ring")
    finally:
        child.kill()
        child.wait()
    # Nothing under /dev/shm either way: the ring is a memfd.
    assert not [n for n in os.listdir("/dev/shm") if "stoker" in n]


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {r.stderr.strip()}")


@pytest.fixture
def netns():
    """A network namespace joined to this one by a veth pair; yields (name,
    host address, namespace address)."""
    if shutil.which("ip") is None:
        pytest.skip("needs the ip command (iproute2) to make a network namespace")
    tag = "%06x" % random.getrandbits(24)
    name, host_if, ns_if = f"stoker-py-{os.getpid()}-{tag}", "stkh" + tag, "stkp" + tag
    try:
        _ip("netns", "add", name)
    except OSError as e:
        pytest.skip(f"cannot make a network namespace (needs root with CAP_NET_ADMIN): {e}")
    try:
        prefix = f"10.{200 + random.randrange(50)}.{random.randrange(256)}."
        host, peer = prefix + "1", prefix + "2"
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", name)
        _ip("addr", "add", host + "/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", name, "addr", "add", peer + "/30", "dev", ns_if)
        _ip("-n", name, "link", "set", ns_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        yield name, host, peer
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_another_network_namespace_falls_back(netns, start_server) -> None:
    """A trainer on this machine but in another network namespace (a
    container of its own) cannot reach the server's abstract socket: auto
    falls back to chunks, with the same bytes."""
    name, host, _ = netns
    srv = start_server("--listen", f"{host}:0")
    script = textwrap.dedent(f"""
        import hashlib, sys
        sys.path.insert(0, {PYDIR!r})
        import stoker
        from stoker import transforms as T
        ld = stoker.Loader({srv.addr!r}, "tiny", transform=T.Compose([T.Resize((32, 32))]), batch_size=4,
                           pin_memory=False, timeout=60, seed=2)
        h = hashlib.sha256()
        for images, labels in ld:
            h.update(images.numpy().tobytes())
        print(ld.transport, h.hexdigest(), ld.stats.shm_batches)
        print(ld.transport_reason)
    """)
    inside = subprocess.run(["ip", "netns", "exec", name, sys.executable, "-c", script],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert inside.returncode == 0, inside.stderr
    here = subprocess.run([sys.executable, "-c", script], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    assert here.returncode == 0, here.stderr
    t_in, sum_in, n_in = inside.stdout.splitlines()[0].split()
    t_here, sum_here, n_here = here.stdout.splitlines()[0].split()
    assert (t_in, n_in) == ("grpc", "0"), inside.stdout
    assert "could not map" in inside.stdout.splitlines()[1]
    # Said once, at warning level, with the reason.
    assert inside.stderr.count("RuntimeWarning: stoker: transport='auto' gets its batches in gRPC chunks") == 1, inside.stderr
    assert "could not map" in inside.stderr
    assert "RuntimeWarning" not in here.stderr, here.stderr
    assert t_here == "shm" and int(n_here) > 0
    assert sum_in == sum_here
