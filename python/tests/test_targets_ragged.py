"""A batch's targets on the wire: ragged arrays (BatchHeader.targets), per
array every sample's instances back to back and N + 1 offsets. Served by a
real server (gRPC and shared memory), the flat arrays and offsets must be
what the samples' targets are (the samples' boxes checked against
torchvision's replay of their traces, as test_targets does), each sample's
tensors views into the batch's arrays (one storage a batch, at the sample's
offset: no copy a sample; the masks decoded from their runs); and arrays whose offsets are out of range or go
down, or whose lengths are not what the offsets say, are refused with a
clear error before anything is read."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import numpy as np
import pytest
import torch
from torchvision import tv_tensors

import stoker
import stoker._buffers as buffers
from stoker import transforms as T
from stoker._errors import StokerError
from stoker._targets import arrays_of, targets_of
from stoker.v1 import stoker_pb2 as pb
from test_targets import TRANSFORMS, N, check, coco_sources, det, server  # noqa: F401 (the fixtures)

ALL = ("boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility", "masks")


def runs_of(mask: torch.Tensor) -> List[int]:
    """A mask's runs, row-major, alternating 0 and 1 from a run of 0 (the
    wire's encoding, written here from its definition)."""
    flat = mask.reshape(-1).numpy().astype(np.int8)
    edges = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate(([0], edges, [flat.size]))
    runs = np.diff(bounds).tolist()
    if flat.size and flat[0] == 1:
        runs = [0] + runs
    return runs


def storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def check_flat(bt: Any, targets: List[Dict[str, Any]], where: str, tail: Any = None) -> None:
    """bt's arrays (in its header, or in its slot, ``tail``) are the
    samples' targets back to back, its offsets their starts, and each
    sample's tensors views into one array of the batch: of the slot itself
    when the arrays are there."""
    arrays = arrays_of(bt, tail)
    bt = SimpleNamespace(**{k: getattr(bt, k) for k in ("offsets", "canvas", "image_ids", "keypoints_per_instance", "masks")},
                         **{k: a.tobytes() for k, a in arrays.items()})
    ks = [len(t["labels"]) for t in targets]
    off = np.concatenate(([0], np.cumsum(ks))).tolist()
    assert list(bt.offsets) == off, where
    assert list(bt.canvas) == [s for t in targets for s in t["boxes"].canvas_size], where
    assert list(bt.image_ids) == [t["image_id"] for t in targets], where
    k = off[-1]
    boxes = np.frombuffer(bt.boxes, dtype="<f4").reshape(k, 4)
    assert np.array_equal(boxes, torch.cat([t["boxes"].as_subclass(torch.Tensor) for t in targets]).numpy()), where
    assert np.array_equal(np.frombuffer(bt.labels, dtype="<i8"), torch.cat([t["labels"] for t in targets]).numpy()), where
    assert np.array_equal(np.frombuffer(bt.iscrowd, dtype=np.uint8), torch.cat([t["iscrowd"] for t in targets]).numpy()), where
    ps = list(bt.keypoints_per_instance)
    assert ps == [t["keypoints"].shape[1] for t in targets] and max(ps) > 0, where
    assert np.array_equal(np.frombuffer(bt.keypoints, dtype="<f4"),
                          torch.cat([t["keypoints"].as_subclass(torch.Tensor).reshape(-1) for t in targets]).numpy()), where
    assert np.array_equal(np.frombuffer(bt.keypoints_visibility, dtype=np.uint8),
                          torch.cat([t["keypoints_visibility"].reshape(-1) for t in targets]).numpy()), where
    # The masks: each instance's runs, written from its decoded mask.
    assert bt.masks, where
    runs = [runs_of(m) for t in targets for m in t["masks"]]
    moff = np.concatenate(([0], np.cumsum([len(r) for r in runs]))).astype(np.uint32)
    assert np.array_equal(np.frombuffer(bt.mask_offsets, dtype="<u4"), moff), where
    assert np.array_equal(np.frombuffer(bt.mask_runs, dtype="<u4"), np.array(sum(runs, []), dtype=np.uint32)), where
    # Views, not copies: every sample's tensor of a key in one storage, at
    # its offset in the batch's array.
    # (The masks are decoded from their runs, sample by sample: no view.)
    for key, elem in (("boxes", 16), ("labels", 8), ("iscrowd", 8), ("keypoints", None), ("keypoints_visibility", None)):
        base = storage(targets[0][key])
        assert all(storage(t[key]) == base for t in targets), f"{where}: {key} in several storages"
        if elem:
            for i, t in enumerate(targets):
                assert t[key].data_ptr() == base + elem * off[i], f"{where}: sample {i}'s {key} is not at its offset"
    po = np.concatenate(([0], np.cumsum([ks[i] * ps[i] for i in range(len(ks))]))).tolist()
    base = storage(targets[0]["keypoints"])
    for i, t in enumerate(targets):
        assert t["keypoints"].data_ptr() == base + 8 * po[i], where
        assert t["keypoints_visibility"].data_ptr() == storage(t["keypoints_visibility"]) + po[i], where
    if tail is not None:  # in the slot: views of the slot's memory, no copy
        for key, name in (("boxes", "boxes"), ("labels", "labels"), ("keypoints", "keypoints"),
                          ("keypoints_visibility", "keypoints_visibility")):
            assert storage(targets[0][key]) == arrays[name].ctypes.data, f"{where}: {key} not a view of the slot"


@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_flat_arrays_are_the_samples_targets(server: str, det: Path, transport: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    got: List[Any] = []
    real = buffers.targets_of

    def tap(bt: Any, *args: Any, **kw: Any) -> Any:
        got.append((bt, kw.get("tail")))
        return real(bt, *args, **kw)

    monkeypatch.setattr(buffers, "targets_of", tap)
    want = coco_sources(det)
    seen, instances = 0, 0
    with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(TRANSFORMS["rrc-hflip-jitter"]), targets=ALL,
                       trace=True, return_indices=True, pin_memory=False, timeout=60, seed=5, transport=transport) as ld:
        for b in ld:
            images, targets, indices = b
            assert len(got) == 1
            bt, tail = got.pop()
            # Over shared memory, every batch's arrays in its slot (they
            # fit in the room a 64x64 output leaves), over gRPC in its header.
            assert bt.HasField("in_slot") == (transport == "shm") and (tail is not None) == (transport == "shm")
            check_flat(bt, targets, f"{transport} batch {b.number}", tail)
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                check(t, want[idx], b.trace[i], images[i], f"{transport} sample {idx}")
                assert isinstance(t["boxes"], tv_tensors.BoundingBoxes) and isinstance(t["masks"], tv_tensors.Mask)
                assert isinstance(t["keypoints"], tv_tensors.KeyPoints)
                seen += 1
                instances += len(t["labels"])
    assert seen == N and instances > N


def batch_targets() -> pb.BatchTargets:
    """Three samples' targets (2, 0 and 1 instances of P = 2, with masks on
    2x3, 1x1 and 2x2 canvases), as a server packs them."""
    k, kp = 3, 6
    masks = [[1, 2, 3], [6], [0, 1, 3]]  # the runs: 2x3, 2x3, 2x2
    return pb.BatchTargets(
        offsets=[0, 2, 2, 3], canvas=[2, 3, 1, 1, 2, 2], image_ids=[7, 8, 9], keypoints_per_instance=[2, 2, 2], box_format=0,
        boxes=np.arange(4 * k, dtype="<f4").tobytes(), labels=np.array([1, 2, 3], dtype="<i8").tobytes(),
        iscrowd=bytes([0, 1, 0]), keypoints=np.arange(2 * kp, dtype="<f4").tobytes(), keypoints_visibility=bytes([2] * kp),
        masks=True, mask_offsets=np.array([0, 3, 4, 7], dtype="<u4").tobytes(),
        mask_runs=np.array(sum(masks, []), dtype="<u4").tobytes())


def test_decodes_a_packed_batch() -> None:
    out = targets_of(batch_targets(), 3, torch)
    assert [len(t["labels"]) for t in out] == [2, 0, 1]
    assert out[0]["boxes"].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]] and out[2]["boxes"].tolist() == [[8, 9, 10, 11]]
    assert tuple(out[2]["boxes"].canvas_size) == (2, 2) and out[1]["boxes"].shape == (0, 4)
    assert out[0]["iscrowd"].tolist() == [0, 1] and out[0]["iscrowd"].dtype == torch.int64
    assert out[2]["keypoints"].tolist() == [[[8, 9], [10, 11]]] and out[1]["keypoints"].shape == (0, 2, 2)
    assert out[0]["masks"].tolist() == [[[0, 1, 1], [0, 0, 0]], [[0, 0, 0], [0, 0, 0]]]
    assert out[2]["masks"].tolist() == [[[1, 0], [0, 0]]] and out[1]["masks"].shape == (0, 1, 1)
    assert [t["image_id"] for t in out] == [7, 8, 9]
    # A tuple of names: exactly those keys, in its order.
    some = targets_of(batch_targets(), 3, torch, ("masks", "labels"))
    assert [list(t) for t in some] == [["masks", "labels"]] * 3 and torch.equal(some[0]["masks"], out[0]["masks"])
    with pytest.raises(StokerError, match=r"sample 0's lack \['keypoints'\]"):
        targets_of(spoil(keypoints_per_instance=[], keypoints=b"", keypoints_visibility=b""), 3, torch, ("boxes", "keypoints"))


def fill_block(runs: List[int], vals: List[int]) -> bytes:
    """A sample's fill block: F, the runs, the values padded to 4 bytes."""
    b = np.array([len(runs)] + runs, dtype="<u4").tobytes() + bytes(vals)
    return b + bytes(-len(b) % 4)


def with_fills() -> pb.BatchTargets:
    """batch_targets with fill blocks: sample 0's (2x3) its first column
    255 and its last pixel 7, sample 2's (2x2) its second row 1."""
    bt = batch_targets()
    b0, b2 = fill_block([0, 1, 2, 1, 1, 1], [255, 255, 7]), fill_block([2, 2], [1])
    bt.mask_fill_offsets = np.array([0, len(b0), len(b0), len(b0) + len(b2)], dtype="<u4").tobytes()
    bt.mask_fills = b0 + b2
    return bt


def test_decodes_fill_blocks() -> None:
    """Each sample's fill block sets its values over every instance's mask;
    a sample without one keeps its runs."""
    out = targets_of(with_fills(), 3, torch)
    assert out[0]["masks"].tolist() == [[[255, 1, 1], [255, 0, 7]], [[255, 0, 0], [255, 0, 7]]]
    assert out[2]["masks"].tolist() == [[[1, 0], [1, 1]]] and out[1]["masks"].shape == (0, 1, 1)
    assert out[0]["masks"].dtype == torch.uint8


def spoil_fills(offsets: List[int], fills: Any = None) -> pb.BatchTargets:
    bt = with_fills()
    bt.mask_fill_offsets = np.array(offsets, dtype="<u4").tobytes()
    if fills is not None:
        bt.mask_fills = fills
    return bt


@pytest.mark.parametrize("bt,match", [
    (spoil_fills([0, 36, 32, 44]), r"mask fill offsets \[0, 36, 32, 44\]"),
    (spoil_fills([0, 36, 36, 40]), r"mask fill offsets \[0, 36, 36, 40\] for mask_fills of 48 bytes"),
    (spoil_fills([0, 36, 36]), r"mask_fill_offsets of 12 bytes, want 16"),
    (spoil_fills([0, 32, 32, 52], fill_block([0, 1, 2, 1, 1, 1], [255, 255, 7]) + fill_block([2, 1], [1]) + bytes(4)),
     r"sample 2's fill block of 20 bytes does not add up"),
    (spoil_fills([0, 32, 32, 48], fill_block([0, 1, 2, 1, 1, 1], [255, 255, 7]) + fill_block([2, 1], [1])),
     r"sample 2's fill runs cover 3 pixels of 4"),
    (spoil_fills([0, 32, 32, 48], fill_block([0, 1, 2, 1, 1, 1], [255, 0, 7]) + fill_block([2, 2], [1])),
     r"sample 0's fill runs cover 6 pixels of 6, values \[255, 0, 7\]"),
    (spoil_fills([], b"\0" * 8), r"mask_fills of 8 bytes, want 0"),
])
def test_hostile_fill_blocks_are_refused(bt: Any, match: str) -> None:
    with pytest.raises(StokerError, match=r"batch 4: targets: " + match):
        targets_of(bt, 3, torch, number=4)


def spoil(**changes: Any) -> pb.BatchTargets:
    bt = batch_targets()
    for k, v in changes.items():
        if isinstance(getattr(bt, k), (bytes, bool, int)):
            setattr(bt, k, v)
        else:
            del getattr(bt, k)[:]
            getattr(bt, k).extend(v)
    return bt


@pytest.mark.parametrize("bt,n,match", [
    (spoil(offsets=[0, 2, 1, 3]), 3, r"offsets go down at sample 1 \(2, then 1\)"),
    (spoil(offsets=[0, 2, 2, 300]), 3, r"boxes of 48 bytes, want 4800 for 300 instances"),
    (spoil(offsets=[0, 2, 2, 2]), 3, r"boxes of 48 bytes, want 32 for 2 instances"),
    (spoil(offsets=[1, 2, 2, 3]), 3, r"offsets start at 1"),
    (spoil(offsets=[0, 2, 3]), 3, r"3 offsets, 6 canvas sizes and 3 image ids for 3 samples"),
    (batch_targets(), 4, r"4 offsets, 6 canvas sizes and 3 image ids for 4 samples"),
    (spoil(labels=b"\0" * 16), 3, r"labels of 16 bytes, want 24"),
    (spoil(keypoints_per_instance=[2, 2, 9]), 3, r"keypoints of 48 bytes, want 104"),
    (spoil(keypoints_per_instance=[2, 2]), 3, r"2 keypoint counts for 3 samples"),
    (spoil(box_format=7), 3, r"box format 7"),
    (spoil(mask_offsets=np.array([0, 3, 2, 7], dtype="<u4").tobytes()), 3, r"mask offsets go down at instance 1 \(3, then 2\)"),
    (spoil(mask_offsets=np.array([0, 3, 4, 70], dtype="<u4").tobytes()), 3, r"mask offsets end at 70, mask_runs holds 7"),
    (spoil(mask_offsets=np.array([1, 3, 4, 7], dtype="<u4").tobytes()), 3, r"mask offsets start at 1"),
    (spoil(mask_offsets=b"\0" * 12), 3, r"mask_offsets of 12 bytes, want 16"),
    (spoil(mask_runs=np.array([1, 2, 3, 6, 0, 1, 4], dtype="<u4").tobytes()), 3, r"mask 2: runs of 5 pixels on a canvas of 4"),
    (None, 3, r"the batch has none"),
])
def test_hostile_arrays_are_refused(bt: Any, n: int, match: str) -> None:
    with pytest.raises(StokerError, match=r"batch 4: targets: " + match):
        targets_of(bt, n, torch, number=4)
