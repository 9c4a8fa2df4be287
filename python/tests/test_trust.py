"""What a hostile client or neighbor cannot do to a trainer, against the
real server: long names are refused with a short echo, and a token removed
at a reload cuts the streams opened with it."""

from __future__ import annotations

import signal
import time

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


def _wait_for_log(path: str, text: str, seconds: float = 20.0) -> None:
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
