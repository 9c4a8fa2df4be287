"""batch_tokens: batches cut by vision tokens, through a real `stoker serve`
and the client: each rank's batch at most batch_tokens tokens of the
Qwen2-VL processor ((h / 28) * (w / 28) an image after smart_resize), every
sample once an epoch across the ranks, the same batches for the same seed,
len(loader) the batches the rank gets; a transform without vision tokens
refused, saying why."""

from __future__ import annotations

from typing import List, Tuple

import pytest

import stoker
from helpers import loader
from test_vlm_qwen import bad_data, vlm_data, vlm_server  # noqa: F401 (fixtures: the committed photos and extremes)

BUDGET = 256


def transform():
    """A small budget (4 to 64 tokens an image): the extremes' resized
    images within a bound of 448 x 2240 (the batch's memory is its
    samples' bound)."""
    from transformers import Qwen2VLImageProcessor

    return stoker.transforms.from_hf(Qwen2VLImageProcessor(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 64))


def epoch(server: str, rank: int, world: int, seed: int = 5) -> Tuple[int, List[Tuple[List[int], int]]]:
    """len(loader) and each batch's (indices, tokens) of epoch 0."""
    with stoker.Loader(server, "vlm", transform=transform(), max_size=(448, 2240), batch_tokens=BUDGET, rank=rank, world_size=world,
                       seed=seed, return_indices=True, pin_memory=False, timeout=120) as ld:
        n = len(ld)
        out = []
        for b in ld:
            tokens = int(((b.sizes[:, 0] // 28) * (b.sizes[:, 1] // 28)).sum())
            out.append(([int(i) for i in b.indices], tokens))
            assert isinstance(b.images, list) and len(b.images) == len(b.indices)
        assert not list(ld.sample_errors)
    return n, out


def test_batches_cut_by_vision_tokens(vlm_server: str, vlm_data) -> None:  # noqa: F811
    server = vlm_server
    n, batches = epoch(server, 0, 1)
    assert n == len(batches) > 1
    seen = [i for idx, _ in batches for i in idx]
    size = len(list((vlm_data / "images").iterdir()))
    assert sorted(seen) == list(range(size))  # every sample once
    assert all(0 < t <= BUDGET for _, t in batches), batches
    assert len({len(idx) for idx, _ in batches}) > 1, "batches of one count: not cut by tokens"
    assert epoch(server, 0, 1) == (n, batches)  # the same seed, the same batches
    # Two ranks: together every sample once, each step's tokens balanced.
    r0, r1 = epoch(server, 0, 2)[1], epoch(server, 1, 2)[1]
    assert len(r0) == len(r1)
    both = [i for idx, _ in r0 + r1 for i in idx]
    assert sorted(both) == sorted(seen)
    steps = [abs(a - b) / max(a, b) for (_, a), (_, b) in zip(r0, r1)]
    assert sum(steps) / len(steps) < 0.5, (r0, r1)  # the ranks' tokens a step near each other


def test_batch_tokens_refused_without_vision_tokens(server: str) -> None:
    ld = loader(server, "tiny", batch_tokens=16384)
    assert ld._job().spec().batch_tokens == 16384
    with pytest.raises(stoker.StokerError) as e:
        next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and "SmartResize, NaFlexResize, TileResize or AnyResResize" in e.value.message, e.value
    ld.close()
    # Without it the job is the batch_size job it always was.
    plain = loader(server, "tiny")
    assert plain._job().spec().batch_tokens == 0 and len(plain) > 0
    plain.close()


def take(server: str, rank: int, world: int, steps: int, state=None) -> Tuple[List[int], dict]:
    """The indices of the first ``steps`` batches (all of them when None)
    of rank of world, after loading ``state``, and its state_dict then."""
    with stoker.Loader(server, "vlm", transform=transform(), max_size=(448, 2240), batch_tokens=BUDGET, rank=rank, world_size=world,
                       seed=5, return_indices=True, pin_memory=False, timeout=120) as ld:
        if state is not None:
            ld.load_state_dict(state)
        n, got = len(ld), []
        for k, b in enumerate(ld):
            got += [int(i) for i in b.indices]
            if steps is not None and k + 1 == steps:
                break
        else:
            assert steps is None or n == steps, (n, steps)
        return got, ld.state_dict()


def test_batch_tokens_elastic_resume(vlm_server: str, vlm_data) -> None:  # noqa: F811
    """An epoch cut by vision tokens begun on 2 ranks, resumed after 2 steps
    on 3, then after 1 more step on 1: every sample exactly once over the
    three worlds (the server packs what the resumes left)."""
    server = vlm_server
    size = len(list((vlm_data / "images").iterdir()))
    seen: List[int] = []
    states = []
    for rank in range(2):
        got, st = take(server, rank, 2, 2)
        seen += got
        states.append(st)
    assert states[0]["token_resumes"] == [] and states[0]["batches_consumed"] == 2
    mid = []
    for rank in range(3):
        got, st = take(server, rank, 3, 1, states[0])
        seen += got
        mid.append(st)
    assert mid[0]["token_resumes"] == [2, 2], mid[0]
    got, end = take(server, 0, 1, None, mid[0])
    seen += got
    assert sorted(seen) == list(range(size)), (len(seen), size)  # every sample once
    # A resume of no ranks is refused, saying why.
    bad = dict(mid[0], token_resumes=[2, 2, 0, 1])
    with pytest.raises(stoker.StokerError, match="token_resumes"):
        take(server, 0, 1, None, bad)
