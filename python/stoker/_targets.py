"""Loader(targets=True): each sample's field "targets" (its boxes, labels and
keypoints moved through its geometry by the server, as torchvision.transforms.v2
moves a tv_tensors.BoundingBoxes and a tv_tensors.KeyPoints) as the dict
torchvision's detection models take. The layout (docs/detection.md),
little-endian: u32 H, u32 W (the canvas: the sample's output size), i64 image
id, u32 K, u32 the boxes' format in its low byte (0 XYXY, 1 XYWH, 2 CXCYWH:
XYXY but after a ConvertBoundingBoxFormat) and P, the keypoints an instance,
above it (P << 8); then K x 4 float32 boxes, K int64 labels, K x P x 2 float32
keypoints, K uint8 crowd flags, K x P uint8 visibilities. Without keypoints
(P = 0) it is 24 + 25K bytes. With masks (asked for: the word's bit 31 set),
zeros to a multiple of 4 bytes, K u32 run counts, then each instance's runs
(u32): its mask on the H x W canvas, row-major, alternating runs of 0 and 1
from a run of 0."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from stoker._errors import StokerError

HEADER = 24
FORMATS = ("XYXY", "XYWH", "CXCYWH")
MASKS = 1 << 31  # the header word's bit: the masks follow
# The keys Loader(targets=(...)) may name: torchvision's.
NAMES = ("boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility", "masks")


def target_names(value: Union[bool, Sequence[str]]) -> Tuple[bool, Tuple[str, ...]]:
    """Loader(targets=...): True (every key the dataset has but "masks", as
    torchvision's wrap_dataset_for_transforms_v2 by default) or False, or the
    keys asked for, exactly (a tuple of NAMES)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value), ()
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise TypeError(f"targets must be a bool or a tuple of names among {', '.join(NAMES)}, got {value!r}")
    names = tuple(value)
    if not names:
        raise ValueError("targets=(): name at least one of " + ", ".join(NAMES) + " (or targets=True)")
    for n in names:
        if n not in NAMES:
            raise ValueError(f"targets: unknown name {n!r}: want some of {', '.join(NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"targets: a name asked for twice in {names!r}")
    return True, names


def parse_targets(raw: Optional[bytes], torch: Any, names: Sequence[str] = ()) -> Dict[str, Any]:
    """One sample's targets: "boxes" (tv_tensors.BoundingBoxes [K, 4], in
    their format, canvas_size (H, W)), "labels" int64 [K], "iscrowd" int64
    [K], "image_id" (an int); when the dataset has keypoints (P of them an
    instance), "keypoints" (tv_tensors.KeyPoints [K, P, 2] float32, x and y,
    canvas_size (H, W)) and "keypoints_visibility" (uint8 [K, P]: COCO's v,
    0 not labelled, 1 labelled but not visible, 2 visible; the KeyPoints
    class has no visibility, and the geometry does not change it); with
    masks, "masks" (tv_tensors.Mask [K, H, W] uint8, 0 or 1). names: the
    keys to keep (all but none)."""
    from torchvision import tv_tensors

    if raw is None or len(raw) < HEADER:
        raise StokerError("INTERNAL", f"a sample's targets of {0 if raw is None else len(raw)} bytes: want at least {HEADER}")
    h, w, image_id, k, word = struct.unpack_from("<IIqII", raw, 0)
    has_masks = bool(word & MASKS)
    fmt, p = word & 0xFF, (word & ~MASKS) >> 8
    if fmt >= len(FORMATS):
        raise StokerError("INTERNAL", f"a sample's targets with box format {fmt}: want 0 (XYXY), 1 (XYWH) or 2 (CXCYWH)")
    size = HEADER + 25 * k + 9 * k * p
    masks = None
    if has_masks:
        masks = _masks(raw, (size + 3) // 4 * 4, k, h, w, torch)
    elif len(raw) != size:
        raise StokerError("INTERNAL", f"a sample's targets of {len(raw)} bytes for {k} instances of {p} keypoints: "
                                      f"want {HEADER + 25 * k + 9 * k * p}")
    boxes = np.frombuffer(raw, dtype="<f4", count=4 * k, offset=HEADER).reshape(k, 4).copy()
    labels = np.frombuffer(raw, dtype="<i8", count=k, offset=HEADER + 16 * k).copy()
    at = HEADER + 24 * k + 8 * k * p  # the crowd flags, after the keypoints
    crowd = np.frombuffer(raw, dtype=np.uint8, count=k, offset=at).astype(np.int64)
    out = {
        "boxes": tv_tensors.BoundingBoxes(torch.from_numpy(boxes), format=FORMATS[fmt], canvas_size=(h, w)),
        "labels": torch.from_numpy(labels),
        "iscrowd": torch.from_numpy(crowd),
        "image_id": int(image_id),
    }
    if p:
        points = np.frombuffer(raw, dtype="<f4", count=2 * k * p, offset=HEADER + 24 * k).reshape(k, p, 2).copy()
        vis = np.frombuffer(raw, dtype=np.uint8, count=k * p, offset=at + k).reshape(k, p).copy()
        out["keypoints"] = tv_tensors.KeyPoints(torch.from_numpy(points), canvas_size=(h, w))
        out["keypoints_visibility"] = torch.from_numpy(vis)
    if masks is not None:
        out["masks"] = masks
    if names:
        missing = [n for n in names if n not in out]
        if missing:
            raise StokerError("INTERNAL", f"a sample's targets lack {missing}: the server sent {sorted(out)}")
        out = {n: out[n] for n in names}
    return out


def _masks(raw: bytes, at: int, k: int, h: int, w: int, torch: Any) -> Any:
    """The K masks of a sample's targets from byte at: K u32 run counts,
    then the runs, each mask's alternating 0 and 1 from a run of 0,
    row-major over H x W; a tv_tensors.Mask [K, H, W] uint8."""
    from torchvision import tv_tensors

    if len(raw) < at + 4 * k:
        raise StokerError("INTERNAL", f"a sample's targets of {len(raw)} bytes: its {k} masks' run counts need {at + 4 * k}")
    counts = np.frombuffer(raw, dtype="<u4", count=k, offset=at).astype(np.int64)
    total = int(counts.sum())
    if len(raw) != at + 4 * k + 4 * total:
        raise StokerError("INTERNAL", f"a sample's targets of {len(raw)} bytes for {k} masks of {total} runs: want {at + 4 * k + 4 * total}")
    runs = np.frombuffer(raw, dtype="<u4", count=total, offset=at + 4 * k).astype(np.int64)
    out = np.empty((k, h * w), dtype=np.uint8)
    start = 0
    for i, n in enumerate(counts.tolist()):
        r = runs[start:start + n]
        start += n
        if int(r.sum()) != h * w:
            raise StokerError("INTERNAL", f"a sample's mask {i}: runs of {int(r.sum())} pixels on a {h}x{w} canvas")
        out[i] = np.repeat((np.arange(n) & 1).astype(np.uint8), r)
    return tv_tensors.Mask(torch.from_numpy(out.reshape(k, h, w)))


def targets_of(values: List[Optional[bytes]], torch: Any, names: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """A batch's targets, per sample in batch order (names: the keys asked
    for; none: all)."""
    return [parse_targets(v, torch, names) for v in values]
