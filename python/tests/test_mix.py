"""stoker.Mix: one job over several datasets, drawn by weight, against the
real server over conftest.py's ``tiny`` (48 samples, 3 classes) and
``eval`` (20 photos, 10 classes) ImageFolders."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

import stoker
from helpers import SMALL

MIX = stoker.Mix({"tiny": 0.7, "eval": 0.3}, samples=1000)


def mixed(server: str, **kw) -> stoker.Loader:
    kw.setdefault("batch_size", 50)
    kw.setdefault("pin_memory", False)
    kw.setdefault("timeout", 60)
    kw.setdefault("transform", SMALL)
    kw.setdefault("fields", ("__source__", "path"))
    return stoker.Loader(server, kw.pop("mix", MIX), **kw)


def draws(ld: stoker.Loader) -> list:
    """The epoch's (source, path) pairs, in order."""
    out = []
    for b in ld:
        out += list(zip(b.fields["__source__"], b.fields["path"]))
    return out


def test_mix_shares_and_sources(server: str) -> None:
    """An epoch of 1000 draws takes 700 from tiny and 300 from eval (the
    weights, exactly), interleaved in every batch; eval's 20 photos each
    15 times (a round a time, not one order repeated); each sample's
    source and label its own dataset's."""
    with mixed(server, seed=3) as ld:
        assert len(ld) == 20
        got = []
        for b in ld:
            src = b.fields["__source__"]
            assert 0 < src.count(b"eval") < len(src), "a batch drew from one dataset only"
            for s, p, label in zip(src, b.fields["path"], b.labels.tolist()):
                assert s in (b"tiny", b"eval")
                if s == b"tiny":
                    assert p.split(b"/")[0] in (b"ant", b"bee", b"cat") and 0 <= label < 3
                else:
                    assert 0 <= label < 10
            got += list(zip(src, b.fields["path"]))
    share = Counter(s for s, _ in got)
    assert share == {b"tiny": 700, b"eval": 300}, share
    assert abs(share[b"tiny"] / 1000 - 0.7) <= 0.01
    per_photo = Counter(p for s, p in got if s == b"eval")
    assert len(per_photo) == 20 and set(per_photo.values()) == {15}, per_photo


def test_mix_share_within_one_percent_of_odd_weights(server: str) -> None:
    """Weights that do not divide the epoch: each dataset's count within
    one draw of its exact share, over an epoch of 10^4."""
    mix = stoker.Mix([("eval", 1.0), ("tiny", math.pi)], samples=10_000)
    with mixed(server, mix=mix, batch_size=500, fields=("__source__",), seed=1) as ld:
        share = Counter(s for b in ld for s in b.fields["__source__"])
    exact = 10_000 * math.pi / (1 + math.pi)
    assert abs(share[b"tiny"] - exact) <= 1 and sum(share.values()) == 10_000, share


def test_mix_deterministic_and_ranks_disjoint(server: str) -> None:
    """The same seed draws the same epoch; two ranks split it, together
    drawing what one rank does."""
    with mixed(server, seed=5) as ld:
        one = draws(ld)
    with mixed(server, seed=5) as ld:
        assert draws(ld) == one
    with mixed(server, seed=6) as ld:
        assert draws(ld) != one
    ranks = []
    for r in range(2):
        with mixed(server, seed=5, rank=r, world_size=2) as ld:
            ranks.append(draws(ld))
    assert Counter(ranks[0] + ranks[1]) == Counter(one)


def test_mix_resume_byte_identical(server: str) -> None:
    """A resumed epoch of a mix gets the batches the uninterrupted one has
    after the saved point, pixels and fields."""
    with mixed(server, seed=9) as ld:
        ld.set_epoch(1)
        full = [(b.images.clone(), b.fields) for b in ld]
    with mixed(server, seed=9) as ld:
        ld.set_epoch(1)
        it = iter(ld)
        next(it), next(it), next(it)
        state = ld.state_dict()
        del it
    with mixed(server, seed=9) as ld:
        ld.load_state_dict(state)
        rest = [(b.images.clone(), b.fields) for b in ld]
    assert len(rest) == len(full) - 3
    for (img, f), (img2, f2) in zip(full[3:], rest):
        assert torch.equal(img, img2) and f == f2
    other = stoker.Mix({"tiny": 0.5, "eval": 0.5}, samples=1000)
    with mixed(server, mix=other, seed=9) as ld:
        with pytest.raises(ValueError, match="different job"):
            ld.load_state_dict(state)


def test_mix_refused(server: str) -> None:
    """Each mistake is refused, naming it: in Python at once, on the server
    at the first batch (INVALID_ARGUMENT)."""
    with mixed(server, mix=stoker.Mix({"tiny": 1, "laion": 1})) as ld:
        with pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and 'unknown dataset "laion"' in str(e.value)
    for weights, err in [({}, ValueError), ({"tiny": 0}, ValueError), ({"tiny": -1.0}, ValueError),
                         ({"tiny": float("nan")}, ValueError), ({"tiny": "1"}, TypeError), ({1: 1.0}, TypeError)]:
        with pytest.raises(err):
            stoker.Mix(weights)
    with pytest.raises(ValueError, match="shuffle=True"):
        mixed(server, shuffle=False)
    with mixed(server, shuffle="block") as ld:  # ImageFolders have no shards
        with pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and 'dataset "tiny" of the mix is not sharded' in str(e.value)
    with pytest.raises(ValueError, match="repeats"):
        mixed(server, repeats=2)


@pytest.mark.expect_warning(RuntimeWarning, match="could not be made")
def test_mix_block_shuffle(server: str) -> None:
    """Shard-level mixing: the block shuffle over a mix of two sharded
    datasets draws whole shards of both, each sample with its own
    dataset's source, and the same epoch for the same seed."""
    mix = stoker.Mix({"shards": 1.0, "clip": 1.0})
    kw = dict(shuffle="block", shuffle_window=2, batch_size=4, fields=("__source__", "__key__"), seed=2)
    with mixed(server, mix=mix, **kw) as ld:
        first = [(s, k) for b in ld for s, k in zip(b.fields["__source__"], b.fields["__key__"])]
    with mixed(server, mix=mix, **kw) as ld:
        again = [(s, k) for b in ld for s, k in zip(b.fields["__source__"], b.fields["__key__"])]
    assert first == again
    assert {s for s, _ in first} == {b"shards", b"clip"}
