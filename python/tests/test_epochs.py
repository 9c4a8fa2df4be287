"""Epochs as every training loop sees them (against the real server): an
epoch ends once the trainer took len(loader) batches, whether or not it
asks for more; an iteration left early is over too; set_epoch and
load_state_dict say otherwise; the stream and its credits carry on."""

from __future__ import annotations

import logging
import time
import warnings

import pytest
import torch

import stoker
from stoker._stream import _FeedStream

from helpers import TINY_N, assert_same_batches, collect, indices, loader


def epoch_ref(server: str, epoch: int, **kw):
    """Epoch ``epoch`` of a fresh loader, read to its end."""
    with loader(server, **kw) as ld:
        ld.set_epoch(epoch)
        return collect(ld)


def wait_for(cond, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def take(it, n: int):
    return [tuple(t.clone() for t in next(it)) for _ in range(n)]


def test_zip_range_len_runs_each_epoch_on_one_stream(server: str) -> None:
    # zip(range(n), loader) takes n batches and never asks for the EpochEnd.
    kw = dict(seed=41, return_indices=True, prefetch=2)
    refs = [epoch_ref(server, e, **kw) for e in range(3)]
    opened = _FeedStream.opened
    with loader(server, **kw) as ld:
        n = len(ld)
        got = []
        for epoch in range(3):
            batches = [tuple(t.clone() for t in b) for _, b in zip(range(n), ld)]
            assert ld.epoch == epoch + 1 and ld.batches_consumed == 0
            got.append(batches)
        assert _FeedStream.opened - opened == 1  # one stream, its EpochEnds skipped
    for epoch in range(3):
        assert_same_batches(got[epoch], refs[epoch])
        assert sorted(indices(got[epoch])) == list(range(TINY_N))
    assert indices(got[0])[:5] != indices(got[1])[:5] != indices(got[2])[:5]


def test_state_dict_after_the_last_batch_names_the_next_epoch(server: str) -> None:
    kw = dict(seed=42, return_indices=True)
    with loader(server, **kw) as ld:
        ld.set_epoch(3)
        it = iter(ld)
        n = len(ld)
        take(it, n - 1)
        assert ld.state_dict()["epoch"] == 3 and ld.state_dict()["batches_consumed"] == n - 1
        take(it, 1)  # the last batch, held: the epoch is over for the loader
        state = ld.state_dict()
        assert state["epoch"] == 4 and state["batches_consumed"] == 0 and state["taken"] == []
        assert ld.epoch == 4
        # A trainer that asks for more gets StopIteration, and the stream
        # goes on into epoch 4 as before.
        with pytest.raises(StopIteration):
            next(it)
        stream = ld._session.stream
        assert not stream.closed and stream.next_epoch == 4 and not stream.end_pending
        resumed = loader(server, **kw)
        resumed.load_state_dict(state)
        assert_same_batches(collect(resumed), collect(ld))  # both epoch 4
        assert ld._session.stream is stream


def test_the_credits_carry_over_an_unread_epoch_end(server: str) -> None:
    # prefetch=1: a credit lost at the skipped EpochEnd would leave the
    # server with none, and the next epoch would hang (timeout=60: a failure).
    kw = dict(seed=43, return_indices=True, prefetch=1)
    with loader(server, **kw) as ld:
        n = len(ld)
        it = iter(ld)
        take(it, n)
        stream = ld._session.stream
        assert stream.end_pending and stream.next_epoch == 1
        # Meanwhile the server goes on: EpochEnd, the next JobInfo, and as
        # many of the next epoch's batches as the trainer granted.
        assert wait_for(lambda: stream.out.qsize() >= 3)
        second = collect(ld)
        assert ld._session.stream is stream
    assert_same_batches(second, epoch_ref(server, 1, **kw))


def test_an_iterator_left_at_len_and_a_new_one(server: str) -> None:
    kw = dict(seed=44, return_indices=True)
    ref1 = epoch_ref(server, 1, **kw)
    with loader(server, **kw) as ld:
        n = len(ld)
        old = iter(ld)
        take(old, n)
        new = iter(ld)
        got = take(new, 2)
        # The old iterator, asked again once the new one took its stream
        # over, ends without touching it.
        with pytest.raises(StopIteration):
            next(old)
        got += [tuple(t.clone() for t in b) for b in new]
        assert_same_batches(got, ref1)
        del old
        assert ld.epoch == 2 and not ld._session.stream.closed


@pytest.mark.parametrize("in_order", [True, False])
def test_break_runs_the_next_epoch_and_load_state_dict_resumes(server: str, in_order: bool) -> None:
    kw = dict(seed=45, return_indices=True, in_order=in_order)
    ref0, ref1 = (epoch_ref(server, e, **kw) for e in (0, 1))
    key = sorted if not in_order else list
    with loader(server, **kw) as ld:
        it = iter(ld)
        head = take(it, 4)
        state = ld.state_dict()
        it.close()  # broken off
        assert state["epoch"] == 0 and state["batches_consumed"] + len(state["taken"]) == 4
        # Iterating again: the next epoch, whole.
        assert key(indices(collect(ld))) == key(indices(ref1))
        assert ld.epoch == 2
        # load_state_dict: the saved epoch's remaining batches.
        ld.load_state_dict(state)
        rest = collect(ld)
        assert sorted(indices(head + rest)) == sorted(indices(ref0))
        assert ld.epoch == 1


def test_set_epoch_between_iter_and_the_first_batch_counts(server: str) -> None:
    # Lightning calls iter() on the train loader, then sets the epoch.
    kw = dict(seed=46, return_indices=True)
    with loader(server, **kw) as ld:
        it = iter(ld)
        ld.sampler.set_epoch(5)  # what Lightning's _set_sampler_epoch finds
        assert ld.sampler.epoch == 5
        got = [tuple(t.clone() for t in b) for b in it]
    assert_same_batches(got, epoch_ref(server, 5, **kw))


def test_a_resume_survives_set_epoch_of_its_epoch(server: str) -> None:
    # Lightning restores the loader's state, then sets the same epoch.
    kw = dict(seed=47, return_indices=True)
    ref2 = epoch_ref(server, 2, **kw)
    with loader(server, **kw) as ld:
        ld.set_epoch(2)
        it = iter(ld)
        take(it, 3)
        state = ld.state_dict()
    with loader(server, **kw) as ld:
        ld.load_state_dict(state)
        it = iter(ld)
        ld.set_epoch(2)
        assert_same_batches([tuple(t.clone() for t in b) for b in it], ref2[3:])
    with loader(server, **kw) as ld:  # set_epoch to another epoch drops it
        ld.load_state_dict(state)
        ld.set_epoch(1)
        assert_same_batches(collect(ld), epoch_ref(server, 1, **kw))


def test_an_iteration_that_fails_before_its_first_batch_keeps_the_epoch(server: str) -> None:
    # Nothing was taken: the next iteration runs the same epoch (and resume).
    with loader(server, seed=48, return_indices=True) as ld:
        ld.set_epoch(2)
        it = iter(ld)
        with pytest.raises(ValueError):
            it.throw(ValueError("before the first batch"))
        assert ld.epoch == 2
        assert_same_batches(collect(ld), epoch_ref(server, 2, seed=48, return_indices=True))


def test_torch_dataloader_epochs_advance_at_len(server: str) -> None:
    ds = stoker.Dataset(server, "tiny", batch_size=5, seed=49, pin_memory=False, timeout=60, return_indices=True)
    dl = torch.utils.data.DataLoader(ds, batch_size=None)
    n = len(dl)
    got = [[b[2].clone() for _, b in zip(range(n), dl)] for _ in range(3)]
    firsts = [g[0].tolist() for g in got]
    assert firsts[0] != firsts[1] != firsts[2]
    for epoch in range(3):
        want = epoch_ref(server, epoch, seed=49, return_indices=True)
        assert torch.cat(got[epoch]).tolist() == indices(want)
    ds.close()


def test_pin_memory_without_an_accelerator_warns_and_goes_on(server: str) -> None:
    with loader(server, seed=50, pin_memory=True) as ld:
        if torch.cuda.is_available():  # a GPU host: pinned, and nothing to say
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                kept = list(ld)
            assert len(kept) == 10 and kept[0][0].is_pinned()
            return
        with pytest.warns(UserWarning, match="pin_memory=True, but no accelerator"):
            batches = collect(ld)
        assert len(batches) == 10 and not batches[0][0].is_pinned()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            collect(ld)  # warned once per loader


def test_rank_and_world_size_from_the_environment(server: str, monkeypatch, caplog) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with caplog.at_level(logging.INFO, logger="stoker"):
        ld = loader(server)
    assert (ld.rank, ld.world_size) == (1, 3)
    assert "rank 1 of world_size 3 (from the RANK and WORLD_SIZE environment variables (torchrun))" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="stoker"):
        given = loader(server, rank=0, world_size=1)
    assert (given.rank, given.world_size) == (0, 1)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(caplog.records) == 1 and len(warned) == 1
    assert "given; the RANK and WORLD_SIZE environment variables (torchrun) says rank 1 of 3" in caplog.text
    with caplog.at_level(logging.INFO, logger="stoker"):
        assert loader(server, world_size=2).rank == 1  # one given, the other found
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(ValueError, match="RANK='one'"):
        loader(server)
    monkeypatch.delenv("RANK")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="stoker"):
        ld = loader(server)
    assert (ld.rank, ld.world_size) == (0, 1) and "the default" in caplog.text


def test_rank_and_world_size_from_the_process_group(server: str, monkeypatch, caplog) -> None:
    import torch.distributed as dist

    monkeypatch.setenv("RANK", "5")  # the group wins over the environment
    monkeypatch.setenv("WORLD_SIZE", "9")
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        with caplog.at_level(logging.INFO, logger="stoker"):
            ld = loader(server)
        assert (ld.rank, ld.world_size) == (0, 1)
        assert "from the initialized torch.distributed group" in caplog.text
    finally:
        dist.destroy_process_group()
