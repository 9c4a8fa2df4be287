"""Loader arguments are type-checked and bounded when the loader is made
(no server: nothing here connects)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import stoker
from stoker import transforms as T

TARGET = "127.0.0.1:1"  # never connected to


def make(**kw) -> stoker.Loader:
    return stoker.Loader(TARGET, "tiny", **kw)


@pytest.mark.parametrize(
    "kw, exc",
    [
        # Integers are ints: never floats (8.5 is not silently 8), bools,
        # strings or None.
        ({"batch_size": 8.5}, TypeError),
        ({"batch_size": 8.0}, TypeError),
        ({"batch_size": True}, TypeError),
        ({"batch_size": np.bool_(True)}, TypeError),
        ({"batch_size": "8"}, TypeError),
        ({"batch_size": None}, TypeError),
        ({"batch_size": np.float32(8)}, TypeError),
        ({"batch_size": 0}, ValueError),
        ({"batch_size": -1}, ValueError),
        ({"batch_size": 65537}, ValueError),
        ({"prefetch": 0}, ValueError),
        ({"prefetch": 1025}, ValueError),
        ({"prefetch": 10**9}, ValueError),
        ({"prefetch": 2.0}, TypeError),
        ({"prefetch": False}, TypeError),
        ({"seed": -1}, ValueError),
        ({"seed": 2**64}, ValueError),
        ({"seed": 1.5}, TypeError),
        ({"seed": None}, TypeError),
        ({"rank": 2, "world_size": 2}, ValueError),
        ({"rank": -1, "world_size": 2}, ValueError),
        ({"world_size": 0}, ValueError),
        ({"world_size": 2**32}, ValueError),
        ({"rank": 0.0, "world_size": 2}, TypeError),
        ({"rank": 1, "world_size": 2.0}, TypeError),
        ({"rank": True, "world_size": 2}, TypeError),
        # Seconds: positive, finite, or None.
        ({"timeout": 0}, ValueError),
        ({"timeout": -5}, ValueError),
        ({"timeout": math.inf}, ValueError),
        ({"timeout": math.nan}, ValueError),
        ({"timeout": "30"}, TypeError),
        ({"timeout": True}, TypeError),
        # Flags are bools.
        ({"shuffle": 1}, TypeError),
        ({"shuffle": None}, TypeError),
        # shuffle's strings: "global" (True) and "block"; the block
        # shuffle's window, only with it.
        ({"shuffle": "no"}, ValueError),
        ({"shuffle": "py1b"}, ValueError),
        ({"shuffle": "Block"}, ValueError),
        ({"shuffle_window": 4}, ValueError),
        ({"shuffle": True, "shuffle_window": 4}, ValueError),
        ({"shuffle": "block", "shuffle_window": 0}, ValueError),
        ({"shuffle": "block", "shuffle_window": 1025}, ValueError),
        ({"shuffle": "block", "shuffle_window": 2.0}, TypeError),
        ({"shuffle": "block", "shuffle_window": True}, TypeError),
        ({"drop_last": 0}, TypeError),
        ({"return_indices": "yes"}, TypeError),
        ({"in_order": 1}, TypeError),
        ({"pin_memory": 1}, TypeError),
        ({"tune_malloc": "0"}, TypeError),
        # Strings are strings.
        ({"layout": 1}, TypeError),
        ({"layout": None}, TypeError),
        ({"layout": "CHW"}, ValueError),
        ({"fail_policy": 1}, TypeError),  # None is the server's default (pad, or drop for records of several images)
        ({"fail_policy": "skip"}, ValueError),
        # A CPU weight: a positive, finite number.
        ({"cpu_weight": 0}, ValueError),
        ({"cpu_weight": -2}, ValueError),
        ({"cpu_weight": math.inf}, ValueError),
        ({"cpu_weight": math.nan}, ValueError),
        ({"cpu_weight": "2"}, TypeError),
        ({"cpu_weight": True}, TypeError),
        # A vision-token budget: a positive int.
        ({"batch_tokens": 0}, ValueError),
        ({"batch_tokens": 16384.0}, TypeError),
        ({"batch_tokens": True}, TypeError),
        # A transform is a preset name or stoker.transforms ops.
        ({"transform": None}, TypeError),
        ({"transform": 42}, TypeError),
        ({"transform": {"resize": 8}}, TypeError),
    ],
)
def test_bad_arguments(kw, exc) -> None:
    with pytest.raises(exc) as e:
        make(**kw)
    if len(kw) == 1 and "transform" not in kw:
        assert next(iter(kw)) in str(e.value)  # the message names the argument
    # stoker.Dataset takes the same arguments, checked the same way.
    with pytest.raises(exc):
        stoker.Dataset(TARGET, "tiny", **kw)


@pytest.mark.parametrize(
    "target, dataset, exc",
    [(None, "tiny", TypeError), ("", "tiny", ValueError), (TARGET, "", ValueError),
     (b"127.0.0.1:1", "tiny", TypeError),
     # No dataset name: the local default, whose target is a dataset path.
     (TARGET, None, ValueError), (None, None, TypeError)],
)
def test_bad_target_or_dataset(target, dataset, exc) -> None:
    with pytest.raises(exc) as e:
        stoker.Loader(target, dataset)
    if target == TARGET and dataset is None:
        assert "give its address and a dataset name" in str(e.value)


def test_good_arguments_are_normalized() -> None:
    ld = make(batch_size=np.int64(8), prefetch=np.uint16(1024), seed=2**64 - 1, rank=np.int32(1),
              world_size=torch.tensor(3), shuffle=np.bool_(False), drop_last=True, timeout=np.float32(2.5),
              layout="nhwc", pin_memory=None, transform=T.Compose([T.CenterCrop(8)]))
    assert (ld.batch_size, ld.prefetch, ld.seed, ld.rank, ld.world_size) == (8, 1024, 2**64 - 1, 1, 3)
    for v in (ld.batch_size, ld.prefetch, ld.seed, ld.rank, ld.world_size):
        assert type(v) is int
    assert ld.shuffle is False and ld.drop_last is True and ld.pin_memory is None
    assert ld.timeout == 2.5 and type(ld.timeout) is float
    assert ld.layout == "NHWC"
    assert make(timeout=7).timeout == 7.0 and make(timeout=None).timeout is None
    assert make(prefetch=1).prefetch == 1 and make(batch_size=65536).batch_size == 65536
    # cpu_weight goes into the JobSpec (1, the default, as unset).
    assert make(cpu_weight=np.float32(2.5))._job().spec().cpu_weight == 2.5
    assert make()._job().spec().cpu_weight == 0
    # Other transform forms: one op, a list of ops.
    make(transform=T.CenterCrop(8))
    make(transform=[T.CenterCrop(8), T.RandomHorizontalFlip()])


def test_shuffle_spellings() -> None:
    from stoker.v1 import stoker_pb2 as pb

    def spec(**kw) -> pb.JobSpec:
        return make(transform="imagenet-eval", **kw)._job().spec()

    # True and "global" are one job: DataLoader's shuffle=True.
    assert make(shuffle="global").shuffle is True and spec(shuffle="global") == spec(shuffle=True)
    assert spec(shuffle=True).shuffle_mode == pb.SHUFFLE_MODE_UNSPECIFIED
    block = spec(shuffle="block")
    assert block.shuffle and block.shuffle_mode == pb.SHUFFLE_MODE_BLOCK and block.shuffle_window == 0
    assert spec(shuffle="block", shuffle_window=np.int64(8)).shuffle_window == 8
    off = spec(shuffle=False)
    assert not off.shuffle and off.shuffle_mode == pb.SHUFFLE_MODE_UNSPECIFIED
    ld = make(shuffle="block", shuffle_window=1024)
    assert ld.shuffle == "block" and ld.shuffle_window == 1024 and "shuffle='block'" in repr(ld)


@pytest.mark.parametrize("epoch, exc", [(1.5, TypeError), (True, TypeError), ("1", TypeError), (-1, ValueError),
                                        (2**64, ValueError)])
def test_set_epoch_is_checked(epoch, exc) -> None:
    ld = make()
    with pytest.raises(exc):
        ld.set_epoch(epoch)
    ld.set_epoch(np.int64(3))
    assert ld.epoch == 3 and type(ld.epoch) is int


@pytest.mark.parametrize("timeout, exc", [(0, ValueError), ("5", TypeError), (math.inf, ValueError)])
def test_list_datasets_timeout_is_checked(timeout, exc) -> None:
    with pytest.raises(exc):
        stoker.list_datasets(TARGET, timeout=timeout)


def test_connection_attributes_are_read_only() -> None:
    ld = make(token="tok-123")
    assert ld.token == "tok-123" and ld.credentials is None
    with pytest.raises(AttributeError):
        ld.token = "other"
    assert "tok-123" not in repr(ld) + repr(ld._endpoint)
