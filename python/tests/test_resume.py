"""state_dict / load_state_dict against the real server: resume in order
(byte-identical), as ready (no batch twice), and elastic (another world
size: every sample at least once, the only repeats the padding)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

from stoker._stream import _FeedStream

from helpers import ODD_N, assert_same_batches, collect, indices, loader

# 1. Same world size.


def test_resume_mid_epoch_is_byte_identical(server: str) -> None:
    kw = dict(seed=9, return_indices=True, batch_size=4)
    ld = loader(server, **kw)
    ld.set_epoch(3)
    full = collect(ld)
    assert len(full) == 12

    first = loader(server, **kw)
    first.set_epoch(3)
    it = iter(first)
    head = [tuple(t.clone() for t in next(it)) for _ in range(5)]
    state = first.state_dict()
    it.close()  # interrupted
    assert state["epoch"] == 3 and state["batches_consumed"] == 5
    assert state["fingerprint"] and state["dataset_size"] == 48
    assert state["consumed"] == 0 and state["taken"] == [] and state["world_size"] == 1
    assert_same_batches(head, full[:5])

    resumed = loader(server, **kw)
    resumed.load_state_dict(state)
    opened = _FeedStream.opened
    rest = collect(resumed)
    assert_same_batches(rest, full[5:])
    assert resumed.epoch == 4 and resumed.batches_consumed == 0
    assert _FeedStream.opened == opened + 1

    with pytest.raises(ValueError, match="batch_size"):
        loader(server, seed=9, batch_size=8).load_state_dict(state)
    with pytest.raises(ValueError, match="seed"):
        loader(server, seed=10, batch_size=4).load_state_dict(state)


def test_pending_resume_reopens_the_stream(server: str) -> None:
    kw = dict(seed=27, return_indices=True)
    with loader(server, **kw) as ld:
        collect(ld)  # epoch 0: the stream now waits at epoch 1
        state = {**ld.state_dict(), "epoch": 1, "batches_consumed": 4}
        kept = ld._session.stream
        ld.load_state_dict(state)
        rest = collect(ld)
        assert kept.closed and ld._session.stream is not kept
    ref = loader(server, **kw)
    ref.set_epoch(1)
    assert_same_batches(rest, collect(ref)[4:])


def test_in_order_state_of_rank_0_resumes_every_rank(server: str) -> None:
    kw = dict(seed=28, return_indices=True, batch_size=3, world_size=2)
    state = None
    for rank in range(2):
        ld = loader(server, rank=rank, **kw)
        it = iter(ld)
        for _ in range(3):
            next(it)
        if rank == 0:
            state = ld.state_dict()
        it.close()
    for rank in range(2):
        resumed = loader(server, rank=rank, **kw)
        resumed.load_state_dict(state)
        assert_same_batches(collect(resumed), collect(loader(server, rank=rank, **kw))[3:])


def batch_numbers(batches, batch_size: int) -> List[int]:
    # Unshuffled, world size 1: batch k holds indices k*B .. k*B+B-1.
    return [b[2][0].item() // batch_size for b in batches]


def test_as_ready_resume_sends_no_batch_twice(server: str) -> None:
    kw = dict(shuffle=False, return_indices=True, in_order=False, prefetch=6)
    ld = loader(server, **kw)
    it = iter(ld)
    first = [tuple(t.clone() for t in next(it)) for _ in range(6)]
    state = ld.state_dict()
    it.close()
    took = batch_numbers(first, 5)
    prefix, taken = state["batches_consumed"], state["taken"]
    assert not state["in_order"] and taken == sorted(taken) and all(k > prefix for k in taken)
    assert set(range(prefix)) | set(taken) == set(took) and prefix + len(taken) == 6

    resumed = loader(server, **kw)
    resumed.load_state_dict(state)
    rest = collect(resumed)
    numbers = took + batch_numbers(rest, 5)
    assert sorted(numbers) == list(range(10))  # the epoch, no batch twice

    # Batches taken out of order past the prefix: none of them again, the
    # others byte for byte.
    ref = collect(loader(server, shuffle=False, return_indices=True))
    resumed = loader(server, **kw)
    resumed.load_state_dict({**state, "batches_consumed": 2, "taken": [4, 7]})
    assert resumed.batches_consumed == 2
    rest = collect(resumed)
    assert sorted(batch_numbers(rest, 5)) == [2, 3, 5, 6, 8, 9]
    for b in rest:
        assert_same_batches([b], [ref[batch_numbers([b], 5)[0]]])
    # Mid-way through the resumed epoch the state keeps the earlier takes.
    resumed = loader(server, **kw)
    resumed.load_state_dict({**state, "batches_consumed": 2, "taken": [4, 7]})
    it = iter(resumed)
    got = batch_numbers([next(it)], 5)
    mid = resumed.state_dict()
    it.close()
    assert set(range(mid["batches_consumed"])) | set(mid["taken"]) == {0, 1, 4, 7} | set(got)

    # An as-ready state holds its rank's own batch numbers: not another's.
    other = loader(server, rank=1, world_size=2, **kw)
    with pytest.raises(ValueError, match="own state_dict"):
        other.load_state_dict({**state, "world_size": 2, "rank": 0})


# 2. Another world size.


def order_of(server: str, epoch: int, **kw) -> List[int]:
    """The epoch's order: world size 1 takes its positions one by one."""
    ld = loader(server, "odd", return_indices=True, **kw)
    ld.set_epoch(epoch)
    return indices(collect(ld))


def run_world(
    server: str, world: int, epoch: int, state: Optional[Dict[str, Any]], take: Optional[int], **kw: Any
) -> Tuple[List[int], List[Dict[str, Any]]]:
    """Every rank of a world, each from ``state``, taking ``take`` batches
    (all when None), as DDP ranks step together. The indices they took, and
    each rank's state_dict at the end."""
    got: List[int] = []
    states = []
    for rank in range(world):
        with loader(server, "odd", rank=rank, world_size=world, return_indices=True, **kw) as ld:
            ld.set_epoch(epoch)
            if state is not None:
                ld.load_state_dict(state)
            n = len(ld)
            it = iter(ld)
            batches = [next(it) for _ in range(take)] if take is not None else list(it)
            it.close()
            if take is None:
                assert len(batches) == n
            got += indices(batches)
            states.append(ld.state_dict())
    return got, states


def padding(n: int, world: int) -> int:
    """Samples the ranks' shares of n positions repeat (wrap-around)."""
    return world * math.ceil(n / world) - n


def check_elastic(server: str, worlds: Sequence[int], takes: Sequence[int], batch_size: int, **kw: Any) -> None:
    """Runs ``worlds[i]`` for ``takes[i]`` batches per rank, resuming each
    world from rank 0's state_dict of the one before, the last one to the
    epoch's end; checks the epoch is covered and the repeats are exactly the
    last world's padding."""
    epoch = 2
    order = order_of(server, epoch, batch_size=batch_size, **kw)
    assert sorted(order) == list(range(ODD_N))
    state, consumed, seen = None, 0, []
    for world, take in zip(worlds, list(takes) + [None]):
        got, states = run_world(server, world, epoch, state, take, batch_size=batch_size, **kw)
        if take is not None:
            # The ranks took exactly the next take*B*world positions.
            assert len(got) == take * batch_size * world
            assert sorted(got) == sorted(order[consumed : consumed + len(got)])
            state = states[0]
            assert state["consumed"] == consumed and state["world_size"] == world
            assert state["batches_consumed"] == take and state["epoch"] == epoch
            consumed += take * batch_size * world
        seen += got
    pad = padding(ODD_N - consumed, worlds[-1])
    extra = Counter(seen) - Counter(range(ODD_N))
    assert set(seen) == set(range(ODD_N))  # every sample at least once
    assert sum(extra.values()) == pad  # the repeats: the last world's padding,
    assert extra == Counter(order[consumed : consumed + pad])  # which wraps to the rest's start
    assert pad <= padding(ODD_N, worlds[0]) + padding(ODD_N - consumed, worlds[-1])


def test_elastic_resume_2_to_3(server: str) -> None:
    check_elastic(server, [2, 3], [3], batch_size=3, seed=31)


def test_elastic_resume_3_to_2(server: str) -> None:
    check_elastic(server, [3, 2], [2], batch_size=3, seed=32, drop_last=False)


def test_elastic_resumes_chain(server: str) -> None:
    # The second resume starts from consumed = 2*3*2 = 12 and adds 2*3*3.
    check_elastic(server, [2, 3, 2], [2, 2], batch_size=3, seed=33)


def test_elastic_resume_unshuffled_past_the_end(server: str) -> None:
    # Every rank took all its batches: consumed is capped at the dataset's
    # size and the resumed epoch is empty.
    got, states = run_world(server, 2, 0, None, 4, batch_size=5, shuffle=False)
    assert sorted(set(got)) == list(range(ODD_N))
    # Taken after the epoch's last batch, the state names the next epoch...
    assert states[0]["epoch"] == 1 and states[0]["batches_consumed"] == 0
    # ...but one that says every batch of epoch 0 was taken (saved by hand,
    # or by an older stoker) resumes into an empty rest of the epoch.
    state = {**states[0], "epoch": 0, "batches_consumed": 4}
    with loader(server, "odd", batch_size=5, world_size=3, shuffle=False) as ld:
        ld.load_state_dict(state)
        assert ld.consumed == ODD_N  # 4*5*2 = 40, capped at 37
        assert len(ld) == 0 and collect(ld) == [] and ld.epoch == 1


def test_elastic_resume_as_ready(server: str) -> None:
    # As ready, only the unbroken prefix counts: batches taken past it are
    # delivered again (at least once), from the state with the smallest
    # prefix of all ranks.
    kw = dict(batch_size=3, seed=34, in_order=False)
    got, states = run_world(server, 2, 1, None, 3, **kw)
    state = min(states, key=lambda s: s["batches_consumed"])
    prefix = state["batches_consumed"]
    rest, _ = run_world(server, 3, 1, state, None, **kw)
    consumed = prefix * 3 * 2
    seen = got + rest
    assert set(seen) == set(range(ODD_N))
    extra = Counter(seen) - Counter(range(ODD_N))
    assert sum(extra.values()) == padding(ODD_N - consumed, 3) + len(got) - consumed
