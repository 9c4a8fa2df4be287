"""shuffle="block" against the real server, on the ``shards`` WebDataset:
every sample once per epoch across ranks, batches from few shards, resumes
(same world and elastic), and the refusal for a dataset without shards."""

from __future__ import annotations

from collections import Counter
from itertools import accumulate
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
import torch

import stoker
from conftest import SHARD_SIZES
from helpers import assert_same_batches, collect, indices, loader

N = sum(SHARD_SIZES)
STARTS = [0, *accumulate(SHARD_SIZES)][:-1]


def shard_of(i: int) -> int:
    return max(s for s, start in enumerate(STARTS) if start <= i)


def epoch_of(server: str, world: int, epoch: int, **kw: Any) -> List[List[Tuple[torch.Tensor, ...]]]:
    """Each rank's batches of ``epoch`` (block shuffle, window 2)."""
    out = []
    for rank in range(world):
        with loader(server, "shards", shuffle="block", shuffle_window=2, batch_size=3, rank=rank,
                    world_size=world, return_indices=True, **kw) as ld:
            ld.set_epoch(epoch)
            out.append(collect(ld))
            assert len(out[-1]) == len(ld)
    return out


def test_block_epochs_take_every_sample_once(server: str) -> None:
    orders = []
    for epoch in (0, 1):
        ranks = epoch_of(server, 2, epoch)
        got = [i for batches in ranks for i in indices(batches)]
        assert sorted(got) == list(range(N))  # 2 divides 36: exactly once
        for batches in ranks:
            for b in batches:
                # A batch reads at most two windows of two shards.
                assert len({shard_of(i) for i in b[2].tolist()}) <= 4
        orders.append(got)
    assert orders[0] != orders[1]
    # Not the global shuffle's order, nor the dataset's.
    with loader(server, "shards", batch_size=3, return_indices=True, world_size=1) as ld:
        assert indices(collect(ld)) not in (orders[0], list(range(N)))


def test_block_dataset_and_loader_agree(server: str) -> None:
    kw: Dict[str, Any] = dict(transform=stoker.transforms.Compose([stoker.transforms.Resize((16, 16))]),
                              batch_size=4, shuffle="block", shuffle_window=1, pin_memory=False, timeout=60,
                              world_size=1, return_indices=True)
    with stoker.Loader(server, "shards", **kw) as ld:
        want = collect(ld)
    ds = stoker.Dataset(server, "shards", **kw)
    try:
        got = [tuple(t.clone() for t in b) for b in torch.utils.data.DataLoader(ds, batch_size=None)]
    finally:
        ds.close()
    assert_same_batches(got, want)
    # A window of one shard reads one shard at a time: a batch spans at
    # most two, one after the other.
    seq = [shard_of(i) for b in got for i in b[2].tolist()]
    runs = [s for k, s in enumerate(seq) if k == 0 or s != seq[k - 1]]
    assert sorted(runs) == list(range(len(SHARD_SIZES)))


def test_block_refused_without_shards(server: str) -> None:
    ld = loader(server, "tiny", shuffle="block")
    want = "dataset \"tiny\" is not sharded (imagefolder): each sample is an object of its own, so the global " \
           "shuffle reads no more objects than a block shuffle would"
    with pytest.raises(stoker.StokerError) as e:
        len(ld)
    assert e.value.code == "INVALID_ARGUMENT" and want in e.value.message
    with pytest.raises(stoker.StokerError) as e:
        next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and want in e.value.message
    # It says what to pass in Python's terms, not the wire's enum.
    assert "use the global shuffle (Python: shuffle=True, not \"block\"" in e.value.message, e.value.message
    assert "SHUFFLE_MODE" not in e.value.message, e.value.message
    ld.close()


def test_block_resume_mid_epoch_is_byte_identical(server: str) -> None:
    kw: Dict[str, Any] = dict(shuffle="block", batch_size=3, world_size=2, rank=1, return_indices=True)
    with loader(server, "shards", **kw) as ld:
        full = collect(ld)
    with loader(server, "shards", **kw) as ld:
        it = iter(ld)
        next(it), next(it)
        state = ld.state_dict()
        it.close()
    assert state["shuffle"] == "block" and state["shuffle_window"] is None and state["epoch_world_size"] == 2
    with loader(server, "shards", **kw) as ld:
        ld.load_state_dict(state)
        assert_same_batches(collect(ld), full[2:])


def run_world(
    server: str, world: int, state: Optional[Dict[str, Any]], take: Optional[int]
) -> Tuple[List[int], Dict[str, Any]]:
    """Every rank of a world from ``state``, taking ``take`` batches each
    (all when None): the indices taken, and rank 0's state_dict."""
    got: List[int] = []
    states = []
    for rank in range(world):
        with loader(server, "shards", shuffle="block", batch_size=3, rank=rank, world_size=world,
                    return_indices=True) as ld:
            ld.set_epoch(3)
            if state is not None:
                ld.load_state_dict(state)
            it = iter(ld)
            batches = [next(it) for _ in range(take)] if take is not None else list(it)
            it.close()
            got += indices(batches)
            states.append(ld.state_dict())
    return got, states[0]


@pytest.mark.parametrize("worlds, takes", [([2, 3], [2]), ([2, 3, 2], [2, 2]), ([4, 3], [1])])
def test_block_elastic_resume_takes_every_sample_once(server: str, worlds: Sequence[int], takes: Sequence[int]) -> None:
    # 36 samples: what each world leaves divides by the next world size, so
    # there is no padding, and every sample comes exactly once over the
    # resumes, as long as they keep the epoch's first world size.
    state, seen = None, []
    for world, take in zip(worlds, list(takes) + [None]):
        got, state = run_world(server, world, state, take)
        if take is not None:
            assert state["epoch_world_size"] == worlds[0] and state["world_size"] == world
        seen += got
    assert Counter(seen) == Counter(range(N))
