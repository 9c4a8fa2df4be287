"""One Feed stream for a Loader's life: epochs continue on it, an abandoned
iteration closes it, len() never opens one (against the real server)."""

from __future__ import annotations

import gc
import time

import pytest

import stoker
from stoker._stream import _FeedStream

from helpers import TINY_N, assert_same_batches, collect, indices, loader


def fresh_epoch(server: str, epoch: int, **kw):
    ld = loader(server, **kw)
    ld.set_epoch(epoch)
    try:
        return collect(ld)
    finally:
        ld.close()


def wait_for(cond, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_epochs_continue_on_one_stream(server: str) -> None:
    kw = dict(seed=21, return_indices=True, prefetch=3)
    opened = _FeedStream.opened
    with loader(server, **kw) as ld:
        streams, conns, got = [], [], []
        for epoch in range(3):
            ld.set_epoch(epoch)
            got.append(collect(ld))
            streams.append(ld._session.stream)
            conns.append(ld._session.conn)
            assert ld.job_info.epoch == epoch
        assert _FeedStream.opened - opened == 1
        assert streams[0] is not None and all(s is streams[0] for s in streams)
        assert all(c is conns[0] for c in conns)
        # Idle between epochs, the stream already holds the next epoch's
        # JobInfo and `prefetch` batches (the last batches granted credits).
        assert wait_for(lambda: streams[0].out.qsize() >= 1 + 3)
        assert not streams[0].closed and streams[0].next_epoch == 3
    assert streams[0].closed and ld._session.stream is None and ld._session.conn is None
    for epoch, batches in enumerate(got):
        assert sorted(indices(batches)) == list(range(TINY_N))
        assert_same_batches(batches, fresh_epoch(server, epoch, **kw))
    assert indices(got[0]) != indices(got[1]) != indices(got[2])


def test_epochs_continue_without_set_epoch_and_as_ready(server: str) -> None:
    kw = dict(seed=22, return_indices=True, in_order=False, prefetch=2)
    opened = _FeedStream.opened
    with loader(server, **kw) as ld:
        got = [collect(ld) for _ in range(2)]  # epoch 0, then 1 by itself
        assert ld.epoch == 2 and _FeedStream.opened - opened == 1
    for epoch, batches in enumerate(got):
        ref = {tuple(b[2].tolist()): b for b in fresh_epoch(server, epoch, seed=22, return_indices=True)}
        assert sorted(ref) == sorted(tuple(b[2].tolist()) for b in batches)
        for b in batches:
            assert_same_batches([b], [ref[tuple(b[2].tolist())]])


def test_break_closes_the_stream_and_the_next_epoch_runs(server: str) -> None:
    kw = dict(seed=23, return_indices=True)
    ref0, ref1, ref3 = (fresh_epoch(server, e, **kw) for e in (0, 1, 3))
    opened = _FeedStream.opened
    with loader(server, **kw) as ld:
        for i, _ in enumerate(ld):
            stream = ld._session.stream
            if i == 2:
                break
        # Closed at once: the generator was dropped at the break.
        assert stream.closed and not stream._thread.is_alive() and ld._session.stream is None
        # The position is still epoch 0 (a state_dict now would resume it)...
        assert ld.epoch == 0 and ld.batches_consumed == 3
        # ...but the next iteration runs the next epoch, on a new stream.
        assert_same_batches(collect(ld), ref1)
        assert _FeedStream.opened - opened == 2
        assert ld.epoch == 2
        # set_epoch to another epoch than the one the stream waits at: a new
        # stream, which then goes on into the next epoch.
        ld.set_epoch(3)
        assert_same_batches(collect(ld), ref3)
        assert _FeedStream.opened - opened == 3
        ld.set_epoch(1)
        assert_same_batches(collect(ld), ref1)
        assert _FeedStream.opened - opened == 4
        kept = ld._session.stream
        collect(ld)  # epoch 2, on the same stream
        assert ld._session.stream is kept and _FeedStream.opened - opened == 4
        # set_epoch to the epoch a break left: that epoch from its start.
        ld.set_epoch(0)
        for i, _ in enumerate(ld):
            if i == 1:
                break
        ld.set_epoch(0)
        assert_same_batches(collect(ld), ref0)


def test_exception_and_close_mid_epoch(server: str) -> None:
    ld = loader(server, seed=24)
    it = iter(ld)
    next(it)
    stream = ld._session.stream
    with pytest.raises(ValueError):
        it.throw(ValueError("the trainer failed"))
    assert stream.closed and ld._session.stream is None

    it = iter(ld)
    next(it)
    ld.close()  # under a running iteration
    with pytest.raises(stoker.StokerError) as e:
        for _ in it:
            pass
    assert e.value.code == "CANCELLED"
    assert len(collect(ld)) == 10  # a closed loader opens a new channel
    ld.close()
    ld.close()


def test_abandoned_iterator_and_loader_are_closed_when_collected(server: str) -> None:
    ld = loader(server, seed=25)
    it = iter(ld)
    next(it)
    stream = ld._session.stream
    del it
    gc.collect()
    assert stream.closed and not stream._thread.is_alive()

    ld.set_epoch(1)
    collect(ld)  # a finished epoch: the stream stays open, idle
    stream, conn = ld._session.stream, ld._session.conn
    assert not stream.closed
    del ld
    gc.collect()
    assert stream.closed and conn.closed
    assert wait_for(lambda: not stream._thread.is_alive())


def test_len_asks_describe_job_not_a_stream(server: str) -> None:
    opened = _FeedStream.opened
    ld = loader(server, batch_size=7, world_size=3, rank=2, seed=26, return_indices=True)
    n = len(ld)
    assert n == 3  # ceil(48 / 3) = 16 samples in batches of 7
    ld.set_epoch(4)
    assert len(ld) == 3 and len(ld._len_cache) == 2
    assert _FeedStream.opened == opened
    assert len(collect(ld)) == 3
    assert _FeedStream.opened == opened + 1
    drop = loader(server, batch_size=7, drop_last=True)
    assert len(drop) == 6 and _FeedStream.opened == opened + 1
    with pytest.raises(stoker.StokerError) as e:
        len(loader(server, "no-such-dataset"))
    assert e.value.code == "NOT_FOUND"
    assert _FeedStream.opened == opened + 1
    ld.close()
    drop.close()


def test_timeout_on_a_silent_server() -> None:
    import socket

    with socket.socket() as s:  # accepts connections, never answers
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        ld = stoker.Loader(f"127.0.0.1:{s.getsockname()[1]}", "tiny", pin_memory=False, timeout=0.5)
        it = iter(ld)
        t0 = time.monotonic()
        with pytest.raises(stoker.StokerError) as e:
            next(it)
        assert e.value.code == "DEADLINE_EXCEEDED"
        assert time.monotonic() - t0 >= 0.5  # never early; how late is the machine's
        assert ld._session.stream is None
        ld.close()
