"""Loader(targets=True): each sample's field "targets" (its boxes, labels and
keypoints moved through its geometry by the server, as torchvision.transforms.v2
moves a tv_tensors.BoundingBoxes and a tv_tensors.KeyPoints) as the dict
torchvision's detection models take. The layout (docs/detection.md),
little-endian: u32 H, u32 W (the canvas: the sample's output size), i64 image
id, u32 K, u32 the boxes' format in its low byte (0 XYXY, 1 XYWH, 2 CXCYWH:
XYXY but after a ConvertBoundingBoxFormat) and P, the keypoints an instance,
above it (P << 8); then K x 4 float32 boxes, K int64 labels, K x P x 2 float32
keypoints, K uint8 crowd flags, K x P uint8 visibilities. Without keypoints
(P = 0) it is 24 + 25K bytes."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional

import numpy as np

from stoker._errors import StokerError

HEADER = 24
FORMATS = ("XYXY", "XYWH", "CXCYWH")


def parse_targets(raw: Optional[bytes], torch: Any) -> Dict[str, Any]:
    """One sample's targets: "boxes" (tv_tensors.BoundingBoxes [K, 4], in
    their format, canvas_size (H, W)), "labels" int64 [K], "iscrowd" int64
    [K], "image_id" (an int); when the dataset has keypoints (P of them an
    instance), "keypoints" (tv_tensors.KeyPoints [K, P, 2] float32, x and y,
    canvas_size (H, W)) and "keypoints_visibility" (uint8 [K, P]: COCO's v,
    0 not labelled, 1 labelled but not visible, 2 visible; the KeyPoints
    class has no visibility, and the geometry does not change it)."""
    from torchvision import tv_tensors

    if raw is None or len(raw) < HEADER:
        raise StokerError("INTERNAL", f"a sample's targets of {0 if raw is None else len(raw)} bytes: want at least {HEADER}")
    h, w, image_id, k, word = struct.unpack_from("<IIqII", raw, 0)
    fmt, p = word & 0xFF, word >> 8
    if fmt >= len(FORMATS):
        raise StokerError("INTERNAL", f"a sample's targets with box format {fmt}: want 0 (XYXY), 1 (XYWH) or 2 (CXCYWH)")
    if len(raw) != HEADER + 25 * k + 9 * k * p:
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
    return out


def targets_of(values: List[Optional[bytes]], torch: Any) -> List[Dict[str, Any]]:
    """A batch's targets, per sample in batch order."""
    return [parse_targets(v, torch) for v in values]
