"""Repeated augmentation (Loader(repeats=K)): torchvision's RASampler and
DeiT's: every sample K times an epoch, each copy its own draw, the copies on
consecutive ranks, each rank's epoch floor(N // 256 * 256 / world) samples;
exactly once per copy across a resume on the same or another world size."""

from __future__ import annotations

from collections import Counter
from typing import Dict, List, Tuple

import pytest

import stoker
from helpers import loader
from stoker import transforms as T

#: A transform that draws (so that copies differ), cheap on 24 px images.
TF = T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip()])
N = 300  # the "many" dataset
PER_RANK = N // 256 * 256 // 3  # RASampler's, 3 ranks: 85


def _ra(server: str, rank: int, world: int, **kw) -> stoker.Loader:
    kw.setdefault("batch_size", 10)
    return loader(server, "many", transform=TF, repeats=3, rank=rank, world_size=world, return_indices=True,
                  trace=True, seed=8, **kw)


def _copies(batches) -> List[Tuple[int, str]]:
    """Each sample made: (dataset index, its trace), which tells copies
    apart (each copy its own draw)."""
    return [(int(i), repr(t)) for b in batches for i, t in zip(b.indices.tolist(), b.trace)]


def test_repeats_arguments() -> None:
    for bad, exc, fragment in [(0, ValueError, "repeats"), (65, ValueError, "repeats"), (True, TypeError, "repeats"),
                               (2.0, TypeError, "repeats")]:
        with pytest.raises(exc, match=fragment):
            stoker.Loader("127.0.0.1:1", "many", repeats=bad)
    with pytest.raises(ValueError, match="block shuffle"):
        stoker.Loader("127.0.0.1:1", "many", repeats=3, shuffle="block")


def test_repeats_small_dataset_refused(server: str) -> None:
    with pytest.raises(stoker.StokerError) as e:
        next(iter(loader(server, "tiny", repeats=3)))
    assert e.value.code == "INVALID_ARGUMENT" and "RASampler's epoch" in str(e.value)


def test_repeats_over_ranks(server: str) -> None:
    """Each rank gets RASampler's share; each sample made is made 3 times,
    on the 3 ranks, each copy its own draw."""
    made: Dict[int, List[Tuple[int, str]]] = {}
    for r in range(3):
        with _ra(server, r, 3) as ld:
            assert len(ld) == -(-PER_RANK // 10)
            made[r] = _copies(ld)
            assert len(made[r]) == PER_RANK
    per_index: Dict[int, List[Tuple[int, str]]] = {}
    for r, items in made.items():
        for i, tr in items:
            per_index.setdefault(i, []).append((r, tr))
    assert len(per_index) == 3 * PER_RANK // 3
    for i, copies in per_index.items():
        assert sorted(r for r, _ in copies) == [0, 1, 2], f"sample {i}'s copies on ranks {copies}"
        assert len({tr for _, tr in copies}) == 3, f"sample {i}'s copies drew alike"


def test_repeats_resume_same_and_other_world(server: str) -> None:
    """A state_dict taken mid-epoch resumes it: on the same world size the
    batches an uninterrupted run has; on another (3 ranks, then 2) every
    copy of the epoch is made, none twice but the new world's wrap-around
    padding."""
    whole = [_copies(_ra(server, r, 3)) for r in range(3)]
    states, first = [], []
    for r in range(3):
        ld = _ra(server, r, 3)
        it = iter(ld)
        first.append(_copies([next(it) for _ in range(3)]))
        states.append(ld.state_dict())
        del it
        ld.close()
    # The same world: each rank's rest is the uninterrupted run's.
    for r in range(3):
        with _ra(server, r, 3) as ld:
            ld.load_state_dict(states[r])
            assert first[r] + _copies(ld) == whole[r]
    # Two ranks: the epoch's copies not yet made, split between them.
    rest = []
    for r in range(2):
        with _ra(server, r, 2) as ld:
            ld.load_state_dict(states[0])
            rest += _copies(ld)
    epoch = Counter(c for w in whole for c in w)
    got = Counter(c for f in first for c in f) + Counter(rest)
    assert set(got) == set(epoch), "copies lost or made that the epoch does not have"
    extra = sum(got.values()) - sum(epoch.values())
    assert all(v == 1 for v in epoch.values()) and 0 <= extra < 2, f"{extra} copies made twice"


def test_repeats_state_is_checked(server: str) -> None:
    with _ra(server, 0, 3) as ld:
        next(iter(ld))
        state = ld.state_dict()
    other = loader(server, "many", transform=TF, repeats=2, rank=0, world_size=3, seed=8, batch_size=10)
    with pytest.raises(ValueError, match="repeats"):
        other.load_state_dict(state)
