"""Resume arithmetic and the Loader's state without a server: progress as
ready, state_dict contents, load_state_dict's checks, elastic consumed."""

from __future__ import annotations

import pickle

import pytest

import stoker
from stoker import transforms as T
from stoker._state import Progress, elastic_consumed, resume_from

TF = T.Compose([T.CenterCrop(8)])


def offline(**kw) -> stoker.Loader:
    return stoker.Loader("127.0.0.1:1", "tiny", transform=TF, batch_size=4, **kw)


def test_progress_prefix_and_taken() -> None:
    p = Progress()
    for k in (0, 2, 3, 5):
        p.take(k)
    assert p.prefix == 1 and p.taken_sorted() == [2, 3, 5]
    p.take(1)
    assert p.prefix == 4 and p.taken_sorted() == [5]
    p.take(2)  # already counted: ignored
    assert p.prefix == 4
    # A resume's start counts as taken; skips at the start join the prefix.
    p = Progress(3, [1, 3, 4, 6])
    assert p.prefix == 5 and p.taken_sorted() == [6]


def test_elastic_consumed() -> None:
    assert elastic_consumed(0, 3, 4, 2, None) == 24
    assert elastic_consumed(10, 3, 4, 2, 100) == 34
    assert elastic_consumed(10, 3, 4, 2, 30) == 30  # capped at the dataset's size
    assert elastic_consumed(0, 0, 4, 2, 30) == 0


def test_state_dict_records_the_resume_fields() -> None:
    ld = offline(world_size=4, rank=3, in_order=False)
    sd = ld.state_dict()
    assert sd["epoch"] == 0 and sd["batches_consumed"] == 0 and sd["taken"] == []
    assert sd["consumed"] == 0 and sd["world_size"] == 4 and sd["rank"] == 3 and sd["batch_size"] == 4
    assert sd["in_order"] is False and sd["dataset_size"] == 0 and sd["fingerprint"] == ""


def test_load_same_world_and_as_ready() -> None:
    saved = offline(in_order=False).state_dict()
    ld = offline(in_order=False)
    ld.load_state_dict({**saved, "epoch": 5, "batches_consumed": 3, "taken": [7, 4, 2, 9]})
    assert ld.epoch == 5 and ld.batches_consumed == 3 and ld.consumed == 0
    assert ld._resume.start_batch == 3 and ld._resume.skip_batches == (4, 7, 9)  # 2 < 3: dropped
    # The pending resume is what state_dict says until it runs.
    again = ld.state_dict()
    assert again["batches_consumed"] == 3 and again["taken"] == [4, 7, 9]
    # set_epoch to another epoch drops it.
    ld.set_epoch(6)
    assert ld._resume is None and ld.batches_consumed == 0 and ld.state_dict()["taken"] == []


def test_load_another_world_size() -> None:
    saved = {**offline(world_size=2, rank=1).state_dict(), "epoch": 2, "batches_consumed": 3, "consumed": 5,
             "taken": [5, 6], "in_order": False}
    ld = offline(world_size=3, rank=2)
    ld.load_state_dict(saved)
    # 5 + 3 batches * 4 samples * 2 ranks; the batches past the prefix do not count.
    assert ld.epoch == 2 and ld.consumed == 29 and ld.batches_consumed == 0
    assert ld._resume.start_batch == 0 and ld._resume.skip_batches == ()
    sd = ld.state_dict()
    assert sd["consumed"] == 29 and sd["world_size"] == 3 and sd["rank"] == 2
    # Capped by the saved dataset size.
    ld.load_state_dict({**saved, "dataset_size": 20})
    assert ld.consumed == 20


def test_load_checks_the_job() -> None:
    saved = offline().state_dict()
    for kw, name in (({"seed": 1}, "seed"), ({"shuffle": False}, "shuffle"), ({"drop_last": True}, "drop_last"),
                     ({"layout": "NHWC"}, "layout"), ({"shuffle": "block"}, "shuffle")):
        with pytest.raises(ValueError, match=name):
            offline(**kw).load_state_dict(saved)
    block = offline(shuffle="block", shuffle_window=2).state_dict()
    with pytest.raises(ValueError, match="shuffle_window: saved 2, now 3"):
        offline(shuffle="block", shuffle_window=3).load_state_dict(block)
    with pytest.raises(ValueError, match="transform"):
        stoker.Loader("127.0.0.1:1", "tiny", batch_size=4).load_state_dict(saved)
    with pytest.raises(ValueError, match="own state_dict"):
        offline(rank=1, world_size=2).load_state_dict({**saved, "world_size": 2, "in_order": False})
    # In order, any rank's state resumes every rank of the same world.
    ld = offline(rank=1, world_size=2)
    ld.load_state_dict({**saved, "world_size": 2, "batches_consumed": 2})
    assert ld.batches_consumed == 2 and ld.rank == 1


def test_elastic_resumes_keep_the_epochs_first_world_size() -> None:
    # The block shuffle splits an epoch's order into spans by the world size
    # it began with: the resumes of the epoch keep it, and a resume with
    # nothing consumed starts the split afresh.
    first = {**offline(world_size=2, shuffle="block").state_dict(), "epoch": 1, "batches_consumed": 2}
    assert first["epoch_world_size"] == 2
    ld = offline(world_size=3, shuffle="block")
    ld.load_state_dict(first)
    assert ld.consumed == 16 and ld._resume.epoch_world_size == 2
    assert ld._job().open_job(1, ld._resume, 4, False).epoch_world_size == 2
    second = {**ld.state_dict(), "batches_consumed": 1}
    assert second["epoch_world_size"] == 2 and second["world_size"] == 3
    ld = offline(world_size=4, shuffle="block")
    ld.load_state_dict(second)
    assert ld.consumed == 16 + 12 and ld._resume.epoch_world_size == 2
    # Same world size, mid-epoch: kept too.
    ld = offline(world_size=3, shuffle="block")
    ld.load_state_dict(second)
    assert ld._resume.start_batch == 1 and ld._resume.epoch_world_size == 2
    # Nothing consumed: the new world's split.
    ld = offline(world_size=3, shuffle="block")
    ld.load_state_dict({**first, "batches_consumed": 0})
    assert ld.consumed == 0 and ld._resume.epoch_world_size == 0
    assert ld.state_dict()["epoch_world_size"] == 3
    # set_epoch to another epoch: a fresh epoch.
    ld.load_state_dict(second)
    ld.set_epoch(5)
    assert ld.state_dict()["epoch_world_size"] == 3


def test_state_dict_of_the_old_format_loads() -> None:
    old = {"epoch": 1, "batches_consumed": 4, **offline()._job().params(), "fingerprint": "abc"}
    r = resume_from(old, offline()._job().params())
    assert (r.epoch, r.start_batch, r.skip_batches, r.consumed, r.fingerprint) == (1, 4, (), 0, "abc")


def test_pickle_and_context_manager_without_a_server() -> None:
    ld = offline(seed=3)
    ld.load_state_dict({**ld.state_dict(), "batches_consumed": 2})
    copy = pickle.loads(pickle.dumps(ld))
    assert copy.seed == 3 and copy.batches_consumed == 2 and copy._resume == ld._resume
    assert copy._session is not ld._session and copy._session.conn is None
    assert copy.stats is copy._tally.stats and copy.sample_errors is copy._tally.sample_errors
    with copy as c:
        assert c is copy
    ld.close()
