"""A batch's targets in its shared-memory slot (BatchTargets.in_slot): the
server puts their arrays after the pixels when they fit in the room the
slot keeps (at most an eighth of the pixels), in the header otherwise.
Through a real server, the targets are the same tensors whichever way they
came: in the slot, in the header beside a slot (they did not fit), and over
plain gRPC; in the slot, they are views of the slot itself, which stays
held while they live and goes back once they are gone; pinned, they are
copied and the slot goes back at once; and ranges the client cannot trust
(in the pixels, past the slot, unaligned, overlapping) are refused before
anything is read."""

from __future__ import annotations

import gc
import weakref
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import torch

import stoker
import stoker._buffers as buffers
from stoker import transforms as T
from stoker._buffers import _Batch
from stoker._errors import StokerError
from stoker._targets import slot_extent, targets_of
from stoker.v1 import stoker_pb2 as pb
from test_targets import N, det, server  # noqa: F401 (the fixtures)
from test_targets_ragged import ALL, batch_targets

# Every key, masks and keypoints among them: the largest arrays.
TRANSFORM = [T.RandomResizedCrop(64, scale=(0.3, 1.0)), T.RandomHorizontalFlip()]


def epoch(server: str, transport: str, size: int, monkeypatch: pytest.MonkeyPatch) -> Tuple[Dict[int, Any], Dict[str, int]]:
    """One epoch's targets by batch number, cloned, and how many batches'
    targets came in the slot, in the header beside a slot, and in chunks'
    headers."""
    seen: List[Tuple[bool, bool]] = []
    real = buffers.targets_of

    def tap(bt: Any, *args: Any, **kw: Any) -> Any:
        seen.append((bt.HasField("in_slot"), kw.get("tail") is not None))
        return real(bt, *args, **kw)

    monkeypatch.setattr(buffers, "targets_of", tap)
    out: Dict[int, Any] = {}
    tf = [T.RandomResizedCrop(size, scale=(0.3, 1.0)), T.RandomHorizontalFlip()]
    with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(tf), targets=ALL, return_indices=True,
                       pin_memory=False, timeout=60, seed=11, transport=transport) as ld:
        for b in ld:
            _, targets, indices = b
            out[b.number] = (indices.tolist(), [{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
                                                for t in targets])
        slots = ld.stats.shm_batches
    monkeypatch.undo()
    counts = {"slot": sum(1 for s, _ in seen if s), "header": sum(1 for s, _ in seen if not s)}
    counts["pixels in slot"] = slots
    for in_slot, has_tail in seen:
        assert not in_slot or has_tail, "targets in a slot, read without it"
    return out, counts


def same(a: Dict[int, Any], b: Dict[int, Any], what: str) -> None:
    assert sorted(a) == sorted(b), what
    for k in a:
        (ia, ta), (ib, tb) = a[k], b[k]
        assert ia == ib, f"{what}: batch {k}'s samples"
        for i, (x, y) in enumerate(zip(ta, tb)):
            assert list(x) == list(y), f"{what}: batch {k} sample {i}'s keys"
            for key in x:
                if isinstance(x[key], torch.Tensor):
                    assert x[key].dtype == y[key].dtype and torch.equal(x[key], y[key]), f"{what}: batch {k} sample {i}'s {key}"
                    if key in ("boxes", "keypoints"):
                        assert tuple(x[key].canvas_size) == tuple(y[key].canvas_size), f"{what}: {key}'s canvas"
                    if key == "boxes":
                        assert x[key].format == y[key].format
                else:
                    assert x[key] == y[key], f"{what}: batch {k} sample {i}'s {key}"


def test_targets_the_same_in_the_slot_beside_it_and_over_grpc(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64x64 output leaves room for every batch's arrays (in the slot);
    a 4x4 one leaves 64 bytes, too few for a batch with an instance (in the
    header, the pixels still in the slot); both are gRPC's targets."""
    batches = (N + 5) // 6
    grpc_big, c = epoch(server, "grpc", 64, monkeypatch)
    assert c == {"slot": 0, "header": batches, "pixels in slot": 0}
    shm_big, c = epoch(server, "shm", 64, monkeypatch)
    assert c == {"slot": batches, "header": 0, "pixels in slot": batches}, c
    same(grpc_big, shm_big, "in the slot vs gRPC")
    assert sum(len(t["labels"]) for _, ts in shm_big.values() for t in ts) > N  # instances, not empty batches

    grpc_tiny, _ = epoch(server, "grpc", 4, monkeypatch)
    shm_tiny, c = epoch(server, "shm", 4, monkeypatch)
    assert c["pixels in slot"] == batches and c["header"] >= 1 and c["slot"] + c["header"] == batches, c
    same(grpc_tiny, shm_tiny, "beside the slot (did not fit) vs gRPC")


def test_targets_hold_the_slot_until_they_go(server: str) -> None:
    """Unpinned, a batch's targets are views of its slot: kept alone (the
    images dropped), they keep the slot held and their values through the
    rest of the epoch, whose batches go through the ring's other slots; the
    slot goes back once they are gone."""
    with stoker.Loader(server, "coco", batch_size=4, transform=T.Compose(TRANSFORM), targets=("boxes", "labels"),
                       pin_memory=False, timeout=60, seed=2, transport="shm", prefetch=1) as ld:
        it = iter(ld)
        b = next(it)
        ring = ld._session.stream.ring
        assert ring is not None and sum(t["boxes"].numel() for t in b.targets)
        kept = b.targets
        snapshot = [(t["boxes"].clone(), t["labels"].clone()) for t in kept]
        del b
        n = 0
        for b in it:
            n += 1
        del b
        gc.collect()
        assert n == (N + 3) // 4 - 1  # through the ring's other slots
        assert all(torch.equal(t["boxes"], bx) and torch.equal(t["labels"], lb) for t, (bx, lb) in zip(kept, snapshot))
        # The kept targets' slot, found from where their bytes lie (the other
        # slots come and go: the next epoch's batches keep arriving).
        base = np.frombuffer(ring._mm, np.uint8, 1).ctypes.data
        slot = (kept[0]["boxes"].untyped_storage().data_ptr() - base) // ring.slot_bytes
        assert 0 <= slot < ring.slots and ring._held[slot]
        # Its release, seen whether or not the stream has already handed it
        # back as a credit (and the server filled it again) by the time we look.
        released: List[int] = []
        collect = ring.collect

        def recording() -> List[int]:
            out = collect()
            released.extend(out)
            return out

        ring.collect = recording
        del kept
        gc.collect()
        with ring._lock:
            released.extend(ring._released)
        assert slot in released, (slot, released)


def fake_slot(bt: pb.BatchTargets, pixels: int) -> Tuple[np.ndarray, pb.BatchTargets]:
    """A slot of ``pixels`` bytes of pixels, bt's arrays after them each at
    a multiple of 64, as the server writes it; bt with in_slot."""
    names = ("boxes", "labels", "iscrowd", "keypoints", "keypoints_visibility", "mask_offsets", "mask_runs", "overlap_masks",
             "mask_fill_offsets", "mask_fills")
    out = pb.BatchTargets()
    out.CopyFrom(bt)
    at, parts = (pixels + 63) // 64 * 64, {}
    for name in names:
        data = getattr(bt, name)
        parts[name] = (at, data)
        getattr(out.in_slot, name).offset, getattr(out.in_slot, name).length = at, len(data)
        out.ClearField(name)
        at = (at + len(data) + 63) // 64 * 64
    mem = np.full(at + 64, 0xEE, dtype=np.uint8)
    for name, (o, data) in parts.items():
        mem[o:o + len(data)] = np.frombuffer(data, dtype=np.uint8)
    return mem, out


def test_pinned_copies_and_releases_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pinned, the pixels and the targets' arrays are copied out of the
    slot and the slot goes back at once; unpinned, the targets are views of
    it. Both give the header's targets."""
    want = targets_of(batch_targets(), 3, torch)
    mem, bt = fake_slot(batch_targets(), 37)
    h = pb.BatchHeader(number=1, data_bytes=37, shape=[3, 1, 1, 37 // 3], targets=bt)
    end = slot_extent(bt, 37, len(mem))
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, pin_memory=False, **kw: real_empty(*a, **kw))  # no CUDA here
    for pin in (True, False):
        released: List[bool] = []
        arr = mem[:end].copy()
        weakref.finalize(arr, released.append, True)
        b = _Batch.in_slot(h, arr, pin)
        del arr
        gc.collect()
        assert released == ([True] if pin else []), f"pin {pin}: released {released}"
        got = targets_of(h.targets, 3, torch, tail=b.tail)
        assert all((x[key] == y[key]) if key == "image_id" else torch.equal(x[key], y[key])
                   for x, y in zip(want, got) for key in x), f"pin {pin}"
        if not pin:
            assert got[0]["boxes"].untyped_storage().data_ptr() == b.tail[0].ctypes.data + bt.in_slot.boxes.offset - b.tail[1]
            del b, got
            gc.collect()
            assert released == [True]


def test_no_instance_in_the_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of no instance whose pixels end at a multiple of 64: every
    array's place is the pixels' end, with no length, so the batch's slot
    bytes are its pixels alone; its targets are still read (empty), pinned
    or not, not refused as missing."""
    bt = pb.BatchTargets(offsets=[0, 0, 0], canvas=[2, 2, 2, 2], image_ids=[1, 2], box_format=0)
    mem, bt = fake_slot(bt, 64)
    h = pb.BatchHeader(number=2, data_bytes=64, shape=[2, 1, 1, 32], targets=bt)
    end = slot_extent(bt, 64, len(mem))
    assert end == 64
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, pin_memory=False, **kw: real_empty(*a, **kw))  # no CUDA here
    for pin in (True, False):
        b = _Batch.in_slot(h, mem[:end], pin)
        got = targets_of(h.targets, 2, torch, tail=b.tail)
        assert [t["boxes"].shape for t in got] == [(0, 4)] * 2 and [t["image_id"] for t in got] == [1, 2], f"pin {pin}"


@pytest.mark.parametrize("spoil,match", [
    (lambda r: setattr(r.boxes, "offset", 0), r"boxes at \[0, \+48\) of a slot whose pixels end at 3[27]"),
    (lambda r: setattr(r.labels, "length", 1 << 40), r"labels at \[\d+, \+1099511627776\)"),
    (lambda r: setattr(r.labels, "offset", r.boxes.offset + 4), r"labels at \[\d+, \+24\) of a slot"),
    (lambda r: setattr(r.labels, "offset", r.boxes.offset + 8), r"labels at \[\d+, \+24\) overlaps boxes"),
    (lambda r: r.ClearField("mask_runs"), r"mask_runs: no place in the slot"),
])
def test_hostile_ranges_are_refused(spoil: Any, match: str) -> None:
    mem, bt = fake_slot(batch_targets(), 37)
    spoil(bt.in_slot)
    with pytest.raises(StokerError, match=r"batch 5: targets: " + match):
        slot_extent(bt, 37, len(mem), 5)
    with pytest.raises(StokerError, match=r"batch 5: targets: " + match):
        targets_of(bt, 3, torch, number=5, tail=(mem[32:], 32))  # as _Batch.in_slot: from the pixels' end
    both = pb.BatchTargets()
    both.CopyFrom(fake_slot(batch_targets(), 37)[1])
    both.labels = b"\0" * 24
    with pytest.raises(StokerError, match=r"labels both in the slot and in the header"):
        slot_extent(both, 37, len(mem), 5)
    with pytest.raises(StokerError, match=r"in a slot, and the batch has none"):
        targets_of(fake_slot(batch_targets(), 37)[1], 3, torch, number=5)
