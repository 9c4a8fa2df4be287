"""The Python client against the real `stoker serve` (see conftest.py)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Dict

import grpc
import pytest
import torch

import stoker
from stoker import transforms as T
from stoker._ops_base import named_op
from stoker.v1 import stoker_pb2 as pb
from stoker.v1.stoker_pb2_grpc import FeedServiceStub

from helpers import TINY_N, assert_same_batches, collect, loader


# 1. The epoch plan: every index exactly once across ranks.


def test_ranks_partition_the_epoch(server: str) -> None:
    per_rank = []
    for rank in range(2):
        ld = loader(server, rank=rank, world_size=2, return_indices=True, seed=3)
        batches = collect(ld)
        assert len(batches) == len(ld) == 5  # 24 samples per rank in batches of 5
        assert [b[0].shape[0] for b in batches] == [5, 5, 5, 5, 4]
        for images, labels, indices in batches:
            assert images.dtype == torch.uint8 and tuple(images.shape[1:]) == (3, 224, 224)
            assert labels.dtype == torch.int64 and indices.dtype == torch.int64
            # ImageFolder labels: 16 files per class, in index order.
            assert torch.equal(labels, indices // 16)
        per_rank.append(torch.cat([b[2] for b in batches]).tolist())
    assert len(per_rank[0]) == len(per_rank[1]) == TINY_N // 2
    assert sorted(per_rank[0] + per_rank[1]) == list(range(TINY_N))


def test_drop_last_and_len(server: str) -> None:
    ld = loader(server, batch_size=10, drop_last=True, shuffle=False)
    assert len(ld) == 4
    sizes = [b[0].shape[0] for b in ld]
    assert sizes == [10, 10, 10, 10]
    ld = loader(server, batch_size=10)
    assert len(ld) == 5
    assert [b[0].shape[0] for b in ld][-1] == 8


# 2. Determinism.


def test_same_seed_same_bytes_and_epochs_differ(server: str) -> None:
    a = collect(loader(server, seed=11, return_indices=True))
    b = collect(loader(server, seed=11, return_indices=True))
    assert_same_batches(a, b)

    ld = loader(server, seed=11, return_indices=True)
    ld.set_epoch(1)
    c = collect(ld)
    order = lambda bs: torch.cat([x[2] for x in bs]).tolist()  # noqa: E731
    assert order(c) != order(a)
    assert sorted(order(c)) == sorted(order(a)) == list(range(TINY_N))

    d = collect(loader(server, seed=12, return_indices=True))
    assert order(d) != order(a)


def test_epoch_advances_after_a_full_epoch(server: str) -> None:
    ld = loader(server, seed=5, return_indices=True)
    first = collect(ld)
    assert ld.epoch == 1 and ld.batches_consumed == 0
    second = collect(ld)
    ref = loader(server, seed=5, return_indices=True)
    ref.set_epoch(1)
    assert_same_batches(second, collect(ref))
    assert torch.cat([x[2] for x in first]).tolist() != torch.cat([x[2] for x in second]).tolist()


def test_unshuffled_order_is_the_index_order(server: str) -> None:
    batches = collect(loader(server, shuffle=False, return_indices=True))
    assert torch.cat([b[2] for b in batches]).tolist() == list(range(TINY_N))


def test_nhwc_is_nchw_permuted(server: str) -> None:
    nchw = collect(loader(server, seed=2))
    nhwc = collect(loader(server, seed=2, layout="NHWC"))
    assert nhwc[0][0].shape[1:] == (224, 224, 3)
    for (x, lx), (y, ly) in zip(nchw, nhwc):
        assert torch.equal(x.permute(0, 2, 3, 1), y)
        assert torch.equal(lx, ly)


def test_as_ready_delivers_every_batch(server: str) -> None:
    ordered = collect(loader(server, seed=4, return_indices=True))
    ld = loader(server, seed=4, return_indices=True, in_order=False)
    as_ready = collect(ld)
    key = lambda b: b[2].tolist()  # noqa: E731
    assert sorted(map(key, as_ready)) == sorted(map(key, ordered))
    by_key = {tuple(key(b)): b for b in ordered}
    for b in as_ready:
        assert torch.equal(b[0], by_key[tuple(key(b))][0])


# 3. imagenet-eval against torchvision.


def test_list_datasets_gives_plain_objects(server: str, data_dirs: Dict[str, Path]) -> None:
    import dataclasses
    import json

    from google.protobuf.message import Message

    infos = stoker.list_datasets(server)
    assert sorted(d.name for d in infos) == sorted(data_dirs)
    tiny = {d.name: d for d in infos}["tiny"]
    assert isinstance(tiny, stoker.DatasetInfo) and not isinstance(tiny, Message)
    assert (tiny.size, tiny.classes, tiny.format) == (TINY_N, ["ant", "bee", "cat"], "imagefolder")
    assert type(tiny.size) is int and len(tiny.fingerprint) > 0
    assert json.loads(json.dumps(dataclasses.asdict(tiny)))["classes"] == ["ant", "bee", "cat"]
    with loader(server) as ld:
        collect(ld)
        assert ld.job_info.fingerprint == tiny.fingerprint


def test_imagenet_eval_matches_torchvision(server: str, data_dirs: Dict[str, Path]) -> None:
    import torchvision
    from torchvision import transforms as tvt

    ref = torchvision.datasets.ImageFolder(str(data_dirs["eval"]))
    info = {d.name: d for d in stoker.list_datasets(server)}["eval"]
    assert list(info.classes) == ref.classes
    assert info.size == len(ref.samples)

    ld = loader(server, "eval", transform="imagenet-eval", shuffle=False, batch_size=8, return_indices=True)
    tv = tvt.Compose([tvt.Resize(256), tvt.CenterCrop(224), tvt.PILToTensor()])
    seen, mads = [], []
    for images, labels, indices in ld:
        for img, label, idx in zip(images, labels.tolist(), indices.tolist()):
            path, target = ref.samples[idx]
            assert label == target
            want = tv(ref.loader(path))
            mad = (img.float() - want.float()).abs().mean().item()
            assert mad <= 2.0, f"{path}: mean absolute difference {mad:.2f} levels"
            seen.append(idx)
            mads.append(mad)
    assert seen == list(range(len(ref.samples)))
    # stoker decodes chroma as libjpeg does by default ("fancy" upsampling),
    # as PIL does: measured at most 0.014 levels on the 200 val photos. With
    # pixel replication instead it was up to 2.4, over the 2-level bound.
    assert sum(mads) / len(mads) <= 0.1, f"mean over images {sum(mads) / len(mads):.3f} levels"
    assert list(ld.job_info.classes) == ref.classes


# 4. Errors.


def test_errors_are_stoker_errors(server: str) -> None:
    with pytest.raises(stoker.StokerError) as e:
        next(iter(loader(server, "no-such-dataset")))
    assert e.value.code == "NOT_FOUND"
    assert "no-such-dataset" in e.value.message
    assert isinstance(e.value, RuntimeError)

    with pytest.raises(stoker.StokerError) as e:
        len(loader(server, "no-such-dataset"))
    assert e.value.code == "NOT_FOUND"

    bad = T.Compose([T.Resize(256)])  # the output size would vary per image
    with pytest.raises(stoker.StokerError) as e:
        next(iter(loader(server, transform=bad)))
    assert e.value.code == "INVALID_ARGUMENT", e.value
    with pytest.raises(stoker.StokerError) as e:
        next(iter(loader(server, transform="no-such-preset")))
    assert e.value.code == "INVALID_ARGUMENT" and "no-such-preset" in e.value.message

    # Still serving.
    assert len(collect(loader(server))) == 10


def test_unreachable_server() -> None:
    with pytest.raises(stoker.StokerError) as e:
        next(iter(stoker.Loader("127.0.0.1:1", "tiny", timeout=30, pin_memory=False)))
    assert e.value.code == "UNAVAILABLE"
    assert "is `stoker serve` running at 127.0.0.1:1?" in e.value.message, e.value.message


# 5. Buffers and iterations (resume: test_resume.py; the stream: test_stream.py).


def test_tensors_stay_valid_after_later_batches(server: str) -> None:
    kept = list(loader(server, seed=6, prefetch=2))  # no copies
    cloned = collect(loader(server, seed=6, prefetch=2))
    assert_same_batches(kept, cloned)


def test_break_and_iterate_again(server: str) -> None:
    ld = loader(server, seed=8)
    for i, _ in enumerate(ld):
        if i == 1:
            break
    assert ld.epoch == 0 and ld.batches_consumed == 2
    ref = loader(server, seed=8)
    ref.set_epoch(1)
    assert_same_batches(collect(ld), collect(ref))  # the next epoch, whole


# 6. DataLoader.


def test_torch_dataloader(server: str) -> None:
    ds = stoker.Dataset(server, "tiny", batch_size=5, seed=1, pin_memory=False, timeout=60, return_indices=True)
    dl = torch.utils.data.DataLoader(ds, batch_size=None)
    assert len(dl) == 10
    got = collect(dl)
    assert_same_batches(got, collect(loader(server, seed=1, return_indices=True)))


def test_torch_dataloader_in_a_worker_process(server: str) -> None:
    # The loader is pickled into the worker and makes its channel there.
    # spawn, not fork: gRPC is not fork-safe, and this process has used it
    # (the tests before), so a forked worker's first channel could deadlock
    # in gRPC's core (seen in about 1 run in 50; pytest then hung).
    ds = stoker.Dataset(server, "tiny", batch_size=8, seed=1, pin_memory=False, timeout=60)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context="spawn", timeout=60)
    got = collect(dl)
    assert_same_batches(got, collect(loader(server, batch_size=8, seed=1)))
    it = iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    try:
        with pytest.raises(RuntimeError, match="num_workers"):
            next(it)
    finally:
        # Stop the workers now. Left to the garbage collector (the exception's
        # traceback holds the iterator in a cycle), torch's shutdown waited
        # 5 s per worker, in whichever test ran next.
        it._shutdown_workers()


def _iterate_in_child(ds: "stoker.Dataset", q: "multiprocessing.Queue") -> None:
    try:
        next(iter(ds))
        q.put("no error")
    except RuntimeError as e:
        q.put(str(e))


def test_forked_after_grpc_use_refuses_clearly(server: str) -> None:
    # A child forked after this process used gRPC must not touch gRPC (it can
    # deadlock): it raises a clear error before making a channel.
    import multiprocessing

    ds = stoker.Dataset(server, "tiny", batch_size=8, pin_memory=False)
    assert len(ds) > 0  # this process uses gRPC
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_iterate_in_child, args=(ds, q))
    p.start()
    try:
        msg = q.get(timeout=60)
    finally:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    assert "forked after its parent" in msg and "spawn" in msg


# 7. Undecodable samples.


def test_corrupt_file_is_reported_and_batch_keeps_its_size(server: str) -> None:
    ld = loader(server, "broken", batch_size=4, shuffle=False, return_indices=True)
    with pytest.warns(RuntimeWarning, match="zz_corrupt.jpg") as w:
        batches = collect(ld)
    msg = str(w[0].message)
    assert "1 of batch 2's samples could not be made" in msg, msg
    assert "the 'pad' policy filled its slot with copies of good samples of the same batch" in msg, msg
    assert [b[0].shape[0] for b in batches] == [4, 4, 3]
    assert len(ld.sample_errors) == 1
    err = ld.sample_errors[0]
    assert err.index == 10 and err.name == "b/zz_corrupt.jpg" and err.reason
    index, name, reason = err  # a plain tuple too
    # The bad slot was padded with a good sample of the same batch.
    last = batches[-1]
    assert 10 not in last[2].tolist()
    assert ld.stats.sample_errors == 1

    # The warning is shown once per loader.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collect(ld)
    assert len(ld.sample_errors) == 1 and ld.stats.sample_errors == 2
    assert ld.stats.short_batches == 0


def test_drop_makes_a_counted_smaller_batch(server: str) -> None:
    ld = loader(server, "broken", batch_size=4, shuffle=False, fail_policy="drop")
    with pytest.warns(RuntimeWarning) as w:
        batches = collect(ld)
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    msg = str(w[0].message)
    assert "the 'drop' policy left it out: the batch has 2 samples, not 3" in msg, msg
    assert ld.stats.short_batches == 1 and ld.stats.sample_errors == 1


@pytest.mark.parametrize("policy", ["pad", "drop"])
def test_all_bad_folder_raises_not_empty_batches(server: str, policy: str) -> None:
    # 20 text files named .jpg: never a batch of 0 samples, but an error
    # saying every sample failed and why.
    ld = loader(server, "allbad", batch_size=8, fail_policy=policy)
    got = []
    with pytest.raises(stoker.StokerError) as e:
        for images, labels in ld:
            got.append(images.shape)
    assert got == []
    assert e.value.code == "DATA_LOSS", e.value
    assert "every sample of batch 0 of epoch 0 failed (8 of 8)" in e.value.message, e.value
    assert "not decodable (corrupt): 8 samples" in e.value.message, e.value


def test_max_sample_errors(server: str) -> None:
    ld = loader(server, "broken", batch_size=4, shuffle=False, max_sample_errors=0)
    with pytest.raises(stoker.StokerError) as e:
        collect(ld)
    assert e.value.code == "DATA_LOSS", e.value
    assert "1 of epoch 0's 11 samples failed, more than the job's max_sample_errors (0)" in e.value.message
    assert "not decodable (corrupt): 1 sample (e.g. sample 10, b/zz_corrupt.jpg" in e.value.message
    # A fraction: 1 of 11 is under a half.
    with pytest.warns(RuntimeWarning):
        assert len(collect(loader(server, "broken", batch_size=4, max_sample_errors=0.5))) == 3
    with pytest.raises(ValueError, match="fraction of the epoch's samples, 0..1"):
        loader(server, "broken", max_sample_errors=1.5)
    with pytest.raises(TypeError, match="max_sample_errors must be"):
        loader(server, "broken", max_sample_errors=True)


# 8. normalize().


def test_normalize_matches_torchvision(server: str) -> None:
    from torchvision import transforms as tvt

    mean, std = T.IMAGENET_MEAN, T.IMAGENET_STD
    images, _ = next(iter(loader(server, seed=1)))
    got = stoker.normalize(images, mean, std)
    want = tvt.Normalize(mean, std)(images.float() / 255)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert images.dtype == torch.uint8  # input untouched

    nhwc = stoker.normalize(images.permute(0, 2, 3, 1).contiguous(), mean, std, layout="NHWC")
    torch.testing.assert_close(nhwc.permute(0, 3, 1, 2), want, atol=1e-5, rtol=1e-5)
    one = stoker.normalize(images[0], mean, std)
    torch.testing.assert_close(one, want[0], atol=1e-5, rtol=1e-5)


def test_server_normalize_gives_float32(server: str) -> None:
    mean, std = T.IMAGENET_MEAN, T.IMAGENET_STD
    ops = [T.RandomResizedCrop(96), T.RandomHorizontalFlip()]
    u8 = collect(loader(server, seed=2, transform=T.Compose(ops)))
    f32 = collect(loader(server, seed=2, transform=T.Compose(ops + [T.Normalize(mean, std)])))
    for (a, _), (b, _) in zip(u8, f32):
        assert b.dtype == torch.float32 and b.shape == a.shape
        assert torch.equal(b, stoker.normalize(a, mean, std))  # the server's arithmetic, float for float


@pytest.mark.parametrize("std", [0.0, -0.2, math.nan, math.inf, 1e-300, 5e-324])
def test_normalize_refuses_what_the_server_refuses(server: str, std: float) -> None:
    """A std that makes every output inf or NaN is refused by stoker.normalize
    and by transforms.Normalize (ValueError), as the server refuses it
    (INVALID_ARGUMENT), never turned into a batch of inf."""
    stds = (0.229, std, 0.225)
    images = torch.zeros(2, 3, 4, 4, dtype=torch.uint8)
    with pytest.raises(ValueError, match="std"):
        stoker.normalize(images, T.IMAGENET_MEAN, stds)
    with pytest.raises(ValueError, match="std"):
        T.Normalize(T.IMAGENET_MEAN, stds)
    op = named_op("Normalize", mean=T.IMAGENET_MEAN, std=stds)  # as a client that skips the class's checks
    spec = pb.JobSpec(dataset="tiny", batch_size=4, transform=pb.TransformSpec(ops=[T.RandomResizedCrop(32).to_proto(), op]))
    with grpc.insecure_channel(server) as ch:
        with pytest.raises(grpc.RpcError) as e:
            FeedServiceStub(ch).DescribeJob(pb.DescribeJobRequest(job=spec), timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "std" in e.value.details()
    # The smallest std both take: every output finite.
    ok = stoker.normalize(torch.full((1, 3, 2, 2), 255, dtype=torch.uint8), (0.0, 0.0, 0.0), (1e-36, 1e-36, 1e-36))
    assert torch.isfinite(ok).all()


def test_custom_ops_and_stats(server: str) -> None:
    tf = T.Compose([T.Resize((64, 48)), T.RandomHorizontalFlip(1.0), T.ColorJitter(0.3, 0.3, 0.3)])
    ld = loader(server, transform=tf)
    batches = collect(ld)
    assert batches[0][0].shape == (5, 3, 64, 48)
    st = ld.stats
    assert st.batches == 10 and st.samples == TINY_N
    assert st.bytes == TINY_N * 3 * 64 * 48
    assert st.wait_seconds > 0
    assert list(ld.job_info.sample_shape) == [3, 64, 48]


def test_reused_buffers_never_change_kept_batches(server: str) -> None:
    # Keep every third batch, let the others go: their buffers are reused,
    # the kept ones must not change.
    ref = collect(loader(server, seed=13, prefetch=2, batch_size=3))
    kept = {}
    for epoch_pass in range(2):
        ld = loader(server, seed=13, prefetch=2, batch_size=3)
        for i, (images, labels) in enumerate(ld):
            if i % 3 == epoch_pass:
                kept[i] = (images, labels)
    for i, (images, labels) in kept.items():
        assert torch.equal(images, ref[i][0]) and torch.equal(labels, ref[i][1])
