"""What a hostile client or neighbor cannot do to a trainer, against the
real server: long names are refused with a short echo, and a token removed
at a reload cuts the streams opened with it, a neighbor flooding the ring
socket does not deny the trainer shared memory, and "auto" falling back to
chunks says so once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import warnings

import pytest

import stoker
from helpers import collect, loader


@pytest.mark.parametrize("what", ["preset", "dataset"])
def test_long_names_are_invalid_argument(server: str, what: str) -> None:
    long = "x" * (16 << 10) + "é" * 512  # 17 KB: echoed whole, its status passed grpcio's 8 KB header limit
    kw = {"transform": long} if what == "preset" else {"dataset": long}
    for use in (lambda ld: next(iter(ld)), len):
        with loader(server, **kw) as ld, pytest.raises(stoker.StokerError) as e:
            use(ld)
        assert e.value.code == "INVALID_ARGUMENT", e.value
        assert len(e.value.message) < 512 and "the limit is 256" in e.value.message


def _wait_for_log(path: str, text: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        with open(path, errors="replace") as f:
            if text in f.read():
                return
        if time.monotonic() > deadline:
            pytest.fail(f"{text!r} not in the server's log within {seconds} s")
        time.sleep(0.05)


def test_revoked_token_cuts_open_streams(start_server, tmp_path) -> None:
    """A token removed from --auth-tokens and SIGHUP: the loaders using it
    fail with UNAUTHENTICATED, the one mid-epoch and the one whose stream
    waits for its next epoch alike; a loader with a token kept goes on."""
    tokens = tmp_path / "tokens"
    tokens.write_text("keep-me\nrevoke-me\n")
    srv = start_server("--auth-tokens", str(tokens))
    with loader(srv.addr, token="revoke-me", prefetch=1) as between, \
            loader(srv.addr, token="revoke-me", prefetch=1) as mid, \
            loader(srv.addr, token="keep-me", prefetch=1) as kept:
        assert len(collect(between)) == 10  # its stream stays open for epoch 1
        it = iter(mid)
        next(it)
        assert len(collect(kept)) == 10
        tokens.write_text("keep-me\n")
        srv.proc.send_signal(signal.SIGHUP)
        _wait_for_log(srv.log_path, "streams_cut=2")
        for ld, run in ((between, lambda: collect(between)), (mid, lambda: list(it))):
            with pytest.raises(stoker.StokerError) as e:
                run()
            assert e.value.code == "UNAUTHENTICATED", e.value
        assert len(collect(kept)) == 10


_FLOODER = r"""
import socket, sys, threading, time
pid, n = sys.argv[1], int(sys.argv[2])
name = None
while name is None:  # the hub's abstract socket, as any local process can find it
    with open("/proc/net/unix") as f:
        for line in f:
            path = line.split()[-1]
            if path.startswith("@stoker-%s-" % pid):
                name = path[1:]
    time.sleep(0.01)

def hold():
    while True:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect("\0" + name)
                s.recv(1)  # sends nothing; until the server cuts it
        except OSError:
            pass
        time.sleep(0.01)

for _ in range(n):
    threading.Thread(target=hold, daemon=True).start()
print("flooding", flush=True)
sys.stdin.read()  # until the test closes it
"""


def test_shm_survives_a_neighbor_flood(start_server) -> None:
    """Local processes holding many silent connections to the server's ring
    socket, connecting again as soon as they are cut (16 of them denied
    every trainer its ring before): the trainer still gets shared memory,
    stream after stream."""
    srv = start_server()
    flooders = [subprocess.Popen([sys.executable, "-c", _FLOODER, str(srv.proc.pid), "48"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        for f in flooders:
            assert f.stdout.readline().strip() == "flooding"
        # Turned away at once past a process's bound, and cut when silent.
        _wait_for_log(srv.log_path, "policy=shm_flood")
        _wait_for_log(srv.log_path, "policy=shm_silent")
        for _ in range(3):
            with loader(srv.addr, transport="shm") as ld:
                assert len(collect(ld)) == 10
                assert ld.transport == "shm" and ld.stats.shm_batches > 0
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # auto says nothing: it got the ring
            with loader(srv.addr) as ld:
                collect(ld)
                assert ld.transport == "shm", ld.transport_reason
    finally:
        for f in flooders:
            f.stdin.close()
            f.wait(timeout=10)


def test_auto_fallback_warns_once(start_server) -> None:
    srv = start_server("--shm=false")
    with pytest.warns(RuntimeWarning) as rec:
        with loader(srv.addr) as ld:
            collect(ld)
            collect(ld)  # the next epoch, on the same stream
            next(iter(ld))
            ld.load_state_dict(ld.state_dict())
            next(iter(ld))  # a new stream
            assert ld.transport == "grpc"
    fell_back = [w for w in rec if "shared memory" in str(w.message)]
    assert len(fell_back) == 1 and "--shm=false" in str(fell_back[0].message), fell_back
    # Shown at the trainer's loop (here the tests' collect()), not inside stoker.
    assert fell_back[0].filename.endswith("helpers.py"), fell_back[0].filename
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with loader(srv.addr, transport="grpc") as ld:  # asked for chunks: nothing to say
            collect(ld)
    # A server on another machine: chunks are the way, not a fallback.
    from stoker._stream import _Session

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _Session()._warn_fallback("the trainer runs on another machine (its boot id is not the server's)")
